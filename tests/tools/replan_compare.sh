#!/usr/bin/env bash
# Before/after comparison for a change to `wpgen replan`: the folders it emits (and what it says)
# for a set of plans and flags must be the same bytes with either binary.
#   bash tests/tools/replan_compare.sh OLD_WPGEN [NEW_WPGEN (default build/wpgen)]
# Each binary is copied to one path and run with WPGEN_HOME this tree, so the job.sbatch that
# names the wpgen that wrote it is the same; the temporary survivors' name is blanked in stderr.
# Prints the differences; exit 0 when there are none.
set -u
cd "$(dirname "$0")/../.."
old=$(realpath "$1") new=$(realpath "${2:-build/wpgen}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export WPGEN_HOME=$PWD TMPDIR=$work/tmp
mkdir -p "$work/bin" "$TMPDIR"
t=topologies

cases() {   # into $work/out with $work/bin/wpgen
    local w=$work/bin/wpgen o=$work/out
    mkdir -p "$o/old"
    emit() { local name=$1; shift; "$w" emit -o "$o/old/$name" "$@" >/dev/null 2>"$o/old/$name.err" || echo "emit $name: exit $?"; }
    emit wi   -t $t/cpu-2x2.json -m tiny -s weipipe-interleave --micro-batch-size 2 --micro-batches 4 \
              --pass-micro-batches 2 --replicate-ends --precision fp32
    emit f1b  -t $t/cpu-4x2.json -m tiny -s 1f1b --replicas 2 --first-stage-layers 1 --recompute --backend cpu --seq 32
    emit fsdp -t $t/dgx-h100.json -m tiny -s fsdp --fsdp-variant full-shard --backend cuda --comm nccl --grad-precision fp32
    emit auto -t $t/cpu-2x2.json -m tiny -s auto --strategies 1f1b,zb1 --micro-batches 2
    replan() { local name=$1; shift; "$w" replan "$@" -o "$o/$name" >"$o/$name.out" 2>"$o/$name.err"; echo $? >"$o/$name.rc"; }
    replan wi-t        "$o/old/wi" -t $t/cpu-1x4.json
    replan wi-without  "$o/old/wi" --without n1
    replan wi-extras   "$o/old/wi" -t $t/cpu-2x2.json --seq 32 --replicate-ends -m small
    replan wi-uneven   "$o/old/wi" -t $t/cpu-uneven.json
    replan f1b-without "$o/old/f1b" --without n3
    replan f1b-t       "$o/old/f1b" -t $t/cpu-2x2.json --replicas 1
    replan fsdp-t      "$o/old/fsdp" -t $t/weipipe-1x8-a800-nvlink.json --fsdp-overlap off
    replan auto-t      "$o/old/auto" -t $t/cpu-1x4.json
    # refused the same way
    replan small       "$o/old/wi" -t $t/cpu-1x1.json --micro-batch-size 100000
    replan n7          "$o/old/wi" --without n7
    replan all         "$o/old/wi" --without n0,n1
    replan broken      "$o/old/wi" -t "$o/old/wi/README"
    rm -rf "$o"/*/runtime "$o"/old/*/runtime   # a copy of the tree's runtime
    sed -i 's/wpgen-survivors-[A-Za-z0-9]*/wpgen-survivors-XXXXXX/g' "$o"/*.err
}

for side in before after; do
    cp "$([ $side = before ] && echo "$old" || echo "$new")" "$work/bin/wpgen"
    cases
    mv "$work/out" "$work/$side"
done
echo "$(ls "$work/after" | grep -c '\.rc$') replans, exit statuses (count status): $(cat "$work"/after/*.rc | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')"
ls "$TMPDIR" | grep . && { echo "left in TMPDIR"; exit 1; }
diff -r "$work/before" "$work/after" && echo "the same bytes"
