#!/usr/bin/env bash
# The communication layer under mpirun: tests/mpi/comm_test.c on 1, 2, 3 and 4 ranks, then the
# failures that must abort the job with one clear line instead of hanging: a send whose receive is
# never posted and a collective a member never joins (each with a 1 s timeout), and a receive whose
# size disagrees with its send. Usage: tests/mpi/test_comm.sh BUILD_DIR (run from the repo root).
set -u
build=${1:-build}
bin=$build/tests-mpi/comm_test
[ -x "$bin" ] || { echo "missing $bin: run make first"; exit 1; }

mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

for p in 1 2 3 4; do
    if timeout 60 "${mpi[@]}" -np $p "$bin" >"$tmp/out" 2>&1; then
        tail -n 1 "$tmp/out"
    else
        echo "FAIL: comm_test on $p ranks (exit $?):"; tail -n 30 "$tmp/out"; failed=$((failed + 1))
    fi
done

# expect_abort MODE PATTERN...: the job must exit nonzero within 20 s (the layer's abort, not our
# timeout) and its output must contain every pattern.
expect_abort() {
    local mode=$1; shift
    local t0=$SECONDS rc
    WP_COMM_TIMEOUT=1 timeout 40 "${mpi[@]}" -x WP_COMM_TIMEOUT -np 2 "$bin" "$mode" >"$tmp/out" 2>&1
    rc=$?
    local dt=$((SECONDS - t0)) ok=1
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $dt -gt 20 ]; then ok=0; fi
    for pat in "$@"; do grep -qF -- "$pat" "$tmp/out" || ok=0; done
    if [ $ok = 1 ]; then
        echo "ok: $mode aborted in ${dt}s (exit $rc): $(grep -m1 '^comm: ' "$tmp/out")"
    else
        echo "FAIL: $mode: exit $rc after ${dt}s, expected a nonzero exit within 20 s and the patterns: $*"
        tail -n 20 "$tmp/out"; failed=$((failed + 1))
    fi
}
expect_abort timeout-send      'comm: rank 0: timeout: SEND "W3" to rank 1 in turn 3' 'after 1.0 s'
expect_abort timeout-allreduce 'comm: rank 0: timeout: ALLREDUCE "D1" on group 0 (ranks 0,1) in turn 5'
expect_abort mismatch          'comm: rank 1: RECV "A2" from rank 0 in turn 7' 'expected 48 bytes, the matching send had 40'
expect_abort truncate          'comm: rank 1: RECV "A2" from rank 0 in turn 7' 'MPI_ERR_TRUNCATE'

if [ $failed -eq 0 ]; then echo "comm: all 8 runs passed"; else echo "comm: $failed of 8 runs failed"; exit 1; fi
