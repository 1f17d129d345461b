#!/usr/bin/env bash
# While rank 0 writes a checkpoint the other ranks wait for its status without the communication
# timeout (a large model's save to a slow disk takes longer than any transfer; the job used to
# abort after WP_COMM_TIMEOUT, 300 s by default): tests/mpi/save_wait_test.c, rank 0 "saving" for
# 6 s against a 2 s communication timeout (margins for a loaded machine: save_wait_test.c). Usage: tests/mpi/test_save_wait.sh BUILD_DIR.
set -u
build=${1:-build}
prog=save_wait_test
. "$(dirname "${BASH_SOURCE[0]}")/mpi_setup.sh"

# save: every rank gets the status, after the 6 s
WP_COMM_TIMEOUT=2 timeout 60 "${mpi[@]}" -x WP_COMM_TIMEOUT -np 3 "$bin" save >"$tmp/out" 2>&1
rc=$?
if [ $rc -ne 0 ] || [ "$(grep -c "the save's status 42" "$tmp/out")" != 3 ]; then
    echo "FAIL: save wait: exit $rc"; tail -n 20 "$tmp/out"; failed=$((failed + 1))
fi
# plain: the same wait with the communication timeout aborts (what the trainer did before)
WP_COMM_TIMEOUT=2 timeout 60 "${mpi[@]}" -x WP_COMM_TIMEOUT -np 2 "$bin" plain >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q 'comm: rank 1: timeout: .*WP_COMM_TIMEOUT=2' "$tmp/out"; then
    echo "FAIL: plain wait: exit $rc, expected the comm timeout's abort"; tail -n 20 "$tmp/out"; failed=$((failed + 1))
fi
# save with a save timeout shorter than the save: aborts naming it
WP_COMM_TIMEOUT=2 WP_SAVE_TIMEOUT=2 timeout 60 "${mpi[@]}" -x WP_COMM_TIMEOUT -x WP_SAVE_TIMEOUT -np 2 "$bin" save >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q 'comm: rank 1: timeout: .*WP_SAVE_TIMEOUT=2' "$tmp/out"; then
    echo "FAIL: save timeout: exit $rc, expected an abort naming WP_SAVE_TIMEOUT"; tail -n 20 "$tmp/out"; failed=$((failed + 1))
fi
if [ $failed -eq 0 ]; then echo "save wait: 3 of 3 runs as expected"; else echo "save wait: $failed of 3 runs failed"; exit 1; fi
