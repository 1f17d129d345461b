#!/usr/bin/env bash
# Runs every test program (build/tests/test_*) and test script (tests/*/test_*.sh), each as one
# test, and ends with the line CI reads: "N passed, N failed".
# TESTS=pattern runs only those whose name contains it; TESTS="p1 p2" those containing either;
# SKIP="p1 p2" leaves out those containing either (make test-quick).
build=${1:-build}
cd "$(dirname "$0")/.."
passed=0; failed=0; failures=()
logdir=$build/test-logs; mkdir -p "$logdir"
# the emitted runtime's objects, shared by the tests that build emitted folders (tests/make_emitted.sh)
export WPGEN_TEST_OBJCACHE=$PWD/$build/test-objcache
case $build in /*) WPGEN_TEST_OBJCACHE=$build/test-objcache ;; esac
rm -rf "$WPGEN_TEST_OBJCACHE"
run_one() {   # name, command...
    local name=$1; shift
    if [ -n "${TESTS:-}" ]; then
        local p hit=0
        for p in $TESTS; do [[ "$name" == *"$p"* ]] && hit=1; done
        [ $hit = 1 ] || return
    fi
    local q
    for q in ${SKIP:-}; do [[ "$name" == *"$q"* ]] && return; done
    local t0=$SECONDS
    local log=$logdir/${name//\//_}.log    # unit/test_tawpipe and e2e/test_tawpipe: two logs
    if "$@" >"$log" 2>&1; then
        passed=$((passed + 1)); printf '  ok    %-36s %3ds  %s\n' "$name" $((SECONDS - t0)) "$(tail -n 1 "$log")"
    else
        failed=$((failed + 1)); failures+=("$name")
        printf '  FAIL  %-36s %3ds\n' "$name" $((SECONDS - t0)); tail -n 30 "$log" | sed 's/^/        /'
    fi
}
for t in "$build"/tests/test_*; do
    [ -x "$t" ] && run_one "unit/$(basename "$t")" "$t"
done
for t in tests/*/test_*.sh; do
    [ -f "$t" ] && { d=${t#tests/}; run_one "${d%%/*}/$(basename "$t" .sh)" bash "$t" "$build"; }
done
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]} (logs in $logdir/)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
