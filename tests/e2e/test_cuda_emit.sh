#!/usr/bin/env bash
# The CUDA backend where there is no GPU: `wpgen emit --backend cuda` works for every strategy
# (default communication nccl, bf16; --comm mpi for host-staged tests), the emitted directory
# holds the CUDA and NCCL runtime and their Makefile parts, and three emitted plans (weipipe-interleave
# on nccl, weipipe-zb1 on mpi, weipipe-interleave of a tied model, with replicated ends, on mpi) build with make; run on a machine without a GPU, each fails at start with one line naming the
# missing CUDA device and exit status 5 (README, "Exit status"). Skipped, saying so, when nvcc or
# NCCL is absent; the run part is skipped where a GPU is present (tests/gpu/run.sh runs there).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh

cuda_home=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc || { [ -x "$cuda_home/bin/nvcc" ] && echo "$cuda_home/bin/nvcc"; })
if [ -z "$nvcc" ]; then echo "skipped: no nvcc (PATH, $cuda_home/bin): the CUDA backend is not built here"; exit 0; fi
cuda_dir=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
if [ ! -e "$cuda_dir/include/nccl.h" ] && [ ! -e /usr/include/nccl.h ]; then
    echo "skipped: no nccl.h ($cuda_dir/include, /usr/include): the NCCL backend is not built here"; exit 0
fi

# every strategy, on a cluster where each one plans (tawpipe wants more than one node); rank 0
# reserves stashes, and B-to-W keeps exactly where the strategy splits the backward (zero bubble)
for s in weipipe-naive weipipe-interleave 1f1b fsdp tawpipe zb1 weipipe-zb1 weipipe-zb2; do
    case $s in *zb*) keeps="[1-9][0-9]*" ;; *) keeps=0 ;; esac
    for comm in "" mpi; do
        d=$tmp/$s${comm:+-$comm}
        if "$build/wpgen" emit -t topologies/cpu-2x2.json -m tiny -s "$s" --backend cuda ${comm:+--comm $comm} -o "$d" >"$tmp/out" 2>&1 &&
           python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert (p["backend"], p["comm"], p["precision"]) == ("cuda", sys.argv[2], "bf16"), (p["backend"], p["comm"], p["precision"])' \
               "$d/plan.json" "${comm:-nccl}" &&
           [ -f "$d/runtime/backend/cuda.mk" ] && [ -f "$d/runtime/backend/${comm:-nccl}.mk" ] && [ -f "$d/runtime/cuda/step_cuda.c" ] && [ -f "$d/runtime/train/step_ops.c" ] &&
           [ ! -e "$d/runtime/cpu" ] && grep -q "step_rank_000, [0-9]*, [1-9][0-9]*, $keeps, [0-9]*, [0-9.e+]* }" "$d/plan_desc.c"; then ok
        else bad "emit $s --backend cuda ${comm:+--comm $comm}: $(tail -3 "$tmp/out")"; fi
    done
done

# the embedding and LM head replicated on every rank (--replicate-ends): chunks without layers, an
# all-reduce, updates on every rank; of a tied model (tiny8 tied: --replicate-ends its default),
# with the head a mirror of the embedding and TIE on every rank (step_tie on the device), built
# below on mpi
python3 -c 'import json,sys; c=json.load(open("tests/data/tiny8/config.json")); c["tie_word_embeddings"]=True; json.dump(c,open(sys.argv[1],"w"))' "$tmp/tied.json"
"$build/wpgen" emit -t topologies/cpu-2x2.json -m "$tmp/tied.json" -s weipipe-interleave --backend cuda --comm mpi -o "$tmp/ends-mpi" >"$tmp/out" 2>&1 &&
    grep -q "^static const unsigned char replicated\[6\] = { 1, 0, 0, 0, 0, 1 };" "$tmp/ends-mpi/plan_desc.c" &&
    [ "$(cat "$tmp/ends-mpi"/rank_*.c | grep -c 'wp_tie(R, ')" = 4 ] && ok ||
    bad "emit --backend cuda of a tied model (replicated ends, TIE): $(tail -3 "$tmp/out")"
# ... and under 1f1b on nccl: the two ends tied between the first stage and the last (TIE_ALLREDUCE)
"$build/wpgen" emit -t topologies/cpu-2x2.json -m "$tmp/tied.json" -s 1f1b --backend cuda -o "$tmp/tied-1f1b" >"$tmp/out" 2>&1 &&
    [ "$(grep -c 'wp_tie_allreduce(R, g0, CHUNK(0), ' "$tmp/tied-1f1b/rank_000.c")" = 1 ] &&
    [ "$(grep -c 'wp_tie_allreduce(R, g3, CHUNK(3), ' "$tmp/tied-1f1b/rank_003.c")" = 1 ] && ok ||
    bad "emit --backend cuda of a tied model under 1f1b (TIE_ALLREDUCE): $(tail -3 "$tmp/out")"

# the runtime without the model (the kernels are runtime/cuda/*.cu): only compile then
have_model=$(ls runtime/cuda/*.cu 2>/dev/null | head -1)
gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU && gpu=1
for build_of in nccl mpi ends; do
    # the mpi build is a zero-bubble plan: its step calls the split backward's operations; ends: the
    # replicated ends' plan on mpi
    comm=$build_of; [ $comm = ends ] && comm=mpi
    d=$tmp/weipipe-interleave; [ $build_of = mpi ] && d=$tmp/weipipe-zb1-mpi; [ $build_of = ends ] && d=$tmp/ends-mpi
    # one architecture is enough to show it builds (the top Makefile builds both)
    arch="CUDA_ARCH=-gencode=arch=compute_80,code=sm_80"
    if [ -z "$have_model" ]; then
        objs=$(cd "$d" && ls rank_*.c plan_desc.c main.c runtime/*/*.c | sed 's/\.c$/.o/; s/^/obj\//')
        make -s -j2 -C "$d" "$arch" $objs >"$tmp/make.log" 2>&1 && ok || bad "compile the $comm plan: $(grep -m3 error "$tmp/make.log")"
        echo "note: runtime/cuda has no model sources (*.cu) here: the $comm plan was compiled, not linked"
        continue
    fi
    # the model's kernels compiled once: the same sources and flags in both directories
    [ $build_of != nccl ] && [ -d "$tmp/weipipe-interleave/obj/runtime/cuda" ] && mkdir -p "$d/obj/runtime" &&
        cp -r "$tmp/weipipe-interleave/obj/runtime/cuda" "$d/obj/runtime/" && touch "$d"/obj/runtime/cuda/*.o
    # cuDNN's attention: the emitted Makefile compiles it in where scripts/deps.sh fetched the
    # cudnn-frontend headers (shown by make -n: the top Makefile compiled the file itself with
    # the same flags), and without it on CUDNN=no, as here (its headers take minutes to compile)
    if [ $build_of = nccl ] && [ -f "${XDG_CACHE_HOME:-$HOME/.cache}/wpgen/cudnn-frontend-1.23.0/include/cudnn_frontend.h" ]; then
        make -n -C "$d" "$arch" obj/runtime/cuda/attention_cudnn.o 2>&1 | grep -q -- "-DWP_HAVE_CUDNN .*-I.*cudnn-frontend-1.23.0/include" && ok ||
            bad "the emitted Makefile does not build cuDNN's attention in (runtime/backend/cuda.mk): $(make -n -C "$d" "$arch" obj/runtime/cuda/attention_cudnn.o 2>&1 | tail -1)"
    fi
    make -s -j2 -C "$d" "$arch" CUDNN=no >"$tmp/make.log" 2>&1 && [ -x "$d/train" ] && ok || { bad "make the $build_of plan: $(grep -m3 -i error "$tmp/make.log")"; continue; }
    [ $gpu = 1 ] && { echo "note: a GPU is present: the no-device run is skipped (tests/gpu/run.sh trains there)"; continue; }
    timeout 120 "${mpirun[@]}" -np 4 "$d/train" --synthetic --steps 1 >"$tmp/run.log" 2>&1
    rc=$?
    [ $rc = 5 ] && grep -q "no CUDA device" "$tmp/run.log" && ok || bad "the $build_of plan without a GPU: exit $rc, want 5: $(head -3 "$tmp/run.log")"
    [ $comm = mpi ] && { grep -q "^rank [0-9]: no CUDA device: .*(this program was emitted with --backend cuda and needs a GPU)" "$tmp/run.log" && ok ||
        bad "the message names the rank and the missing device: $(head -2 "$tmp/run.log")"; }
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
