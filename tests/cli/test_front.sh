#!/usr/bin/env bash
# What a new user meets first (issue 42): `wpgen list` and `plan --help` say --replicate-ends is
# on for tied models; docs/topology.md's example plans, and a link type written as users write it
# (IB, NVLink) loads while one a link may not be is refused listing the classes and their names;
# a model folder named like a preset is loaded, saying so (an empty folder of that name is not a
# model: the preset); the default sequence length; an unknown strategy name lists the strategies (plan, compare, -s auto).
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

# an option's default said in words where the value alone would mislead
"$wpgen" list >"$tmp/list" 2>&1
[ "$(grep -c -- '--replicate-ends: a flag, no value, default on for tied models, off otherwise' "$tmp/list")" = 4 ] && ok ||
    bad "list: $(grep -m1 -- --replicate-ends "$tmp/list")"
"$wpgen" plan --help -s weipipe-interleave 2>&1 | grep -q -- '--replicate-ends .*default on for tied models, off otherwise' && ok ||
    bad "plan --help: $("$wpgen" plan --help -s weipipe-interleave 2>&1 | grep -- --replicate-ends)"

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

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
