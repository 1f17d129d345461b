#!/usr/bin/env bash
# The end-of-run summary compares the mean loss of the first and the last 10 steps (as many as
# fit twice in a shorter run; one step alone: itself), not two single noisy steps: its figures are
# the logged losses' means.
set -uo pipefail
build=${1:-build}
ref=$build/wp-ref
. tests/check.sh

summary() {   # STEPS: runs wp-ref for STEPS steps; its summary line must give the log's means
    local n=$1 k
    "$ref" -m tiny --synthetic --seq 16 --steps "$n" --lr 1e-2 --log "$tmp/log" >"$tmp/out" 2>&1 || { bad "wp-ref --steps $n: exit $?"; return; }
    python3 - "$tmp/log" "$tmp/out" "$n" <<'PY' && ok || bad "--steps $n: $(tail -1 "$tmp/out")"
import json, re, sys
loss = [json.loads(l)["loss"] for l in open(sys.argv[1])]
line = [l for l in open(sys.argv[2]) if l.startswith("wp-ref: %s steps" % sys.argv[3])][0]
n = len(loss)
k = 10 if n >= 20 else max(1, n // 2)
first, last = sum(loss[:k]) / k, sum(loss[-k:]) / k
if k > 1:
    m = re.search(r"loss mean ([0-9.]+) \(steps 1-%d\) -> ([0-9.]+) \(steps %d-%d\) \(min ([0-9.]+)\)" % (k, n - k + 1, n), line)
else:
    m = re.search(r"loss ([0-9.]+) -> ([0-9.]+) \(min ([0-9.]+)\)", line)
assert m, line
assert abs(float(m.group(1)) - first) < 1e-4 and abs(float(m.group(2)) - last) < 1e-4, (m.groups(), first, last)
assert abs(float(m.groups()[-1]) - min(loss)) < 1e-4, (m.groups(), min(loss))
PY
}
summary 30
summary 7
summary 1

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
