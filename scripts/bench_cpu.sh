#!/usr/bin/env bash
# `make bench-cpu`: the CPU model against the same model in PyTorch (tests/torch/llama.py), same
# shapes, same thread count, measured side by side in one run. Prints each side's median time of
# forward + backward on one micro-batch (and of a whole training step with AdamW when build/wp-ref
# exists) and the ratio torch / C (above 1: C is faster); the C model also in bf16 (model.c's
# rounding points), beside its fp32 figure. Never fails the build: a missing piece
# is reported and skipped.
# usage: scripts/bench_cpu.sh BUILD_DIR     (THREADS=n to override the thread count, default nproc)
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
threads=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads
py=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the tree
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if ! gcc -O2 -std=c11 -Wall -Wextra -D_GNU_SOURCE -fopenmp -Iruntime scripts/bench_model.c \
        "$build/libwprt.a" -lopenblas -ljansson -lm -o "$tmp/bench_model"; then
    echo "bench-cpu: cannot build scripts/bench_model.c against $build/libwprt.a"; exit 0
fi
have_torch=1
if ! $py -c 'import torch' 2>/dev/null; then
    echo "bench-cpu: PyTorch missing for $py (apt-get install python3-torch); C figures only"; have_torch=0
fi

echo "bench-cpu: $threads threads; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
echo "bench-cpu: C: BLAS $(readlink -f /usr/lib/x86_64-linux-gnu/libopenblas.so.0 2>/dev/null || echo '?') (single-threaded inside OpenMP threads)"
if [ $have_torch = 1 ]; then
    tlib=$($py -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))')
    tblas=$(ldd "$tlib" 2>/dev/null | awk '/libblas|openblas|mkl/ {print $3; exit}')
    echo "bench-cpu: torch $($py -c 'import torch; print(torch.__version__)'): BLAS ${tblas:-?} -> $(readlink -f "${tblas:-/usr/lib/x86_64-linux-gnu/libblas.so.3}")"
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "bench-cpu: load average before starting: $load (other work on the machine skews both sides)"
fi

ms() { sed -n "s/.* $1 \([0-9.]*\) ms.*/\1/p"; }
ratio() { awk -v t="$1" -v c="$2" 'BEGIN { if (c > 0 && t > 0) printf "%.2f", t / c; else printf "?" }'; }

# name | H layers heads kv ffn vocab seq mbs | runs
shapes=(
  "tiny (H 64, 4 layers, 4 heads / 2 kv, S 64, G 2)|64 4 4 2 176 256 64 2|30"
  "H 512, 8 layers, 8 heads, ffn 1536, S 1024, G 1|512 8 8 8 1536 256 1024 1|5"
)
for entry in "${shapes[@]}"; do
    IFS='|' read -r name shape runs <<<"$entry"
    echo
    echo "== $name: forward + backward of one micro-batch, median of $runs runs"
    c_out=$("$tmp/bench_model" $shape "$runs" fp32); echo "  $c_out"
    c_tot=$(echo "$c_out" | ms total)
    b_out=$("$tmp/bench_model" $shape "$runs" bf16); echo "  $b_out"
    echo "  ratio C bf16 / C fp32: $(ratio "$(echo "$b_out" | ms total)" "$c_tot") (bf16 on the CPU: fp32 math plus the rounding passes of model.c)"
    if [ $have_torch = 1 ]; then
        t_out=$($py scripts/bench_torch.py "$threads" $shape "$runs"); echo "  $t_out"
        tp_out=$(OMP_WAIT_POLICY=passive $py scripts/bench_torch.py "$threads" $shape "$runs")
        echo "  $tp_out  [OMP_WAIT_POLICY=passive]"
        t_tot=$(echo "$t_out" | ms total); tp_tot=$(echo "$tp_out" | ms total)
        echo "  ratio torch / C: $(ratio "$t_tot" "$c_tot") (torch as installed), $(ratio "$tp_tot" "$c_tot") (torch with passive OpenMP waits, its best here)"
    fi
done

# Whole training steps: the reference trainer against torch with AdamW.
if [ -x "$build/wp-ref" ]; then
    cat >"$tmp/h512.json" <<'JSON'
{ "hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 8,
  "intermediate_size": 1536, "vocab_size": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
  "tie_word_embeddings": false }
JSON
    for entry in "tiny|-m tiny --seq 64 --micro-batch-size 2|64 4 4 2 176 256 64 2|30" \
                 "H 512, S 1024|-m $tmp/h512.json --seq 1024 --micro-batch-size 1|512 8 8 8 1536 256 1024 1|5"; do
        IFS='|' read -r name ref_args shape runs <<<"$entry"
        echo
        echo "== training step (one micro-batch, AdamW, clipping), $name: median of $runs steps"
        r_out=$("$build/wp-ref" $ref_args --synthetic --steps $((runs + 1)) 2>&1 | tail -n 1)
        echo "  wp-ref: $r_out"
        r_ms=$(echo "$r_out" | sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p')
        if [ $have_torch = 1 ]; then
            ts_out=$(OMP_WAIT_POLICY=passive $py scripts/bench_torch.py --step "$threads" $shape "$runs")
            echo "  $ts_out  [OMP_WAIT_POLICY=passive]"
            echo "  ratio torch / wp-ref: $(ratio "$(echo "$ts_out" | ms step)" "${r_ms:-0}")"
        fi
    done
else
    echo; echo "bench-cpu: $build/wp-ref not built: no training-step comparison"
fi
exit 0
