#!/usr/bin/env bash
# The optimizer's flags reach the update: each of --beta1, --beta2, --eps, --min-lr, --schedule
# and --decay-fraction changes the weights wp-ref trains in 4 steps, and the logged learning rates
# follow the schedule asked for. A resume with another --beta2 is refused (exit 2, both values
# named, the checkpoint untouched); one with another --lr and --schedule runs, warning with the
# old and the new value. --peak-tflops gives MFU, in the step line and the log.
set -uo pipefail
build=${1:-build}
ref=$build/wp-ref
. tests/check.sh
common=(-m tiny --synthetic --seq 16 --steps 4 --lr 1e-2 --warmup 1)

train() {   # NAME FLAGS...: trains into $tmp/NAME/ (model, log)
    local name=$1; shift
    mkdir -p "$tmp/$name"
    "$ref" "${common[@]}" "$@" --save "$tmp/$name/checkpoint.json" --log "$tmp/$name.log" >"$tmp/$name.out" 2>&1 ||
        bad "wp-ref $*: exit $?: $(tail -2 "$tmp/$name.out")"
}
lrs() { sed -E 's/.*"lr":([^,]*).*/\1/' "$tmp/$1.log" | tr '\n' ' '; }

train base
for run in "beta1 --beta1 0.5" "beta2 --beta2 0.8" "eps --eps 1e-2" "minlr --min-lr 0" \
           "constant --schedule constant" "wsd --schedule wsd --decay-fraction 0.4"; do
    set -- $run
    name=$1; shift
    train "$name" "$@"
    # the manifests but for the run's id (another setting, another run): the shards' names hold their content's hash
    if cmp -s <(grep -v '^ "run": ' "$tmp/base/checkpoint.json") <(grep -v '^ "run": ' "$tmp/$name/checkpoint.json"); then
        bad "$*: the same weights as without"; else ok; fi
done
# warm-up 1 (step 0: 1e-2), then a cosine over 3 steps from 1e-2 to 1e-3 at step 4: at steps 1, 2, 3
# 1e-3 + 9e-3 * (1 + cos(k pi / 3)) / 2 for k = 0, 1, 2: 1e-2, 7.75e-3, 3.25e-3; to --min-lr 0,
# 1e-2 * (1 + cos(k pi / 3)) / 2: 1e-2, 7.5e-3, 2.5e-3; constant stays at 1e-2; wsd's 0.4 of 3 steps
# rounds to 1 decay step, the last (step 3 at 1e-2, min_lr at step 4, never run).
close() {   # NAME RATES...: the logged rates of NAME are these, within 1e-6 relative
    local name=$1; shift
    awk -v want="$*" -v got="$(lrs "$name")" 'BEGIN { n = split(want, w, " "); m = split(got, g, " "); bad = n != m;
        for (i = 1; i <= n; i++) if ((g[i] - w[i]) ^ 2 > (1e-6 * w[i]) ^ 2) bad = 1; exit bad }' && ok ||
        bad "$name: rates $(lrs "$name"), expected $*"
}
close base 1e-2 1e-2 7.75e-3 3.25e-3
close constant 1e-2 1e-2 1e-2 1e-2
close wsd 1e-2 1e-2 1e-2 1e-2
close minlr 1e-2 1e-2 7.5e-3 2.5e-3

# Resume: another --beta2 refused, the checkpoint as it was; another --lr and schedule warned of.
mkdir -p "$tmp/r"
"$ref" "${common[@]}" --stop-at 2 --save "$tmp/r/checkpoint.json" >/dev/null 2>&1 || bad "first half"
sum=$(cat "$tmp"/r/* | cksum)
"$ref" "${common[@]}" --beta2 0.99 --resume "$tmp/r/checkpoint.json" --save "$tmp/r/checkpoint.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q -- '--beta2 0.99: the run being resumed was trained with --beta2 0.95' "$tmp/err" && ok ||
    bad "resume with another --beta2: exit $rc: $(cat "$tmp/err")"
[ "$(cat "$tmp"/r/* | cksum)" = "$sum" ] && ok || bad "a refused resume changed the checkpoint"
"$ref" -m tiny --synthetic --seq 16 --steps 4 --lr 5e-3 --warmup 1 --schedule linear --resume "$tmp/r/checkpoint.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] && grep -q -- 'warning: --lr changes on resume: 0.01 in the checkpoint, 0.005 now' "$tmp/err" &&
    grep -q -- 'warning: --schedule changes on resume: cosine in the checkpoint, linear now' "$tmp/err" && ok ||
    bad "resume with another --lr: exit $rc: $(cat "$tmp/err")"
"$ref" "${common[@]}" --resume "$tmp/r/checkpoint.json" >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && [ ! -s "$tmp/err" ] && ok || bad "resume with the same flags warned: $(cat "$tmp/err")"

# MFU: with --peak-tflops, each log line's mfu is the model FLOPs of its step over its time and
# the peak. tiny (hidden 64, 4 layers, 4 heads of 16, 2 kv heads, ffn 176, vocabulary 256) at
# --seq 16: per layer 64*(64+2*32) + 64*64 + 3*176*64 = 46080 parameters in matrices, 4 layers and
# the head (256*64) 200704; 6*200704 + 6*4*16*64 (attention) = 1228800 FLOPs a token, 32 tokens a step.
"$ref" "${common[@]}" --peak-tflops 0.5 --log "$tmp/mfu.log" >"$tmp/mfu.out" 2>&1 || bad "--peak-tflops: $(tail -2 "$tmp/mfu.out")"
python3 - "$tmp/mfu.log" <<'PY' && ok || bad "mfu in the log: $(head -2 "$tmp/mfu.log")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 4
for r in rows:
    want = 1228800 * 32 / (r["ms"] * 1e-3) / 0.5e12
    assert abs(r["mfu"] - want) <= 1e-3 * want + 1e-6, (r, want)
PY
grep -q '| MFU ' "$tmp/mfu.out" && ! grep -q 'MFU' "$tmp/base.out" && ! grep -q '"mfu"' "$tmp/base.log" && ok ||
    bad "MFU in the step line with --peak-tflops only"
"$ref" "${common[@]}" --peak-tflops 0 >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q -- '--peak-tflops: expected a number in (0, 1e6], got "0"' "$tmp/err" && ok || bad "--peak-tflops 0: $(cat "$tmp/err")"

# a value in range as written but not as AdamW's 32-bit float: refused with the value as written,
# the range, what it rounds to and the nearest value that is in range
"$ref" "${common[@]}" --eps 1e-300 >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q -- '--eps: expected a number in (0, 1\], got "1e-300", which is 0 as a 32-bit float (AdamW.s precision), outside the range; the nearest value inside is 1.40129846e-45' "$tmp/err" &&
    ok || bad "--eps 1e-300: $(cat "$tmp/err")"
"$ref" "${common[@]}" --beta2 0.9999999999 >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q -- '--beta2: expected a number in \[0, 1), got "0.9999999999", which is 1 as a 32-bit float.*nearest value inside is 0.99999994' "$tmp/err" &&
    ok || bad "--beta2 0.9999999999: $(cat "$tmp/err")"

echo "optim flags: $pass passed, $fail failed"
[ $fail = 0 ]
