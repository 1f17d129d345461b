#!/usr/bin/env bash
# The step line's progress and ETA to --steps (runtime/train/loop.c, shared by wp-ref and every
# emitted train): "step K/N ... | eta 2m31s", from the mean wall time of the recent steps, their
# saves included. Each step here waits for a slow synchronous save (WP_SAVE_DELAY_MS, a test hook),
# so a step takes about 0.2 s while its compute takes milliseconds: the ETA must be the wall time
# left (the run's own mean step times the steps left), not the compute's.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
mkdir -p "$tmp/c"
WP_SAVE_DELAY_MS=200 "$build/wp-ref" -m tests/data/tiny8/config.json --synthetic --steps 24 --save-every 1 --sync-save \
    --save "$tmp/c/ckpt.json" >"$tmp/out" 2>&1 && ok || bad "wp-ref: $(tail -3 "$tmp/out")"
python3 - "$tmp/out" <<'PY' && ok || bad "the step lines' ETA: $(grep '^step' "$tmp/out" | sed -n '1p;4p;24p')"
import re, sys
text = open(sys.argv[1]).read()
unit = {"d": 86400, "h": 3600, "m": 60, "s": 1}
def secs(e): return sum(int(n) * unit[u] for n, u in re.findall(r"(\d+)([dhms])", e))
lines = re.findall(r"^step +(\d+)/(\d+) \|.*\| eta ((?:\d+[dhms])+)$", text, re.M)
assert len(lines) == 24 and all(int(n) == 24 for _, n, _ in lines), "24 step lines 'step K/24 ... | eta X'"
total = float(re.search(r"^wp-ref: 24 steps \(1 to 24\) in ([0-9.]+) s", text, re.M).group(1))
for k, _, e in lines:
    k = int(k)
    want = total / 24 * (24 - k)   # the run's mean step, times the steps left
    got = secs(e)
    if k >= 4 and want >= 2:
        assert 0.5 * want - 1 <= got <= 2 * want + 1, f"step {k}: eta {e} ({got} s), the run's pace says {want:.1f} s"
assert secs(lines[-1][2]) == 0, "the last step's eta is 0s"
PY
echo "eta: $pass passed, $fail failed"
[ $fail = 0 ]
