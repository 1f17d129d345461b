#!/usr/bin/env bash
# The communication layer under mpirun: tests/mpi/comm_test.c on 1, 2, 3 and 4 ranks, then the
# failures that must abort the job with one clear line instead of hanging: a send whose receive is
# never posted and a collective a member never joins (each with a 1 s timeout), and a receive whose
# size disagrees with its send, a peer outside the world, and a failing MPI call (exit status 3,
# every rank ended). The same tests again with every operation longer than 999 elements
# cut into pieces (WP_COMM_MAX_ELEMS=999, on 2 and 3 ranks: smaller pieces make tens of thousands
# of requests of the larger tests, slow to poll), a size mismatch still caught piece by piece,
# and a bad WP_COMM_MAX_ELEMS refused as bad input. Usage: tests/mpi/test_comm.sh BUILD_DIR (run from the repo root).
set -u
build=${1:-build}
prog=comm_test
. "$(dirname "${BASH_SOURCE[0]}")/mpi_setup.sh"

for p in 1 2 3 4; do
    if timeout 60 "${mpi[@]}" -np $p "$bin" >"$tmp/out" 2>&1; then
        tail -n 1 "$tmp/out"
    else
        echo "FAIL: comm_test on $p ranks (exit $?):"; tail -n 30 "$tmp/out"; failed=$((failed + 1))
    fi
done

# in pieces of 999 elements: every operation of the tests above longer than that takes several MPI calls
for p in 2 3; do
    if WP_COMM_MAX_ELEMS=999 timeout 120 "${mpi[@]}" -x WP_COMM_MAX_ELEMS -np $p "$bin" >"$tmp/out" 2>&1; then
        echo "pieces of 999: $(tail -n 1 "$tmp/out")"
    else
        echo "FAIL: comm_test on $p ranks in pieces of 999 (exit $?):"; tail -n 30 "$tmp/out"; failed=$((failed + 1))
    fi
done
# a bad value is bad input (exit 2), the variable named, before anything is sent
WP_COMM_MAX_ELEMS=0 timeout 40 "${mpi[@]}" -x WP_COMM_MAX_ELEMS -np 2 "$bin" >"$tmp/out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -qF "WP_COMM_MAX_ELEMS=0: expected a whole number from 1 to 2147483647" "$tmp/out"; then
    echo "ok: WP_COMM_MAX_ELEMS=0 refused (exit 2)"
else
    echo "FAIL: WP_COMM_MAX_ELEMS=0: exit $rc, expected 2 and the variable named"; tail -n 5 "$tmp/out"; failed=$((failed + 1))
fi

# expect_abort MODE PATTERN...: the job must exit nonzero by the layer's own abort (1 s after the
# stalled operation, WP_COMM_TIMEOUT=1), not by our timeout (exit 124), and its output must
# contain every pattern. The timeout only bounds a hang: 120 s leaves mpirun's start on a loaded
# machine (several seconds with a second job on the same cores) a wide margin, and the abort's
# message, which says after how long it fired, is what shows the layer's timeout acted.
expect_abort() {
    local mode=$1; shift
    local t0=$SECONDS rc
    WP_COMM_TIMEOUT=1 timeout 120 "${mpi[@]}" -x WP_COMM_TIMEOUT -x WP_COMM_MAX_ELEMS -np 2 "$bin" "$mode" >"$tmp/out" 2>&1
    rc=$?
    rc_last=$rc
    local dt=$((SECONDS - t0)) ok=1
    if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then ok=0; fi
    for pat in "$@"; do grep -qF -- "$pat" "$tmp/out" || ok=0; done
    if [ $ok = 1 ]; then
        echo "ok: $mode aborted in ${dt}s (exit $rc): $(grep -m1 -F -- "$1" "$tmp/out")"
    else
        echo "FAIL: $mode: exit $rc after ${dt}s, expected the layer's abort (a nonzero exit, not 124) and the patterns: $*"
        tail -n 20 "$tmp/out"; failed=$((failed + 1))
    fi
}
expect_abort timeout-send      'comm: rank 0: timeout: SEND "W3" to rank 1 in turn 3' 'after 1.0 s'
expect_abort timeout-allreduce 'comm: rank 0: timeout: ALLREDUCE "D1" on group 0 (ranks 0,1) in turn 5'
expect_abort mismatch          'comm: rank 1: RECV "A2" from rank 0 in turn 7' 'expected 48 bytes, the matching send had 40'
expect_abort truncate          'comm: rank 1: RECV "A2" from rank 0 in turn 7' 'MPI_ERR_TRUNCATE'
# 10 floats sent as 7 + 3, 12 received as 7 + 5: the second piece names itself
WP_COMM_MAX_ELEMS=7 expect_abort mismatch 'comm: rank 1: RECV "A2" from rank 0 in turn 7 (20 bytes), piece 2 of 2' \
    'expected 20 bytes, the matching send had 12'
# a peer outside the world (comm_book's check, the same in both layers; a send to self is allowed:
# the runs on 1 rank above make them)
expect_abort bad-peer 'comm: rank 0: SEND "W3" in turn 3: peer 2 outside the world of 2 ranks'
# a failing MPI call (MPI_CHECK, hostmpi/host_mpi.h) ends the whole job with exit status 3, naming
# the rank, file, line, call and MPI's text: rank 0, which waits for nothing, is ended with it
expect_abort mpi-fail 'rank 1: tests/mpi/comm_test.c:' ': MPI_Comm_rank(MPI_COMM_NULL, &x) failed: MPI_ERR_COMM'
[ "$(grep -c 'no abort' "$tmp/out")" = 0 ] && [ $rc_last = 3 ] || {
    echo "FAIL: mpi-fail: exit $rc_last (expected 3), or a rank was not ended: $(grep 'no abort' "$tmp/out")"; failed=$((failed + 1)); }

if [ $failed -eq 0 ]; then echo "comm: all 14 runs passed"; else echo "comm: $failed of 14 runs failed"; exit 1; fi
