#!/usr/bin/env bash
# Strategies declare themselves (issue 27): a strategy file that is not shipped,
# tests/data/strategies/buckets.lua, declares an option of its own (--buckets B) and is planned,
# verified, searched by compare and -s auto, and emitted with no line of C knowing it (its
# training under mpirun against wp-ref is in tests/e2e/test_parity.sh). The option reaches the
# plan and changes it, a bad value is refused with the range, another strategy's option is
# refused naming the strategy that takes it, the search picks a value of its own from the costs.
# Also the shipped declarations: list and plan --help print them, and 1f1b and zb1's uneven
# stages (--first-stage-layers, --last-stage-layers) reach the plan and are chosen by compare.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

S=tests/data/strategies/buckets.lua
cpu=(-t topologies/cpu-2x2.json -m tiny --replicas 4)
net=(-t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h1024 --replicas 16 --chunks 0)

jget() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval("j" + sys.argv[2]))' "$1" "$2"; }
layers() { grep '^chunks' "$1" | grep -o '\[[0-9]* layer' | grep -o '[0-9]*' | tr '\n' ' '; }

# planned and verified, the option reaching the plan: one chunk by default, B with --buckets B
"$wpgen" plan "${cpu[@]}" -s "$S" >"$tmp/b1" 2>"$tmp/err" && ok || bad "plan $S: $(cat "$tmp/err")"
"$wpgen" plan "${cpu[@]}" -s "$S" --buckets 2 >"$tmp/b2" 2>"$tmp/err" && ok || bad "plan $S --buckets 2: $(cat "$tmp/err")"
[ "$(layers "$tmp/b1")" = "4 " ] && ok || bad "default: not one chunk of 4 layers: $(layers "$tmp/b1")"
[ "$(layers "$tmp/b2")" = "2 2 " ] && ok || bad "--buckets 2: not two chunks: $(layers "$tmp/b2")"
grep -q 'in 2 buckets' "$tmp/b2" && ok || bad "--buckets 2 not in the notes"
# bad values, with the flag and the range; the strategy's own refusal; other strategies' options
expect 2 '--buckets: expected an integer in [1, 64], got "0"' -- plan "${cpu[@]}" -s "$S" --buckets 0
expect 2 '--buckets: expected an integer in [1, 64], got "x"' -- plan "${cpu[@]}" -s "$S" --buckets x
expect 2 '--buckets 8: expected at most the model' -- plan "${cpu[@]}" -s "$S" --buckets 8
expect 2 "--rounds: strategy $S does not take it (tawpipe does)" -- plan "${cpu[@]}" -s "$S" --rounds 2
expect 2 'unknown flag "--buckets"' -- plan -t topologies/cpu-2x2.json -m tiny -s 1f1b --buckets 2
expect 2 '--rounds: strategy 1f1b does not take it (tawpipe does)' -- plan -t topologies/cpu-2x2.json -m tiny -s 1f1b --rounds 2
expect 2 '--pass-micro-batches: strategy tawpipe does not take it (weipipe-interleave and weipipe-naive do)' -- \
    plan -t topologies/cpu-2x2.json -m tiny -s tawpipe --pass-micro-batches 2
expect 2 '--fsdp-variant: expected gather-once or full-shard, got "x"' -- plan -t topologies/cpu-2x2.json -m tiny -s fsdp --fsdp-variant x
expect 2 '--first-stage-layers 3: the model' -- plan -t topologies/cpu-2x2.json -m tiny -s 1f1b --first-stage-layers 3
# help and list print the declarations
"$wpgen" plan --help -s "$S" >"$tmp/help" && grep -q -- '--buckets N .*an integer in \[1, 64\]; default 1; compare and -s auto search it' "$tmp/help" &&
    ok || bad "plan --help -s $S: $(tail -3 "$tmp/help")"
"$wpgen" list >"$tmp/list" && grep -q -- '--rounds N: an integer in \[1, 16384\]' "$tmp/list" && grep -q -- '--last-stage-layers N' "$tmp/list" &&
    ok || bad "list lacks the declared options"

# searched by compare: the search tries 1, 2 and 4 buckets and, on 10 GbE, takes 4 (the
# all-reduces overlap the backward); given, the value is fixed
"$wpgen" compare "${net[@]}" --strategies "$S,1f1b" >"$tmp/cmp" 2>"$tmp/err" && ok || bad "compare: $(cat "$tmp/err")"
grep -q "^$S/b4 " "$tmp/cmp" && ok || bad "compare did not pick 4 buckets: $(cat "$tmp/cmp")"
"$wpgen" compare "${net[@]}" --strategies "$S,1f1b" --json >"$tmp/cmp.json" 2>/dev/null
[ "$(jget "$tmp/cmp.json" "[0]['buckets']")" = 4 ] && ok || bad "compare --json: buckets not 4"
"$wpgen" compare "${net[@]}" --strategies "$S,1f1b" --buckets 2 --json >"$tmp/cmp2.json" 2>/dev/null
[ "$(jget "$tmp/cmp2.json" "[0]['buckets']")" = 2 ] && ok || bad "compare --buckets 2: not fixed"
# and by -s auto over the strategies given
"$wpgen" sim "${net[@]}" -s auto --strategies "$S,1f1b" --json >"$tmp/auto.json" 2>"$tmp/err" && ok || bad "sim -s auto: $(cat "$tmp/err")"
[ "$(jget "$tmp/auto.json" "['strategy']")" = buckets ] && [ "$(jget "$tmp/auto.json" "['auto']['buckets']")" = 4 ] &&
    ok || bad "-s auto did not pick buckets with 4: $(head -c 300 "$tmp/auto.json")"
expect 2 '--strategies: for compare, or -s auto' -- plan "${cpu[@]}" -s "$S" --strategies "$S"
# emitted: the plan as planned
"$wpgen" emit "${cpu[@]}" -s "$S" --buckets 2 -o "$tmp/emit" >/dev/null 2>"$tmp/err" && ok || bad "emit: $(cat "$tmp/err")"
[ "$(jget "$tmp/emit/plan.json" "['chunks'].__len__()")" = 2 ] && ok || bad "emit: not the plan of --buckets 2"
"$wpgen" emit "${cpu[@]}" -s auto --strategies "$S" -o "$tmp/emit-auto" >/dev/null 2>"$tmp/err" && grep -q "picked $S" "$tmp/err" &&
    ok || bad "emit -s auto --strategies: $(cat "$tmp/err")"

# 1f1b and zb1: uneven stages reach the plan; by default the even cut (the plans of before)
M16=tests/data/llama-h1024-l16/config.json
one=(-t topologies/weipipe-1x8-a800-nvlink.json -m "$M16" --seq 4096 --micro-batch-size 16 --replicas 1)
for s in 1f1b zb1; do
    "$wpgen" plan "${one[@]}" -s "$s" >"$tmp/even" 2>/dev/null
    "$wpgen" plan "${one[@]}" -s "$s" --first-stage-layers 1 --last-stage-layers 1 >"$tmp/ends" 2>/dev/null
    [ "$(layers "$tmp/even")" = "2 2 2 2 2 2 2 2 " ] && ok || bad "$s: not the even cut: $(layers "$tmp/even")"
    [ "$(layers "$tmp/ends")" = "1 2 2 3 3 2 2 1 " ] && ok || bad "$s --first-stage-layers 1 --last-stage-layers 1: $(layers "$tmp/ends")"
done
# compare takes the balanced 1f1b: its last stage no longer the bottleneck (of 8 stages: one group
# of 8 GPUs, --context-parallel 8, would win here)
"$wpgen" compare "${one[@]}" --chunks 0 --context-parallel 1 --strategies 1f1b,zb1 >"$tmp/cmp16" 2>/dev/null
grep -q '^1f1b/first1/last1 ' "$tmp/cmp16" && grep -q '^zb1/first1/last1 ' "$tmp/cmp16" && ok || bad "compare: not the uneven stages: $(cat "$tmp/cmp16")"
even=$("$wpgen" sim "${one[@]}" -s 1f1b --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['step_time_s'])")
ends=$("$wpgen" sim "${one[@]}" -s 1f1b --first-stage-layers 1 --last-stage-layers 1 --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['step_time_s'])")
python3 -c "import sys; sys.exit(0 if $ends < 0.9 * $even else 1)" && ok || bad "uneven 1f1b $ends s not 10% faster than even $even s"

echo "test_declare: $pass checks passed, $fail failed"
[ "$fail" -eq 0 ]
