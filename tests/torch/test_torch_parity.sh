#!/usr/bin/env bash
# PyTorch parity of the CPU model (its MLP untiled and in tiles of tokens, the PyTorch side untiled):
# tests/torch/dump.c runs the C model and writes weights, batch,
# loss, log-sum-exp of the logits and gradients; tests/torch/parity.py redoes it in PyTorch and compares (the
# tolerances are stated there). Then a tied model's step through a pipelined plan under mpirun
# against PyTorch (tests/torch/pipelined_tied.py). Uses Debian's python3-torch through /usr/bin/python3 (not a
# python3 earlier on PATH), installed by `make test`'s set-up step (scripts/test_deps.sh).
# usage: tests/torch/test_torch_parity.sh BUILD_DIR
set -eu
build=${1:-build}
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the tree
$py -c 'import torch, numpy' 2>/dev/null ||
    { echo "test_torch_parity: PyTorch missing for $py (make test installs it first: scripts/test_deps.sh)"; exit 1; }
[ -f "$build/libwprt.a" ] || { echo "test_torch_parity: $build/libwprt.a missing (run make)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gcc -O2 -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -fopenmp -Iruntime \
    tests/torch/dump.c "$build/libwprt.a" -lopenblas -ljansson -lm -o "$tmp/dump"
status=0
for variant in untied tied llama3 head_dim mlp_tile mlp_tile_rc; do
    "$tmp/dump" "$tmp/$variant.safetensors" $variant
    (cd tests/torch && $py parity.py "$tmp/$variant.safetensors") || status=1
done

# A tied model's gradients through pipelined plans (tests/torch/pipelined_tied.py): tiny8 tied on 4
# ranks, the head a mirror of the embedding in the last chunk: weipipe-interleave (TIE on every
# rank) and 1f1b (TIE_ALLREDUCE between the first stage and the last); the first step with beta1 0
# and no clipping leaves the gradient in the checkpoint
M=4 G=2 S=48
python3 -c 'import json,sys; c=json.load(open("tests/data/tiny8/config.json")); c["tie_word_embeddings"]=True; json.dump(c,open(sys.argv[1],"w"))' "$tmp/tied.json"
python3 -c 'import random; random.seed(7); open("'"$tmp"'/text","w").write("".join(random.choice("abcdefghij klmnopqrstuvwxyz.,") for _ in range(4000)))'
mpirun=(mpirun --oversubscribe); [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
for s in weipipe-interleave 1f1b; do
    d=$tmp/$s
    mkdir -p "$d/init" "$d/s1"
    if "$build/wpgen" emit -t topologies/cpu-2x2.json -m "$tmp/tied.json" --micro-batch-size $G -s $s --micro-batches 1 \
            -o "$d/pipe" >"$tmp/out" 2>&1 && bash tests/make_emitted.sh "$d/pipe" >"$tmp/out" 2>&1 &&
        OMP_NUM_THREADS=1 "${mpirun[@]}" -np 4 "$d/pipe/train" --data "$tmp/text" --steps 0 --save "$d/init/checkpoint.json" >"$tmp/out" 2>&1 &&
        OMP_NUM_THREADS=1 "${mpirun[@]}" -np 4 "$d/pipe/train" --data "$tmp/text" --no-shuffle --steps 1 --beta1 0 --clip 0 --warmup 0 \
            --save "$d/s1/checkpoint.json" --log "$d/s1/log" >"$tmp/out" 2>&1; then
        loss=$(grep -o '"loss":[-0-9.eE+]*' "$d/s1/log" | head -1 | cut -d: -f2)
        echo "tied, $s:"
        (cd tests/torch && $py pipelined_tied.py "$tmp/tied.json" "$d/init/checkpoint.json" "$d/s1/checkpoint.json" "$tmp/text" $M $G $S "$loss") || status=1
    else
        echo "FAIL  the tied pipelined run under $s: $(tail -5 "$tmp/out")"; status=1
    fi
done
[ $status = 0 ] && echo "torch parity: loss, log-sum-exp and every gradient match (untied GQA, tied MQA, Llama 3.1 RoPE scaling, explicit head_dim, the MLP in tiles with and without recompute; a tied model through weipipe-interleave and 1f1b)"
exit $status
