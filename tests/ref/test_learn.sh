#!/usr/bin/env bash
# The reference trainer learns: a tiny byte-level model on the GPL text that every Debian system
# has goes from ln(256) ~ 5.5 to well under 2.5 (mean of the last 20 steps below 2.0) in 400
# steps of 2048 tokens, about 15 s on an idle 2-core machine.
set -euo pipefail
build=${1:-build}
text=/usr/share/common-licenses/GPL-3
[ -f "$text" ] || text=$(ls /usr/share/common-licenses/* | head -n 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS
timeout 600 "$build/wp-ref" -m tiny --data "$text" --seq 128 --micro-batch-size 8 --micro-batches 2 \
    --steps 400 --lr 3e-3 --warmup 20 --seed 1 --log "$tmp/log.jsonl" --save "$tmp/model.safetensors" \
    >"$tmp/out"
tail -n 2 "$tmp/out"
python3 - "$tmp/log.jsonl" $((SECONDS - t0)) <<'PY'
import json, sys
loss = [json.loads(l)["loss"] for l in open(sys.argv[1])]
mean = lambda xs: sum(xs) / len(xs)
curve = " ".join(f"{s}:{mean(loss[max(0, s - 10):s]):.2f}" for s in (1, 50, 100, 200, 300, 400))
last = mean(loss[-20:])
print(f"learn: loss (mean of the 10 steps before) {curve}; last 20 steps {last:.3f}; {sys.argv[2]} s")
ok = loss[0] > 5.0 and last < 2.0 and all(x == x for x in loss)
if not ok:
    print(f"FAIL: expected the first loss > 5.0 and the mean of the last 20 < 2.0")
sys.exit(0 if ok else 1)
PY
