#!/usr/bin/env bash
# Byte identity of two wpgen builds: a change that says "behaviour unchanged" (a refactoring) runs
# this with the build before it and the build after it, and it holds only if every output is the
# same byte for byte. Each build runs from its own tree (its strategies, templates and runtime, as
# wpgen finds them beside its binary), on every strategy in schedules/ (the weipipe variants,
# tawpipe, fsdp, 1f1b, zb1), a tied model (TIE, TIE_ALLREDUCE), both backends of `emit` (cpu/mpi and
# cuda/nccl), `plan` (text and --json: the plan's hash is in the emitted plan.json), `sim --json`
# with --svg and --trace, `compare` and `-s auto`, on small models and topologies (a minute or two
# on one core). Every command's stdout, stderr and exit status are compared, and every emitted
# folder with diff -r.
#
#   tests/tools/same_output.sh BEFORE/build/wpgen AFTER/build/wpgen [KEEP_DIR]
#
# Exit 0: identical; 1: a difference (listed, with the first lines of its diff); 2: bad arguments.
# Two things are not the plan's and are masked: the path of the binary, which an emitted job.sbatch
# names (and so its hash in .wpgen-files), and the search's progress lines on stderr, which report
# elapsed seconds. A change to runtime/ or templates/ changes the emitted copies of them; to compare
# the generator alone (a move of its files, say), give both sides one tree: WPGEN_HOME=TREE.
set -u
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: $0 BEFORE_WPGEN AFTER_WPGEN [KEEP_DIR]   (two executable wpgen binaries)" >&2
    exit 2
fi
before=$(readlink -f "$1"); after=$(readlink -f "$2")
if [ $# -ge 3 ]; then out=$3; mkdir -p "$out"; else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
here=$(cd "$(dirname "$0")/../.." && pwd)

# A tied model: tiny8's shape with tie_word_embeddings (as tests/e2e/test_tied.sh makes it).
mkdir -p "$out/models"
sed 's/"tie_word_embeddings": *false/"tie_word_embeddings": true/' "$here/tests/data/tiny8/config.json" >"$out/models/tied.json"
grep -q '"tie_word_embeddings": *true' "$out/models/tied.json" || { echo "$0: could not make the tied model" >&2; exit 2; }
tied=$out/models/tied.json
topo() { echo "$here/topologies/$1.json"; }

strategies=()
for f in "$here"/schedules/*.lua; do strategies+=("$(basename "$f" .lua)"); done

# run NAME ARGS...: both builds, outputs under before/NAME and after/NAME. Each runs in the same
# folder, $out/run (emit writes its working directory into job.sbatch), moved away afterwards; an
# "-o DIR" or "--svg/--trace FILE" argument is written @OUT/..., a path inside it.
run() {
    local name=$1; shift
    local side bin d=$out/run args=() a
    for a in "$@"; do args+=("${a//@OUT/$d}"); done
    for side in before after; do
        [ $side = before ] && bin=$before || bin=$after
        rm -rf "$d"; mkdir -p "$d" "$out/$side"
        (cd "$d" && "$bin" "${args[@]}" >stdout 2>stderr; echo $? >status)
        sed -i -E '/^\[[0-9]+ s\] search:/d; s/\r?\[[0-9]+ s\] search:[^\r]*\r?//g' "$d/stderr"
        [ -f "$d/emit/job.sbatch" ] && sed -i "s#$bin#@WPGEN@#g" "$d/emit/job.sbatch"
        [ -f "$d/emit/.wpgen-files" ] && sed -i -E 's/^[0-9a-f]+ job\.sbatch$/@HASH@ job.sbatch/' "$d/emit/.wpgen-files"
        rm -rf "$out/$side/$name"; mv "$d" "$out/$side/$name"
    done
    ncases=$((ncases + 1))
}
ncases=0

for s in "${strategies[@]}"; do
    for m in tiny "$tied"; do
        tag=$s-$( [ "$m" = tiny ] && echo tiny || echo tied )
        run "$tag-plan" plan -t "$(topo cpu-2x2)" -m "$m" -s "$s"
        run "$tag-plan-json" plan -t "$(topo cpu-2x2)" -m "$m" -s "$s" --json
        run "$tag-sim-json" sim -t "$(topo cpu-2x2)" -m "$m" -s "$s" --json --svg @OUT/t.svg --trace @OUT/t.json
        run "$tag-emit-cpu" emit -t "$(topo cpu-2x2)" -m "$m" -s "$s" -o @OUT/emit
        run "$tag-emit-cuda" emit -t "$(topo cpu-2x2)" -m "$m" -s "$s" --backend cuda -o @OUT/emit
    done
    # a GPU cluster: bf16, 16 ranks over two nodes
    run "$s-gpu-sim-json" sim -t "$(topo weipipe-2x8-a800-nvlink-10gbe)" -m llama-h1024 -s "$s" --seq 2048 --json
    run "$s-gpu-emit-cuda" emit -t "$(topo weipipe-2x8-a800-nvlink-10gbe)" -m llama-h1024 -s "$s" --seq 2048 \
        --backend cuda --comm nccl -o @OUT/emit
done
# the shapes strategies take apart from their defaults: interleaving, replicas, the split
# backward's stages, the fsdp variants, recomputation, the precisions, uneven nodes
run 1f1b-interleaved emit -t "$(topo cpu-1x4)" -m "$tied" -s 1f1b --chunks 8 -o @OUT/emit
run 1f1b-replicas emit -t "$(topo cpu-1x4)" -m "$tied" -s 1f1b --replicas 2 -o @OUT/emit
run zb1-1x4 emit -t "$(topo cpu-1x4)" -m "$tied" -s zb1 --recompute -o @OUT/emit
run fsdp-full-shard emit -t "$(topo cpu-4x2)" -m "$tied" -s fsdp --chunks 3 --fsdp-variant full-shard --replicas 2 -o @OUT/emit
run tawpipe-islands sim -t "$(topo tawpipe-2x8-a800-pcie-2islands-10gbe)" -m tawpipe-h1024 -s tawpipe --seq 2048 --json
run weipipe-zb2-bf16 emit -t "$(topo cpu-uneven)" -m tiny -s weipipe-zb2 --precision bf16 --grad-precision fp32 -o @OUT/emit
run weipipe-interleave-ends emit -t "$(topo cpu-2x2)" -m tiny -s weipipe-interleave --replicate-ends --weight-wire fp32 -o @OUT/emit
# the search: compare (text and JSON), -s auto in plan, sim and emit
run compare-cpu compare -t "$(topo cpu-2x2)" -m tiny
run compare-cpu-tied-json compare -t "$(topo cpu-1x4)" -m "$tied" --json
run compare-gpu compare -t "$(topo weipipe-2x8-a800-nvlink-10gbe)" -m llama-h1024 --seq 2048
run auto-plan-json plan -t "$(topo cpu-2x2)" -m tiny -s auto --json
run auto-sim-json sim -t "$(topo weipipe-1x8-a800-nvlink)" -m llama-h1024 --seq 4096 -s auto --json
run auto-emit emit -t "$(topo cpu-1x4)" -m "$tied" -s auto -o @OUT/emit

# Every case must have run (exit status 0) on the build before, so that the comparison is of
# real output, and every output must be the same.
fail=0
for d in "$out"/before/*/; do
    name=$(basename "$d")
    if [ "$(cat "$d/status")" != 0 ]; then
        echo "BEFORE failed on $name (exit $(cat "$d/status")): $(head -c 300 "$d/stderr")"; fail=1
    fi
    if ! diff -r "$d" "$out/after/$name" >"$out/diff.txt" 2>&1; then
        echo "DIFFERS: $name"; head -n 20 "$out/diff.txt" | sed 's/^/    /'; fail=1
    fi
done
if [ $fail = 0 ]; then
    echo "identical: $ncases cases (${#strategies[@]} strategies: ${strategies[*]})"
fi
exit $fail
