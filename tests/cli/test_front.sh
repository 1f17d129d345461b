#!/usr/bin/env bash
# What a new user meets first (issue 42): `wpgen list` and `plan --help` say --replicate-ends is
# on for tied models; docs/topology.md's example plans, and a link type written as users write it
# (IB, NVLink) loads while one a link may not be is refused listing the classes and their names.
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

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
