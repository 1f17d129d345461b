# Shared by the test scripts: sourced after `build=...` and `cd` to the repository. wpgen's path,
# a temporary directory removed on exit, and the pass/fail counters with ok and bad (bad prints
# why); each script ends with its own summary line and exit status.
wpgen=$build/wpgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect STATUS 'stderr substring' -- args...: runs wpgen, checks its exit status and that stderr
# holds the substring (scripts with other needs define their own after sourcing this)
expect() {
    local want=$1 msg=$2; shift 3
    "$wpgen" "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" != "$want" ]; then bad "wpgen $*: exit $got, want $want: $(head -3 "$tmp/err")"; return; fi
    if [ -n "$msg" ] && ! grep -qF -- "$msg" "$tmp/err"; then bad "wpgen $*: stderr lacks '$msg': $(head -3 "$tmp/err")"; return; fi
    ok
}

sum() { sha256sum "$1" | cut -d' ' -f1; }

# expect_refused NEEDLE FILE-KEPT -- ARGS...: runs ARGS; exit 2, its output naming NEEDLE (a fixed
# string), and FILE-KEPT unchanged
expect_refused() {
    local needle=$1 kept=$2; shift 3
    local before; before=$(sum "$kept")
    "$@" >"$tmp/out" 2>&1
    local rc=$?
    if [ $rc = 2 ] && grep -qF -- "$needle" "$tmp/out" && [ "$(sum "$kept")" = "$before" ]; then ok
    else bad "$*: exit $rc (want 2), $(sum "$kept" | cut -c1-8) vs ${before:0:8}: $(head -2 "$tmp/out") (want: $needle)"; fi
}
