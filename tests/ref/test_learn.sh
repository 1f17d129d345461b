#!/usr/bin/env bash
# The reference trainer learns: a tiny byte-level model on the GPL text that every Debian system
# has goes from ln(256) ~ 5.5 to well under 2.5 (mean of the last 20 steps below 2.0) in 400
# steps of 2048 tokens, about 15 s on an idle 2-core machine. The same run in bf16 (--precision
# bf16: bf16 weights in the math, activations, their gradients and the weight gradients, wpgen's
# default on GPUs) ends no more than 3% above it (mean of the last 20 steps), and no more than 10%
# below. Measured on seeds 1, 2, 3: +0.64%, +0.58%, -2.22% (with fp32 weight gradients: +3.06%,
# +1.30%, -0.73%); seed 1 moved to -1.97% and then to -4.15% when the attention's softmax row step
# moved into attention_tiles.h (the same sums, compiled with other fma contractions). Those are of
# the size of what any change of rounding does to a trajectory, in either direction, not a drift of
# bf16: what bf16 must not do is train worse, so the bound is 3% above; a bf16 run far below fp32
# (10%) would be a defect of another kind (a target leaking into the inputs), not of rounding.
set -euo pipefail
build=${1:-build}
text=/usr/share/common-licenses/GPL-3
[ -f "$text" ] || text=$(ls /usr/share/common-licenses/* | head -n 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS
timeout 600 "$build/wp-ref" -m tiny --data "$text" --seq 128 --micro-batch-size 8 --micro-batches 2 \
    --steps 400 --lr 3e-3 --warmup 20 --seed 1 --log "$tmp/log.jsonl" --save "$tmp/checkpoint.json" \
    >"$tmp/out"
tail -n 2 "$tmp/out"
t1=$SECONDS
timeout 600 "$build/wp-ref" -m tiny --data "$text" --seq 128 --micro-batch-size 8 --micro-batches 2 \
    --steps 400 --lr 3e-3 --warmup 20 --seed 1 --log "$tmp/log16.jsonl" --precision bf16 >"$tmp/out16"
python3 - "$tmp/log.jsonl" $((t1 - t0)) "$tmp/log16.jsonl" $((SECONDS - t1)) <<'PY'
import json, sys
loss = [json.loads(l)["loss"] for l in open(sys.argv[1])]
mean = lambda xs: sum(xs) / len(xs)
curve = " ".join(f"{s}:{mean(loss[max(0, s - 10):s]):.2f}" for s in (1, 50, 100, 200, 300, 400))
last = mean(loss[-20:])
print(f"learn: loss (mean of the 10 steps before) {curve}; last 20 steps {last:.3f}; {sys.argv[2]} s")
ok = loss[0] > 5.0 and last < 2.0 and all(x == x for x in loss)
if not ok:
    print(f"FAIL: expected the first loss > 5.0 and the mean of the last 20 < 2.0")
loss16 = [json.loads(l)["loss"] for l in open(sys.argv[3])]
last16 = mean(loss16[-20:])
print(f"learn: bf16 last 20 steps {last16:.3f} (fp32 {last:.3f}, {100 * (last16 - last) / last:+.2f}%); {sys.argv[4]} s")
if not (len(loss16) == len(loss) and -0.10 * last <= last16 - last <= 0.03 * last):
    print("FAIL: expected the bf16 run's last 20 steps at most 3% above the fp32 run's and at most 10% below")
    ok = False
sys.exit(0 if ok else 1)
PY
