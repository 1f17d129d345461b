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
