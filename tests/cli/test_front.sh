#!/usr/bin/env bash
# What a new user meets first (issue 42): -h on every command (the help wins, -s NAME checked);
# `wpgen list` and `plan --help` say --replicate-ends is on for tied models; docs/topology.md's example plans, and a link type written as users write it
# (IB, NVLink) loads while one a link may not be is refused listing the classes and their names;
# a model folder named like a preset is loaded, saying so (an empty folder of that name is not a
# model: the preset); the default sequence length; an unknown strategy name lists the strategies
# (plan, compare, -s auto); sim, compare and -s auto say whether their rates are calibrated (which
# file) or the defaults, with the band, compare marks the rows that tie with the fastest within
# it, and MFU (sim, compare, --json) is the trainers' model FLOPs over the step and the peak;
# --tokens and --gpu-hour-price turn the step into a run's hours, GPU-hours and cost.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

# an option's default said in words where the value alone would mislead
"$wpgen" list >"$tmp/list" 2>&1
[ "$(grep -c -- '--replicate-ends: a flag, no value, default on for tied models, off otherwise' "$tmp/list")" = 4 ] && ok ||
    bad "list: $(grep -m1 -- --replicate-ends "$tmp/list")"
"$wpgen" plan --help -s weipipe-interleave >"$tmp/help" 2>&1
grep -q -- '--replicate-ends .*default on for tied models, off otherwise' "$tmp/help" && ok ||
    bad "plan --help: $(grep -- --replicate-ends "$tmp/help")"

# -h anywhere: the help, exit 0, the other flags not read, on every command; the one argument a
# help reads (-s NAME, whose options it prints) is checked: an unknown strategy is refused
for c in plan emit sim compare calibrate probe export data replan list; do
    "$wpgen" $c --bogus --help >"$tmp/out" 2>"$tmp/err" && "$wpgen" $c --help --bogus >/dev/null 2>&1 &&
        grep -qi usage "$tmp/out" && ok || bad "$c --bogus --help: not the help, exit 0: $(head -2 "$tmp/err")"
done
expect 2 'wpgen: strategy "nope": not one of 1f1b,' -- plan --help -s nope
expect 2 'wpgen: strategy "nope": not one of 1f1b,' -- sim -s nope -h
expect 0 '' -- compare --seq abc --help -s 1f1b
grep -q "^Options of 1f1b" "$tmp/out" && ok || bad "compare --help -s 1f1b: $(tail -2 "$tmp/out")"
expect 2 'wpgen list: takes no arguments, got "tiny"' -- list tiny

# docs/topology.md's example, as written there (IB between nodes, NVLink inside, 4 NICs a node)
awk '/^```json/ {on=1; next} /^```/ {on=0} on' docs/topology.md >"$tmp/topo.json"
"$wpgen" plan -t "$tmp/topo.json" -m llama-h1024 -s weipipe-interleave >"$tmp/out" 2>&1 &&
    grep -q "4x8-h100-4x200g" "$tmp/out" && ok || bad "docs/topology.md's example: $(head -3 "$tmp/out")"
sed 's/"IB"/"NVLink"/' "$tmp/topo.json" >"$tmp/bad.json"
expect 2 'network.type: expected a link type between nodes: NET (also IB, InfiniBand, RoCE, Ethernet, EFA, TCP) or SHM (also shared memory) (docs/topology.md), got "NVLink"' \
    -- plan -t "$tmp/bad.json" -m tiny -s weipipe-interleave

# -m tiny with ./tiny/config.json here: the folder's model (8 layers, not the preset's 4), said
top=$PWD
mkdir -p "$tmp/cwd/tiny"
(cd "$tmp/cwd" && "$top/$wpgen" plan -t "$top/topologies/cpu-2x2.json" -m tiny -s 1f1b) >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && grep -q "model       tiny: H=64, 4 layers" "$tmp/out" && ! [ -s "$tmp/err" ] && ok ||
    bad "an empty folder tiny: $(cat "$tmp/err") $(grep model "$tmp/out")"
cp tests/data/tiny8/config.json "$tmp/cwd/tiny/"
(cd "$tmp/cwd" && "$top/$wpgen" plan -t "$top/topologies/cpu-2x2.json" -m tiny -s 1f1b) >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && grep -q "model       tiny: H=32, 8 layers" "$tmp/out" &&
    grep -qF 'note: -m tiny: loading the folder ./tiny/config.json, not the preset tiny' "$tmp/err" && ok ||
    bad "a folder tiny/config.json: $(cat "$tmp/err") $(grep model "$tmp/out")"
(cd "$tmp/cwd" && "$top/$build/wp-ref" -m tiny --synthetic --steps 1) >"$tmp/out" 2>"$tmp/err"
grep -q "wp-ref: model tiny: hidden 32, 8 layers" "$tmp/out" && grep -qF 'not the preset tiny' "$tmp/err" && ok ||
    bad "wp-ref, a folder tiny/config.json: $(cat "$tmp/err") $(head -1 "$tmp/out")"

# the default sequence length, one rule: the config's max_position_embeddings capped at 4096
"$wpgen" plan -t topologies/h100-16x8-ib400.json -m tests/data/llama-3.2-1b -s fsdp 2>&1 | grep -q "seq 4096," && ok ||
    bad "llama-3.2-1b (131072 positions): not seq 4096"
"$wpgen" plan -t topologies/cpu-2x2.json -m tests/data/tiny8/config.json -s 1f1b 2>&1 | grep -q "seq 48," && ok ||
    bad "tiny8 (48 positions): not seq 48"

# an unknown strategy name: the names there are, not a file that is not there
list='not one of 1f1b, fsdp, tawpipe, weipipe-interleave, weipipe-naive, weipipe-zb1, weipipe-zb2, zb1, auto (wpgen list), nor a path to a .lua file'
expect 2 "wpgen: strategy \"weipipe\": $list" -- plan -t topologies/cpu-2x2.json -m tiny -s weipipe
expect 2 "wpgen: compare: --strategies: strategy \"weipipe\": $list" -- compare -t topologies/cpu-2x2.json -m tiny --strategies weipipe,1f1b
expect 2 "wpgen: --strategies: strategy \"nope\": $list" -- sim -t topologies/cpu-2x2.json -m tiny -s auto --strategies nope,1f1b

# predictions: which rates, the band, ties, MFU
defaults='the defaults, not calibrated: on an H200 they predicted steps 39-54% short, so a step may take up to twice this'
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny -s 1f1b >"$tmp/out" 2>&1
grep -qF "rates       $defaults" "$tmp/out" && grep -q "^step .* bubble .*, MFU [0-9.]*%$" "$tmp/out" && ok || bad "sim: $(grep -E '^(step|rates)' "$tmp/out")"
"$wpgen" calibrate -t tests/data/h200/topology.json --trace tests/data/h200/s4096/trace.json \
    --trace tests/data/h200/s16384/trace.json -o "$tmp/h200.calib.json" >/dev/null 2>&1 || bad "calibrate"
"$wpgen" sim -t tests/data/h200/topology.json -m llama-h1024 -s 1f1b --calibration "$tmp/h200.calib.json" >"$tmp/out" 2>&1
grep -qF "rates       calibrated by $tmp/h200.calib.json: held-out steps measured within 10% of the prediction" "$tmp/out" && ok ||
    bad "sim --calibration: $(grep -E '^rates' "$tmp/out")"
"$wpgen" sim -t tests/data/h200/topology.json -m llama-h1024 -s 1f1b --calibration "$tmp/h200.calib.json" --json >"$tmp/j" 2>&1
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rates"]; assert r["calibrated"] and r["file"]==sys.argv[2] and r["band"]==0.1, r' \
    "$tmp/j" "$tmp/h200.calib.json" && ok || bad "sim --json rates: $(head -c 300 "$tmp/j")"
"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s auto >/dev/null 2>"$tmp/err"
grep -qF "wpgen: auto: rates $defaults" "$tmp/err" && ok || bad "plan -s auto: $(cat "$tmp/err")"
# compare: fsdp 2.485 s and tawpipe 2.504 s tie (0.8%), weipipe-interleave 2.973 s does not
big=(-t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h1024 --seq 16384)
"$wpgen" compare "${big[@]}" >"$tmp/c" 2>/dev/null
grep -qF "rates: $defaults" "$tmp/c" && grep -q "^fsdp/.*  <- fastest, ties with ~$" "$tmp/c" && grep -q "^tawpipe/.*  ~ ties$" "$tmp/c" &&
    ! grep -q "^weipipe-interleave/.*ties" "$tmp/c" && grep -q "^ties: the rows marked ~ are within 10% of the fastest step" "$tmp/c" &&
    grep -q "^strategy  *step s  tokens/s/dev    MFU  bubble" "$tmp/c" && ok || bad "compare: $(cat "$tmp/c")"
"$wpgen" compare "${big[@]}" --json >"$tmp/cj" 2>/dev/null
python3 - "$tmp/cj" <<'PY' && ok || bad "compare --json ties and MFU"
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r.get("fits")]
best = [r for r in rows if r["fastest"]][0]
for r in rows:   # ties: within 10% of the fastest; MFU x step the same model FLOPs for every row
    assert r["ties_fastest"] == (r is not best and r["step_time_s"] <= 1.1 * best["step_time_s"]), r["strategy"]
    assert abs(r["mfu"] * r["step_time_s"] / (best["mfu"] * best["step_time_s"]) - 1) < 1e-9, r["strategy"]
assert sum(r["ties_fastest"] for r in rows) >= 1
PY
# MFU is the trainers': wp-ref's logged MFU gives the same model FLOPs per token as sim's
"$build/wp-ref" -m tiny --synthetic --steps 2 --peak-tflops 1 --log "$tmp/ref.log" >/dev/null 2>&1
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny -s 1f1b --json >"$tmp/sj" 2>/dev/null
python3 - "$tmp/ref.log" "$tmp/sj" <<'PY' && ok || bad "MFU: sim's model FLOPs are not the trainer's"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
f_ref = r["mfu"] * 1e12 / r["tokens_per_s"]                    # --peak-tflops 1
s = json.load(open(sys.argv[2]))
f_sim = s["mfu"] * s["step_time_s"] * 4 * 0.05e12 / s["tokens_per_step"]   # 4 ranks of 0.05 TFLOP/s
assert abs(f_sim / f_ref - 1) < 1e-3, (f_sim, f_ref)
PY

# a budget: --tokens N [--gpu-hour-price X] turns the predicted step into steps, hours, GPU-hours
# and cost, up to the rates' band (2.17x with the defaults), in text and JSON
one=(-t topologies/h100-16x8-ib400.json -m tests/data/llama-3.2-1b -s fsdp)
"$wpgen" sim "${one[@]}" --tokens 100B --gpu-hour-price 2.5 >"$tmp/out" 2>&1
grep -q "^budget      100B tokens = [0-9]* steps of 2097152 tokens: .* GPU-hours on 128 devices, cost [0-9]* at 2.5 per GPU-hour; up to .*, cost [0-9]* (2.17x, the rates' band)$" "$tmp/out" &&
    ok || bad "sim --tokens: $(grep budget "$tmp/out")"
for t in 100B 100e9 1e11 0.1T 100000000000 100b; do
    "$wpgen" sim "${one[@]}" --tokens $t --gpu-hour-price 2.5 --json >"$tmp/sj.$t" 2>&1
done
python3 - "$tmp"/sj.* <<'PY' && ok || bad "sim --json budget"
import json, math, sys
for f in sys.argv[1:]:
    j = json.load(open(f)); b = j["budget"]
    assert b["tokens"] == 10**11 and b["tokens_per_step"] == j["tokens_per_step"] == 2097152, (f, b)
    assert b["steps"] == math.ceil(1e11 / 2097152) and b["devices"] == 128, b
    assert abs(b["wall_s"] / (b["steps"] * j["step_time_s"]) - 1) < 1e-12, b
    assert abs(b["gpu_hours"] / (b["wall_s"] / 3600 * 128) - 1) < 1e-12 and abs(b["cost"] / (2.5 * b["gpu_hours"]) - 1) < 1e-12, b
    assert abs(b["upper_factor"] - 1 / (1 - 0.54)) < 1e-12 and b["price_per_gpu_hour"] == 2.5, b
PY
"$wpgen" sim "${one[@]}" --tokens 2.5T --json 2>/dev/null | python3 -c '
import json, sys; b = json.load(sys.stdin)["budget"]; assert b["tokens"] == 2500000000000 and b["cost"] is None, b' && ok || bad "--tokens 2.5T"
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --strategies 1f1b,fsdp --tokens 1e9 --gpu-hour-price 0.5 >"$tmp/c" 2>&1
grep -q "^strategy .* peak GiB  run hours  GPU-hours       cost$" "$tmp/c" && grep -q "^budget: 1000000000 tokens, cost at 0.5 per GPU-hour; a step may take up to 2.17x" "$tmp/c" &&
    ok || bad "compare --tokens: $(cat "$tmp/c")"
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --strategies 1f1b,fsdp --tokens 1e9 --gpu-hour-price 0.5 --json 2>/dev/null | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    b = r["budget"]; assert b["steps"] == -(-10**9 // r["tokens_per_step"]) and abs(b["cost"] / (0.5 * b["gpu_hours"]) - 1) < 1e-12, r
' && ok || bad "compare --json budget"
"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s auto --tokens 1B >/dev/null 2>"$tmp/err"
grep -q "^wpgen: auto: budget 1B tokens = 488282 steps of 2048 tokens: " "$tmp/err" && ok || bad "plan -s auto --tokens: $(cat "$tmp/err")"
"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s auto --tokens 1B --json 2>/dev/null | python3 -c '
import json, sys; assert json.load(sys.stdin)["budget"]["steps"] == 488282' && ok || bad "plan -s auto --json budget"
# bad values: the flag named, its range, exit 2
count='expected a count from 1 to 1e+18, a number with K, M, B or T after it if you like (100B, 2.5T, 1e9), got'
for v in 0 abc 1.5X -5 1e19 nan 100BB; do expect 2 "wpgen: --tokens: $count \"$v\"" -- sim -t topologies/cpu-2x2.json -m tiny --tokens "$v"; done
expect 2 'wpgen: --gpu-hour-price: expected a number in [0, 1000000], got "-1"' -- compare -t topologies/cpu-2x2.json -m tiny --tokens 1B --gpu-hour-price -1
expect 2 'wpgen: --gpu-hour-price: expected a number in [0, 1000000], got "2$"' -- sim -t topologies/cpu-2x2.json -m tiny --tokens 1B --gpu-hour-price '2$'
expect 2 'wpgen: --gpu-hour-price: prices the budget of --tokens N; give --tokens too' -- sim -t topologies/cpu-2x2.json -m tiny --gpu-hour-price 2
expect 2 'wpgen plan: --tokens: for sim, compare and -s auto, which predict the step' -- plan -t topologies/cpu-2x2.json -m tiny -s 1f1b --tokens 1B
expect 2 'wpgen: --tokens given twice' -- sim -t topologies/cpu-2x2.json -m tiny --tokens 1B --tokens 2B

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
