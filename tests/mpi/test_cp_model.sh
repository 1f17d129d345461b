#!/usr/bin/env bash
# Context parallelism in the CPU model (cpu/model_cp.h): tests/mpi/cp_model_test.c on C = 2 and
# C = 4 ranks, one group sharing each micro-batch of tiny8 (S = 32 and 64 tokens), against one
# process on the whole sequences: loss, the chunks' output and input gradient rows, and every
# weight gradient summed over the members, within the reordering bound its header derives. Then
# the same with RoPE left at the member's local positions 0 .. S/C (the mutation "wrong-positions"),
# which must fail: the comparison sees a wrong layout. Usage: tests/mpi/test_cp_model.sh BUILD_DIR
# (run from the repo root).
set -u
build=${1:-build}
prog=cp_model_test
. "$(dirname "${BASH_SOURCE[0]}")/mpi_setup.sh"
export OMP_NUM_THREADS=1   # C ranks on the machine's few cores

for run in "2 32" "4 32" "4 64"; do
    set -- $run
    if timeout 120 "${mpi[@]}" -x OMP_NUM_THREADS -np "$1" "$bin" "$2" >"$tmp/out" 2>&1; then
        grep -F "largest difference" "$tmp/out"
    else
        echo "FAIL: cp_model_test on $1 ranks, S = $2:"; tail -n 30 "$tmp/out"; failed=$((failed + 1))
    fi
done

# the mutation: the ring with the wrong RoPE positions must be caught
timeout 120 "${mpi[@]}" -x OMP_NUM_THREADS -np 2 "$bin" 32 wrong-positions >"$tmp/out" 2>&1
rc=$?
if [ $rc = 1 ] && grep -qF "gradient of model.embed_tokens.weight" "$tmp/out"; then
    echo "ok: wrong positions caught: $(grep -m1 -o "the first chunk's output: .*" "$tmp/out")"
else
    echo "FAIL: wrong positions: exit $rc, expected 1 and the gradients' differences"; tail -n 10 "$tmp/out"; failed=$((failed + 1))
fi

if [ $failed -eq 0 ]; then echo "cp_model: all 4 runs passed"; else echo "cp_model: $failed of 4 runs failed"; exit 1; fi
