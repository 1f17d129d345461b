#!/usr/bin/env bash
# A checkpoint resumes under any plan: each rank loads the slices it now owns from whichever
# shards hold them. A 4-rank weipipe-interleave run saved at step 3 resumes under 2-rank fsdp
# (each rank's shard a flat half of the model, cutting tensors) and under 4-rank 1f1b, and both
# land on the uninterrupted run's weights at step 6 within the fp32 parity tolerance (relative
# 1e-4 per tensor, tests/e2e/parity_lib.sh's; weipipe and fsdp sum a chunk's gradient across the
# ranks in other orders than 1f1b's micro-batch 0 first, so not bit for bit: only 1f1b and zb1
# with one replica resume into each other bit for bit, tests/e2e/test_data.sh). An fsdp
# checkpoint resumes under weipipe too. A plan of another global batch is refused (exit 2,
# nothing written) unless --allow-batch-change, which goes on from the saved data position.
# Prints the bytes each rank's shard holds: 12 per owned parameter.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
long=(--synthetic --seed 3 --lr 2e-3 --warmup 1 --steps 6)
sed 's/"devices": 4/"devices": 2/; s/"cpu-1x4"/"cpu-1x2"/' topologies/cpu-1x4.json >"$tmp/cpu-1x2.json"
emit() {   # DIR TOPO STRATEGY MICRO-BATCHES
    "$build/wpgen" emit -t "$2" -m "$model" --micro-batch-size 2 -s "$3" --micro-batches "$4" -o "$1" >"$tmp/emit.out" 2>&1 &&
        bash tests/make_emitted.sh "$1" >/dev/null 2>&1 || { bad "emit $3: $(tail -2 "$tmp/emit.out")"; return 1; }
}
emit_tiny8 "$tmp/wp" || bad "emit weipipe-interleave"
emit "$tmp/fsdp" "$tmp/cpu-1x2.json" fsdp 4
emit "$tmp/1f1b" topologies/cpu-1x4.json 1f1b 2
emit "$tmp/fsdp-small" "$tmp/cpu-1x2.json" fsdp 2   # half the global batch
wp=("${mpirun[@]}" -np 4 "$tmp/wp/train"); fsdp=("${mpirun[@]}" -np 2 "$tmp/fsdp/train")
f1b=("${mpirun[@]}" -np 4 "$tmp/1f1b/train"); small=("${mpirun[@]}" -np 2 "$tmp/fsdp-small/train")

mkdir -p "$tmp/u" "$tmp/a" "$tmp/f"
"${wp[@]}" "${long[@]}" --save "$tmp/u/ckpt.json" >"$tmp/out" 2>&1 || bad "uninterrupted: $(tail -2 "$tmp/out")"
"${wp[@]}" "${long[@]}" --stop-at 3 --save "$tmp/a/ckpt.json" >"$tmp/out" 2>&1 || bad "weipipe to step 3: $(tail -2 "$tmp/out")"
resume_under() {   # WHAT, CKPT, DIR, trainer...
    local what=$1 ck=$2 dir=$3; shift 3
    mkdir -p "$dir"
    "$@" "${long[@]}" --resume "$ck" --save "$dir/ckpt.json" >"$tmp/out" 2>&1 || { bad "$what: $(tail -2 "$tmp/out")"; return; }
    [ "$(ckpt_step "$dir/ckpt.json")" = 6 ] && "$build/tools/ckpt_compare" "$dir/ckpt.json" "$tmp/u/ckpt.json" 1e-4 >"$tmp/cmp" 2>&1 &&
        ok || bad "$what: not the uninterrupted weights: $(cat "$tmp/cmp")"
    echo "  $what: $(cat "$tmp/cmp")"
}
resume_under "weipipe (4 ranks) -> fsdp (2 ranks)" "$tmp/a/ckpt.json" "$tmp/r-fsdp" "${fsdp[@]}"
resume_under "weipipe (4 ranks) -> 1f1b (4 ranks)" "$tmp/a/ckpt.json" "$tmp/r-1f1b" "${f1b[@]}"
"${fsdp[@]}" "${long[@]}" --stop-at 3 --save "$tmp/f/ckpt.json" >"$tmp/out" 2>&1 || bad "fsdp to step 3: $(tail -2 "$tmp/out")"
resume_under "fsdp (2 ranks) -> weipipe (4 ranks)" "$tmp/f/ckpt.json" "$tmp/r-wp" "${wp[@]}"

# what each rank wrote: fsdp's two shards hold half the model each, 12 bytes per parameter
n=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); import math
print(sum(math.prod(s) for s in m["tensors"].values()))' "$tmp/f/ckpt.json")
for s in $(ckpt_shards "$tmp/f/ckpt.json"); do
    b=$(stat -c %s "$s")
    echo "  fsdp shard $(basename "$s"): $b bytes for $n/2 parameters ($(python3 -c "print(round($b / ($n / 2), 2))") bytes each)"
    python3 -c "import sys; sys.exit(0 if 12 <= $b / ($n / 2) < 12.5 else 1)" && ok || bad "shard $s: $b bytes, not about 12 per owned parameter"
done

# another global batch (4 micro-batches of 2 instead of 8): refused, unless --allow-batch-change
cp "$tmp/a/ckpt.json" "$tmp/a.before"
"${small[@]}" "${long[@]}" --resume "$tmp/a/ckpt.json" --save "$tmp/a/ckpt.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "the checkpoint's run read 8 x 2 sequences of 48 tokens per step" "$tmp/out" && cmp -s "$tmp/a/ckpt.json" "$tmp/a.before" &&
    ok || bad "another global batch: exit $rc: $(grep -v '^step' "$tmp/out" | head -2)"
"${small[@]}" "${long[@]}" --resume "$tmp/a/ckpt.json" --allow-batch-change --stop-at 4 --save "$tmp/a/ckpt.json" >"$tmp/out" 2>&1
seq=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["data_seq"])' "$tmp/a/ckpt.json")
# 3 steps of 16 sequences, then one of 8
[ "$seq" = 56 ] && ok || bad "--allow-batch-change: data_seq $seq, want 56: $(tail -2 "$tmp/out")"
echo "checkpoint replan: $pass passed, $fail failed"
[ $fail = 0 ]
