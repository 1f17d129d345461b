#!/usr/bin/env bash
# Traces of emitted one-GPU runs for `wpgen calibrate`: llama-h2048 (32 layers) as 4 chunks of 8
# layers on one rank (weipipe-interleave, NCCL), at several sequence lengths and micro-batch sizes,
# with and without recomputation, so that the fit sees products, attention and memory-bound work
# in different proportions. Each run's trace.json, plan.json and output go to $1/<case>/; the
# topology they were emitted for to $1/topology.json. Run after tests/gpu/run.sh (it builds wpgen
# and, on a machine without them, unpacks the dependencies; this script takes its environment
# from the same .debs folder). On this machine afterwards:
#   wpgen calibrate -t OUT/topology.json --trace OUT/s4096/trace.json --trace OUT/s16384/trace.json \
#       --held-out OUT/s2048-g2/trace.json --held-out OUT/s8192/trace.json ... -o h200.json
# Exit status: 0 when every run wrote its trace, 1 otherwise.
set -u
out=$(realpath -m "${1:?usage: traces.sh OUTDIR}")
cd "$(dirname "$0")/../.."
mkdir -p "$out"
p=/tmp/wp-debs ma=x86_64-linux-gnu
if [ -d "$p/usr/lib" ]; then   # what run.sh unpacked
    libs="$p/usr/lib/$ma:$p/usr/lib/$ma/openblas-pthread:$p/usr/lib/$ma/openmpi/lib"
    export PATH="$p/alt:$p/usr/bin:$PATH" OPAL_PREFIX="$p/usr" LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LIBRARY_PATH="$libs${LIBRARY_PATH:+:$LIBRARY_PATH}" CPATH="$p/usr/include${CPATH:+:$CPATH}"
    export LUA_PATH="$p/usr/share/lua/5.4/?.lua;$p/usr/share/lua/5.4/?/init.lua;;" LUA_CPATH="$p/usr/lib/$ma/lua/5.4/?.so;;"
fi
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
# the device type's rated figures: H200's by NVIDIA's datasheet (dense bf16, HBM3e); the name is
# what the simulator's default table is matched against
printf '{ "version": 1, "name": "gpu-1x1", "about": "%s, one GPU, as measured by tests/gpu/traces.sh",\n  "device_types": { "%s": { "peak_tflops_bf16": 989, "mem_gb": %d, "hbm_GBps": 4800 } },\n  "nodes": [ { "name": "n0", "devices": 1, "type": "%s", "intra": { "type": "NVL", "bw_GBps": 450, "lat_us": 3 } } ] }\n' \
    "$name" "${name#NVIDIA }" $((mem / 1024)) "${name#NVIDIA }" >"$out/topology.json"
nccl_make=()
nccl_home=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
[ ! -e /usr/local/cuda/include/nccl.h ] && [ ! -e /usr/include/nccl.h ] && [ -n "$nccl_home" ] && {
    nccl_make=(NCCL_HOME="$nccl_home"); export LD_LIBRARY_PATH="$nccl_home/lib:$LD_LIBRARY_PATH"; }
mpirun=(mpirun --oversubscribe -np 1)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
failed=0 first_obj=""
run_case() {   # label seq micro-batch-size micro-batches [more emit flags]
    local label=$1 seq=$2 g=$3 n=$4 d=$out/$1
    shift 4
    mkdir -p "$d"
    if ! build/wpgen emit -t "$out/topology.json" -m llama-h2048 --seq "$seq" --micro-batch-size "$g" --micro-batches "$n" \
            -s weipipe-interleave --chunks 4 --backend cuda --comm nccl "$@" -o "$d/prog" >"$d/emit.out" 2>&1; then
        echo "FAIL $label: emit: $(tail -2 "$d/emit.out")"; failed=1; return; fi
    # the model's kernels compiled once: the same sources and flags in every emitted directory
    [ -n "$first_obj" ] && mkdir -p "$d/prog/obj/runtime/cuda" && cp "$first_obj"/*.o "$d/prog/obj/runtime/cuda/" && touch "$d"/prog/obj/runtime/cuda/*.o
    if ! make -s -j"$(nproc)" -C "$d/prog" CUDA_ARCH="-gencode arch=compute_$cap,code=sm_$cap" "${nccl_make[@]}" >"$d/make.out" 2>&1; then
        echo "FAIL $label: make: $(grep -m3 -i error "$d/make.out")"; failed=1; return; fi
    [ -z "$first_obj" ] && mkdir -p "$out/.cuda-obj" && cp "$d"/prog/obj/runtime/cuda/*.o "$out/.cuda-obj/" && first_obj=$out/.cuda-obj
    cp "$d/prog/plan.json" "$d/plan.json"
    if ! timeout 120 "${mpirun[@]}" "$d/prog/train" --synthetic --steps 6 --seed 1 --trace "$d/trace.json" >"$d/run.out" 2>&1; then
        echo "FAIL $label: train: $(tail -3 "$d/run.out")"; failed=1; return; fi
    echo "ok   $label: $(grep -m1 'median step' "$d/run.out" || tail -1 "$d/run.out")"
    rm -rf "$d/prog"
}
cases=${CASES:-s2048-g2 s4096 s8192 s16384 s4096-recompute s8192-g2-n4}
for c in $cases; do
    case $c in
        s2048-g2) run_case $c 2048 2 2 ;;
        s4096) run_case $c 4096 1 2 ;;
        s8192) run_case $c 8192 1 2 ;;
        s16384) run_case $c 16384 1 2 ;;
        s4096-recompute) run_case $c 4096 1 2 --recompute ;;
        s8192-g2-n4) run_case $c 8192 2 4 ;;
        *) echo "traces.sh: no case $c"; failed=1 ;;
    esac
done
exit $failed
