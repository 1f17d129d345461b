# Shared by the test scripts: sourced after `build=...` and `cd` to the repository. wpgen's path,
# a temporary directory removed on exit, and the pass/fail counters with ok and bad (bad prints
# why); each script ends with its own summary line and exit status.
wpgen=$build/wpgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
