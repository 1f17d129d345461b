#!/usr/bin/env bash
# The GPU checks, for a machine with one GPU, in under 8 minutes: results in the file $1 (default
# gpu-results.txt), also printed; with a folder $2, every log (build, kernels, each case's emit,
# make and run, the benchmarks) is kept there too, for when a device's time allows one look only. Without a GPU (nvidia-smi -L fails or lists none) it says so and
# exits 0 having run nothing. Otherwise:
#   1. builds (make: wpgen, wp-ref, the CUDA and NCCL backends, tests/gpu's programs);
#   2. build/gpu/test_kernels: each kernel against the CPU model's bf16 reference;
#   3. trains small emitted plans (tiny8, 3 steps, 4 micro-batches of 2 x 1024... the model's
#      tokens) and compares each with `wp-ref --precision bf16 --grad-precision bf16` on the same
#      batch: the loss of every step within LOSS_TOL (relative, 2e-2) and every weight tensor at
#      the end within WEIGHT_TOL (relative norm of the difference, 5e-2): bf16 rounds differently
#      on the GPU (cuBLASLt's and our kernels' summation orders, fused attention) than on the
#      CPU, and the CPU's own bf16 plans are held to 1e-3 and 5e-2 against the same reference
#      (tests/e2e/test_parity.sh). Plans: 1 rank over NCCL; 2 and 4 ranks sharing the GPU over
#      MPI with host-staged transfers (weipipe-interleave, and fsdp and tawpipe on 4 for their
#      collectives; weipipe-zb1 on 2 and zb1 on 4 for the split backward; a tied model under 1f1b
#      and fsdp on 2). Everything here is built with MPI (the NCCL layer bootstraps over it):
#      without Open MPI it says so and runs only steps 2 and 4;
#   4. build/gpu/bench_step and, when python3 imports torch, tests/gpu/bench_torch.py: their
#      figures side by side; build/gpu/bench_attention, the attention kernels alone;
#   5. long sequences: the emitted program at 32k, 64k, 128k tokens, without and with
#      --offload-activations, its reservation against the plan's and nvidia-smi's, its step against
#      bench_torch.py --checkpoint's (skipped when the steps before leave too little time).
# Exit status: 0 when everything run passed (or no GPU), 1 otherwise.
#
# Dependencies the device machine may lack (Jansson, Lua 5.4, Penlight, OpenBLAS, Open MPI): put
# their Debian packages in .debs/ at the repository root (on a machine with apt:
#   mkdir -p .debs && (cd .debs && apt-get download libjansson4 libjansson-dev liblua5.4-0 \
#       liblua5.4-dev lua5.4 lua-penlight lua-filesystem libopenblas0-pthread libopenblas-dev \
#       libopenblas-pthread-dev libgfortran5 openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev \
#       libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 \
#       libpsm-infinipath1 libpsm2-2 librdmacm1 libibverbs1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2)
# and carry the folder): they are unpacked under /tmp/wp-debs, never over /, and found from there.
# NCCL: nccl.h in CUDA's include folder or /usr/include, else pip's nvidia-nccl wheel.
# cuDNN's fused attention: the cudnn-frontend headers scripts/deps.sh fetched into build/deps
# (carry build/deps: the device has no network), cudnn.h and libcudnn.so.9 from the toolkit or
# PyTorch's nvidia-cudnn wheel; without them the kernels' own attention runs, and the lines say so.
set -u
out=$(realpath -m "${1:-gpu-results.txt}")   # relative to where it was run from
cd "$(dirname "$0")/../.."
: >"$out" || { echo "run.sh: cannot write $out"; exit 1; }
say() { echo "$*" | tee -a "$out"; }
LOSS_TOL=${LOSS_TOL:-2e-2} WEIGHT_TOL=${WEIGHT_TOL:-5e-2}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
    say "gpu: no GPU here (nvidia-smi -L lists none): nothing run"
    exit 0
fi
t_start=$SECONDS
say "gpu: $(nvidia-smi -L | head -1); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
jobs=$(nproc)

# ---- dependencies carried as .deb files ----
if ls .debs/*.deb >/dev/null 2>&1; then
    p=/tmp/wp-debs
    mkdir -p "$p"
    for f in .debs/*.deb; do dpkg -x "$f" "$p" || say "deps: cannot unpack $f"; done
    ma=x86_64-linux-gnu
    export PATH="$p/usr/bin:$PATH"
    export CPATH="$p/usr/include:$p/usr/include/$ma:$p/usr/include/lua5.4:$p/usr/include/$ma/openblas-pthread${CPATH:+:$CPATH}"
    libs="$p/usr/lib/$ma:$p/usr/lib/$ma/openblas-pthread:$p/usr/lib/$ma/openmpi/lib"
    export LIBRARY_PATH="$libs${LIBRARY_PATH:+:$LIBRARY_PATH}" LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LUA_PATH="$p/usr/share/lua/5.4/?.lua;$p/usr/share/lua/5.4/?/init.lua;;"
    export LUA_CPATH="$p/usr/lib/$ma/lua/5.4/?.so;;"
    # Debian names Open MPI's programs through alternatives, which dpkg -x does not make; a
    # relocated Open MPI finds its components and wrapper data under OPAL_PREFIX
    if [ -e "$p/usr/bin/mpirun.openmpi" ]; then
        mkdir -p "$p/alt"
        ln -sf "$p/usr/bin/mpirun.openmpi" "$p/alt/mpirun"
        ln -sf "$p/usr/bin/mpicc.openmpi" "$p/alt/mpicc"
        export PATH="$p/alt:$PATH" OPAL_PREFIX="$p/usr"
    fi
    # deps.sh looks in /usr: write what it would have found
    mkdir -p build
    printf 'BLAS_CFLAGS := -I%s\nBLAS_LIBS := -L%s -lopenblas\nHAVE_CUDA := yes\nCUDA_HOME := %s\n' \
        "$p/usr/include/$ma/openblas-pthread" "$p/usr/lib/$ma/openblas-pthread" "${CUDA_HOME:-/usr/local/cuda}" >build/config.mk
    say "deps: unpacked $(ls .debs/*.deb | wc -l) packages from .debs into $p"
fi

# ---- NCCL ----
cuda_home=${CUDA_HOME:-/usr/local/cuda}
command -v nvcc >/dev/null 2>&1 || export PATH="$cuda_home/bin:$PATH"
nccl_make=()
if [ ! -e "$cuda_home/include/nccl.h" ] && [ ! -e /usr/include/nccl.h ]; then
    nccl_home=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
    if [ -n "$nccl_home" ] && [ -e "$nccl_home/include/nccl.h" ]; then
        nccl_make=(NCCL_H="$nccl_home/include/nccl.h" NCCL_HOME="$nccl_home")
        export LD_LIBRARY_PATH="$nccl_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        [ -e "$nccl_home/lib/libnccl.so" ] || export LIBRARY_PATH="$nccl_home/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
        say "nccl: from the Python wheel at $nccl_home"
    else
        say "nccl: nccl.h not found (CUDA include, /usr/include, pip's nvidia-nccl): the NCCL plan is skipped"
    fi
fi

failed=0
fail() { failed=1; say "FAIL: $*"; }
mkdir -p build

# ---- 1. build ----
# deps.sh writes build/config.mk even when something is missing (it cannot install here): say what
if [ ! -f build/config.mk ]; then
    ./scripts/deps.sh build/config.mk > build/gpu-deps.log 2>&1 || say "deps: missing: $(grep '✗' build/gpu-deps.log | tr -s ' \n' ' ')"
fi
have_mpi=0
command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && have_mpi=1
targets=(all build/tools/ckpt_compare)
if [ $have_mpi = 0 ]; then
    # wpgen's runtime and every emitted program need MPI: only the GPU programs can be built
    say "mpi: no Open MPI here (mpicc, mpirun; carry its .deb files in .debs/): only test_kernels and bench_step run"
    targets=($(ls tests/gpu/test_kernels.cu tests/gpu/bench_step.cu 2>/dev/null | sed 's|tests/gpu/\(.*\)\.cu|build/gpu/\1|'))
fi
if [ ${#targets[@]} = 0 ]; then
    fail "nothing to build"
elif ! make -j"$jobs" "${nccl_make[@]}" CUDA_ARCH="-gencode arch=compute_$cap,code=sm_$cap" "${targets[@]}" >build/gpu-build.log 2>&1; then
    fail "make ${targets[*]} (the last lines of build/gpu-build.log follow)"; tail -20 build/gpu-build.log | tee -a "$out"
fi
say "build: $(grep '^cuda:' build/gpu-build.log | tail -1) ($((SECONDS - t_start)) s)"

# ---- 2. kernels ----
if [ -x build/gpu/test_kernels ]; then
    timeout 100 build/gpu/test_kernels >build/gpu-kernels.log 2>&1
    rc=$?
    if [ $rc = 0 ]; then say "kernels: $(tail -1 build/gpu-kernels.log)"
    else fail "test_kernels (exit $rc)"; tail -30 build/gpu-kernels.log | tee -a "$out"; fi
else
    say "kernels: build/gpu/test_kernels was not built (tests/gpu/test_kernels.cu missing?)"
fi

# ---- 3. training against wp-ref ----
tmp=$(mktemp -d)
logs=${2:+$(realpath -m "$2")}
trap '[ -n "$logs" ] && mkdir -p "$logs" && cp build/gpu-*.log "$tmp"/*.out "$logs"/ 2>/dev/null; rm -rf "$tmp"' EXIT
mpirun=()
if [ $have_mpi = 1 ]; then
    mpirun=(mpirun --oversubscribe)
    [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
fi
model=tests/data/tiny8/config.json
prec=(--precision bf16 --grad-precision bf16)
common=(--synthetic --steps 3 --seed 5 --lr 2e-3 --warmup 1)
ref=$tmp/ref
mkdir -p "$ref"
[ $have_mpi = 1 ] && build/wp-ref -m "$model" --micro-batch-size 2 --micro-batches 4 "${prec[@]}" "${common[@]}" --save "$ref/checkpoint.json" \
    --log "$ref/log" >"$ref/out" 2>&1 || fail "wp-ref: $(tail -3 "$ref/out")"
losses() { grep -o '"loss": *[-0-9.eE+naif]*' "$1" | sed 's/.*: *//'; }
printf '{"version":1,"name":"gpu-1x%d","device_types":{"gpu":{"peak_tflops_bf16":100,"mem_gb":80,"hbm_GBps":3000}},"nodes":[{"name":"n0","devices":%d,"type":"gpu","intra":{"type":"NVL","bw_GBps":100,"lat_us":2}}]}\n' 1 1 >"$tmp/g1.json"
printf '{"version":1,"name":"gpu-1x%d","device_types":{"gpu":{"peak_tflops_bf16":100,"mem_gb":80,"hbm_GBps":3000}},"nodes":[{"name":"n0","devices":%d,"type":"gpu","intra":{"type":"NVL","bw_GBps":100,"lat_us":2}}]}\n' 2 2 >"$tmp/g2.json"
first_obj=""
fe_inc=$PWD/build/deps/cudnn-frontend-1.23.0/include
case_() {   # label ranks topology strategy micro-batches/rank comm [more wpgen flags]
    local label=$1 n=$2 topo=$3 s=$4 mb=$5 comm=$6 d=$tmp/$1
    local extra=("${@:7}")
    if ! build/wpgen emit -t "$topo" -m "$model" --micro-batch-size 2 -s "$s" --micro-batches "$mb" "${prec[@]}" "${extra[@]}" \
            --backend cuda --comm "$comm" -o "$d" >"$tmp/$label.emit.out" 2>&1; then
        fail "$label: emit: $(tail -2 "$tmp/$label.emit.out")"; return; fi
    # the model's kernels compiled once: the same sources and flags in every emitted directory
    [ -n "$first_obj" ] && mkdir -p "$d/obj/runtime" && cp -r "$first_obj" "$d/obj/runtime/" && touch "$d"/obj/runtime/cuda/*.o
    local mk=(make -s -j"$jobs" -C "$d" CUDA_ARCH="-gencode arch=compute_$cap,code=sm_$cap")
    # cuDNN's attention from the headers scripts/deps.sh keeps in build/deps (no network here)
    [ -d "$fe_inc" ] && mk+=(CUDNN_FRONTEND_INCLUDE="$fe_inc")
    [ "$comm" = nccl ] && [ ${#nccl_make[@]} -gt 0 ] && mk+=("${nccl_make[1]}")
    if ! "${mk[@]}" >"$tmp/$label.make.out" 2>&1; then fail "$label: make: $(grep -m3 -i error "$tmp/$label.make.out")"; return; fi
    [ -z "$first_obj" ] && first_obj=$d/obj/runtime/cuda
    local run=("$d/train")
    [ ${#mpirun[@]} -gt 0 ] && run=("${mpirun[@]}" -np "$n" "$d/train")
    local t0=$SECONDS
    # 3 steps of tiny8 take seconds: a minute means a hang, and the device's minutes are few
    timeout 60 "${run[@]}" "${common[@]}" --save "$d/checkpoint.json" --log "$d/log" >"$tmp/$label.run.out" 2>&1
    local rc=$?
    if [ $rc != 0 ]; then fail "$label: train (exit $rc):"; tail -15 "$tmp/$label.run.out" | tee -a "$out"; return; fi
    grep "reserved" "$tmp/$label.run.out" | head -4 | sed "s/^/  $label: /" | tee -a "$out" >/dev/null
    if ! paste <(losses "$ref/log") <(losses "$d/log") | awk -v tol="$LOSS_TOL" '
            { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
              printf "step %d: loss %s (wp-ref) %s (gpu), relative %.2e\n", NR, $1, $2, a ? d / a : d
              if (NF != 2 || d > tol * a) bad = 1 }
            END { if (NR != 3) bad = 1; exit bad }' >"$tmp/loss.out"; then
        fail "$label: losses beyond $LOSS_TOL"; sed 's/^/  /' "$tmp/loss.out" | tee -a "$out"; return; fi
    if ! build/tools/ckpt_compare "$d/checkpoint.json" "$ref/checkpoint.json" "$WEIGHT_TOL" >"$tmp/cmp.out" 2>&1; then
        fail "$label: weights beyond $WEIGHT_TOL: $(tail -3 "$tmp/cmp.out")"; return; fi
    say "ok   $label: $(tail -1 "$tmp/loss.out"); $(tail -1 "$tmp/cmp.out" | sed 's/ckpt-compare: //') ($((SECONDS - t0)) s)"
}
if [ $have_mpi = 1 ] && [ -x build/wpgen ] && [ -x build/wp-ref ] && { [ ${#nccl_make[@]} -gt 0 ] || [ -e "$cuda_home/include/nccl.h" ] || [ -e /usr/include/nccl.h ]; }; then
    case_ nccl-1rank 1 "$tmp/g1.json" weipipe-interleave 4 nccl
fi
if [ $have_mpi = 1 ] && [ -x build/wpgen ] && [ -x build/wp-ref ]; then
    case_ mpi-2ranks 2 "$tmp/g2.json" weipipe-interleave 2 mpi
    case_ mpi-4ranks 4 topologies/cpu-2x2.json weipipe-interleave 1 mpi
    case_ mpi-4ranks-fsdp 4 topologies/cpu-2x2.json fsdp 1 mpi
    case_ mpi-4ranks-tawpipe 4 topologies/cpu-2x2.json tawpipe 1 mpi
    # the zero-bubble strategies: the split backward (BWD_B, BWD_W) and the B-to-W keep slots
    case_ mpi-2ranks-weipipe-zb1 2 "$tmp/g2.json" weipipe-zb1 2 mpi
    case_ mpi-4ranks-zb1 4 topologies/cpu-2x2.json zb1 1 mpi
    # weights gathered in fp32 into bf16 buffers (the transfer room, rounded after the wait), and
    # the embedding and head on every rank (their all-reduce)
    case_ mpi-4ranks-fsdp-wire32 4 topologies/cpu-2x2.json fsdp 1 mpi --weight-wire fp32
    case_ mpi-4ranks-ends 4 topologies/cpu-2x2.json weipipe-interleave 1 mpi --replicate-ends
    # a tied model (tiny8 tied) against its own wp-ref: the two ends summed between the first stage
    # and the last (TIE_ALLREDUCE, an fp32 part of a device buffer staged through the host), and
    # fsdp's replicated ends (TIE on every rank, on the device)
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["tie_word_embeddings"]=True; json.dump(c,open(sys.argv[2],"w"))' \
        "$model" "$tmp/tied.json"
    untied_model=$model untied_ref=$ref
    model=$tmp/tied.json ref=$tmp/ref-tied
    mkdir -p "$ref"
    if build/wp-ref -m "$model" --micro-batch-size 2 --micro-batches 4 "${prec[@]}" "${common[@]}" --save "$ref/checkpoint.json" \
            --log "$ref/log" >"$ref/out" 2>&1; then
        case_ mpi-2ranks-1f1b-tied 2 "$tmp/g2.json" 1f1b 2 mpi
        case_ mpi-2ranks-fsdp-tied 2 "$tmp/g2.json" fsdp 2 mpi
    else
        fail "wp-ref, tied: $(tail -3 "$ref/out")"
    fi
    model=$untied_model ref=$untied_ref
fi

# a checkpoint saved on the GPU (its shard copied to pinned memory and written in the background)
# resumes under another plan: stopped at step 2 of 4 on one rank (NCCL), resumed to step 4 on
# two (MPI), against wp-ref's 4 steps straight
if [ -x "$tmp/nccl-1rank/train" ] && [ -x "$tmp/mpi-2ranks/train" ]; then
    four=(--synthetic --steps 4 --seed 5 --lr 2e-3 --warmup 1)
    mkdir -p "$tmp/ref4" "$tmp/half" "$tmp/resumed"
    build/wp-ref -m "$model" --micro-batch-size 2 --micro-batches 4 "${prec[@]}" "${four[@]}" --save "$tmp/ref4/checkpoint.json" \
        >"$tmp/ref4.out" 2>&1 || fail "wp-ref, 4 steps: $(tail -3 "$tmp/ref4.out")"
    if timeout 60 "${mpirun[@]}" -np 1 "$tmp/nccl-1rank/train" "${four[@]}" --stop-at 2 --save "$tmp/half/checkpoint.json" \
            >"$tmp/half.out" 2>&1 &&
       timeout 60 "${mpirun[@]}" -np 2 "$tmp/mpi-2ranks/train" "${four[@]}" --resume "$tmp/half/checkpoint.json" \
            --save "$tmp/resumed/checkpoint.json" >"$tmp/resumed.out" 2>&1; then
        if build/tools/ckpt_compare "$tmp/resumed/checkpoint.json" "$tmp/ref4/checkpoint.json" "$WEIGHT_TOL" >"$tmp/cmp.out" 2>&1; then
            say "ok   resume: saved at step 2 on 1 rank (nccl), resumed to 4 on 2 (mpi): $(tail -1 "$tmp/cmp.out" | sed 's/ckpt-compare: //')"
        else fail "resume: weights beyond $WEIGHT_TOL: $(tail -3 "$tmp/cmp.out")"; fi
    else
        fail "resume: $(tail -3 "$tmp/half.out" "$tmp/resumed.out")"
    fi
fi

# ---- 4. speed: our step and PyTorch's, side by side ----
if [ -x build/gpu/bench_step ]; then
    timeout 75 build/gpu/bench_step >"$tmp/bench.out" 2>&1 || fail "bench_step failed: $(tail -3 "$tmp/bench.out")"
    # our own attention kernels beside cuDNN's (the default where it loads)
    timeout 75 build/gpu/bench_step --attention own >>"$tmp/bench.out" 2>&1 || fail "bench_step --attention own failed: $(tail -3 "$tmp/bench.out")"
    if [ -f tests/gpu/bench_torch.py ] && python3 -c 'import torch' 2>/dev/null; then
        timeout 75 python3 tests/gpu/bench_torch.py >"$tmp/torch.out" 2>&1 || fail "bench_torch.py failed: $(tail -3 "$tmp/torch.out")"
    else
        echo "(PyTorch not importable, or tests/gpu/bench_torch.py missing)" >"$tmp/torch.out"
    fi
    say "bench: wpgen's step (bench_step) | PyTorch (bench_torch.py)"
    paste -d '|' <(sed 's/^/  /' "$tmp/bench.out") "$tmp/torch.out" | tee -a "$out"
    # the attention kernels alone, at the step's shape and at llama-h2048's (32 heads of 64)
    if [ -x build/gpu/bench_attention ]; then
        { timeout 60 build/gpu/bench_attention && timeout 60 build/gpu/bench_attention --heads 32 --head-dim 64; } >"$tmp/attn.out" 2>&1 ||
            fail "bench_attention failed: $(tail -3 "$tmp/attn.out")"
        sed 's/^/  /' "$tmp/attn.out" | tee -a "$out"
    fi
else
    say "bench: build/gpu/bench_step was not built (tests/gpu/bench_step.cu missing?)"
fi
# ---- 5. long sequences on one GPU: the memory plan against nvidia-smi, the step against PyTorch's ----
# bench_step's model shape at 4 layers (H 2048, 16 heads of 128, FFN 5632, vocabulary 32000:
# 0.34 B parameters, about 5 GiB of training state; bench_torch.py --layers 4 is the same model),
# the emitted CUDA program on one rank (fsdp, one micro-batch of S tokens, bf16, --recompute; MPI
# comm, one process), at 32k, 64k and 128k tokens, without and with --offload-activations: the
# start-up line's reservation beside the plan's device peak and nvidia-smi's most used memory while
# it ran (sampled every 0.2 s; it also counts the CUDA context, cuBLAS's and cuDNN's own), and the
# second step's time (the first warms up) beside PyTorch's with activation checkpointing
# (bench_torch.py --checkpoint: each layer recomputed in the backward, as --recompute does).
# About 2 minutes; skipped, and said, when the steps before left under 150 s of the 8 minutes.
long_seqs=(32768 65536 131072)
if [ $have_mpi = 1 ] && [ -x build/wpgen ] && [ -n "$first_obj" ] && [ $((SECONDS - t_start)) -lt 330 ]; then
    mem_gb=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{ printf "%.1f", $1 * 1048576 / 1e9 }')
    printf '{"version":1,"name":"gpu-long","device_types":{"gpu":{"peak_tflops_bf16":989,"mem_gb":%s,"hbm_GBps":4800}},"nodes":[{"name":"n0","devices":1,"type":"gpu","intra":{"type":"NVL","bw_GBps":100,"lat_us":2}}]}\n' \
        "$mem_gb" >"$tmp/glong.json"
    printf '{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":2048,"num_hidden_layers":4,"num_attention_heads":16,"num_key_value_heads":16,"intermediate_size":5632,"vocab_size":32000,"rms_norm_eps":1e-5,"rope_theta":10000.0,"tie_word_embeddings":false,"max_position_embeddings":131072}\n' \
        >"$tmp/long-model.json"
    say "long: bench_step's shape at 4 layers, fsdp on 1 rank, --recompute, bf16; GiB (reserved: the start-up line; nvidia-smi: most used while it ran)"
    for S in "${long_seqs[@]}"; do
        for off in no yes; do
            label=long-$S-off$off d=$tmp/long-$S-$off
            lflags=(-t "$tmp/glong.json" -m "$tmp/long-model.json" -s fsdp --micro-batches 1 --micro-batch-size 1 --seq "$S" --recompute "${prec[@]}")
            [ $off = yes ] && lflags+=(--offload-activations)
            planned=$(build/wpgen plan "${lflags[@]}" --json 2>/dev/null | python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["peak_mem_bytes"] / 2**30))' 2>/dev/null)
            if ! build/wpgen emit "${lflags[@]}" --backend cuda --comm mpi -o "$d" >"$tmp/$label.emit.out" 2>&1; then
                fail "$label: emit: $(tail -2 "$tmp/$label.emit.out")"; continue; fi
            mkdir -p "$d/obj/runtime" && cp -r "$first_obj" "$d/obj/runtime/" && touch "$d"/obj/runtime/cuda/*.o
            lmk=(make -s -j"$jobs" -C "$d" CUDA_ARCH="-gencode arch=compute_$cap,code=sm_$cap")
            [ -d "$fe_inc" ] && lmk+=(CUDNN_FRONTEND_INCLUDE="$fe_inc")
            if ! "${lmk[@]}" >"$tmp/$label.make.out" 2>&1; then fail "$label: make: $(grep -m3 -i error "$tmp/$label.make.out")"; continue; fi
            ( while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; sleep 0.2; done ) >"$tmp/$label.smi" 2>/dev/null &
            smi_pid=$!
            timeout 90 "${mpirun[@]}" -np 1 "$d/train" --synthetic --steps 2 --seed 5 --lr 2e-3 --warmup 1 >"$tmp/$label.run.out" 2>&1
            rc=$?
            kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null
            if [ $rc != 0 ]; then fail "$label: train (exit $rc): $(tail -3 "$tmp/$label.run.out")"; continue; fi
            reserved=$(sed -n 's/.*: reserved \([0-9.]*\) GiB.*/\1/p' "$tmp/$label.run.out" | head -1)
            used=$(sort -n "$tmp/$label.smi" | tail -1 | awk '{ printf "%.3f", $1 / 1024 }')
            step=$(grep '^step *2/2' "$tmp/$label.run.out" | awk -F'|' '{ print $5 "," $6 }' | tr -s ' ')
            say "  $S tokens, offload $off: plan ${planned:-?}, reserved ${reserved:-?}, nvidia-smi ${used:-?}; step 2:$step"
        done
    done
    if [ -f tests/gpu/bench_torch.py ] && python3 -c 'import torch' 2>/dev/null; then
        lt=()
        for S in "${long_seqs[@]}"; do lt+=(--seq "$S"); done
        timeout 150 python3 tests/gpu/bench_torch.py --layers 4 --steps 1 --warmup 1 --no-compile --checkpoint "${lt[@]}" >"$tmp/torch-long.out" 2>&1 ||
            fail "bench_torch.py --checkpoint failed: $(tail -3 "$tmp/torch-long.out")"
        sed 's/^/  /' "$tmp/torch-long.out" | tee -a "$out"
    else
        say "  (PyTorch not importable: no checkpointed PyTorch step to compare)"
    fi
elif [ $have_mpi = 1 ] && [ -n "$first_obj" ]; then
    say "long: skipped, $((SECONDS - t_start)) s of the 8 minutes gone (it needs about 150 s)"
else
    say "long: skipped (needs Open MPI, wpgen and a CUDA program built in step 3)"
fi
say "gpu: done in $((SECONDS - t_start)) s, $([ $failed = 0 ] && echo "everything passed" || echo "FAILURES above")"
exit $failed
