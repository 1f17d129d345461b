#!/usr/bin/env bash
# Transfers in pieces end where whole ones do: emitted programs trained with every transfer,
# collective and checkpoint gather cut into pieces of 61 elements (WP_COMM_MAX_ELEMS, the hook that
# runs the path of operations past MPI's 2^31 elements on a small model) save checkpoints
# byte-identical to the same run without it: weipipe-interleave on 4 ranks (point to point), and
# fsdp on 2 (all-gathers and reduce-scatters of 2 members, as broadcasts and reduces of each
# member's shard), in fp32 and in bf16. Sums of two are one addition, the same in any algorithm,
# so equal bytes are the test (a sum over more members may add in another order in pieces).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
run=(--synthetic --seed 3 --lr 2e-3 --warmup 1 --steps 3)
sed 's/"devices": 4/"devices": 2/; s/cpu-1x4/cpu-1x2/' topologies/cpu-1x4.json >"$tmp/cpu-1x2.json"

# same_run NAME NP TOPOLOGY STRATEGY [FLAGS...]: emitted, built, trained twice, compared
same_run() {
    local name=$1 np=$2 topo=$3 s=$4; shift 4
    local d=$tmp/$name
    "$build/wpgen" emit -t "$topo" -m "$model" --micro-batch-size 2 -s "$s" --micro-batches 2 "$@" -o "$d" >/dev/null &&
        bash tests/make_emitted.sh "$d" >/dev/null 2>&1 || { bad "$name: emit or build"; return; }
    mkdir -p "$d/whole" "$d/pieces"
    "${mpirun[@]}" -np "$np" "$d/train" "${run[@]}" --save "$d/whole/checkpoint.json" >"$tmp/out" 2>&1 ||
        { bad "$name: the run without pieces: $(tail -3 "$tmp/out")"; return; }
    WP_COMM_MAX_ELEMS=61 "${mpirun[@]}" -x WP_COMM_MAX_ELEMS -np "$np" "$d/train" "${run[@]}" \
        --save "$d/pieces/checkpoint.json" >"$tmp/out" 2>&1 || { bad "$name: the run in pieces: $(tail -3 "$tmp/out")"; return; }
    same_ckpt "$d/whole/checkpoint.json" "$d/pieces/checkpoint.json" && ok ||
        bad "$name: the checkpoint in pieces differs from the one without"
}
same_run weipipe 4 topologies/cpu-2x2.json weipipe-interleave
same_run fsdp 2 "$tmp/cpu-1x2.json" fsdp
same_run fsdp-bf16 2 "$tmp/cpu-1x2.json" fsdp --precision bf16

# the hook is bad input when it is no count: exit 2 naming it, nothing trained
WP_COMM_MAX_ELEMS=x "${mpirun[@]}" -x WP_COMM_MAX_ELEMS -np 4 "$tmp/weipipe/train" "${run[@]}" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "WP_COMM_MAX_ELEMS=x: expected a whole number from 1 to 2147483647" "$tmp/out" && ok ||
    bad "WP_COMM_MAX_ELEMS=x: exit $rc: $(head -2 "$tmp/out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
