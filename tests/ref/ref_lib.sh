# Shared by the wp-ref error tests (sourced, with $ref, $tmp, n and fails set): expect.

# expect STATUS NEEDLE -- ARGS...: runs wp-ref, checks the exit status and that stderr's first
# line contains NEEDLE (its first but warnings: a resume that extends --steps warns first).
expect() {
    local status=$1 needle=$2; shift 3
    n=$((n + 1))
    "$ref" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local first; first=$(grep -v '^wp-ref: warning: ' "$tmp/err" | head -n 1)
    if [ "$rc" -ne "$status" ] || [[ "$first" != *"$needle"* ]]; then
        echo "FAIL: wp-ref $*: exit $rc (want $status), stderr: $first (want: $needle)"
        fails=$((fails + 1))
    fi
}
