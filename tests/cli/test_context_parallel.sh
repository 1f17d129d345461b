#!/usr/bin/env bash
# --context-parallel C (issue 41, docs/context-parallel.md): refused, exit 2 naming the flag, where
# C does not divide a node's devices or an island's, or the sequence does not split into 2C equal
# chunks; emit refuses any C > 1 (the train loop does not run the ring yet); a plan over groups
# records context_parallel, and a member's activations fall by C and its masters are a 1/C shard
# (against the same plan on a cluster of the groups' count of devices: the bytes between nodes alike).
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

expect 2 "--context-parallel 3: does not divide node n0's 4 devices (topologies/cpu-1x4.json: nodes[0].devices)" \
    -- plan -t topologies/cpu-1x4.json -m tiny -s weipipe-interleave --context-parallel 3
expect 2 "--context-parallel 8: a group must stay inside one PCIe island, and node n0's islands hold 4 devices each" \
    -- sim -t topologies/tawpipe-2x8-a800-pcie-2islands-10gbe.json -m llama-h1024 -s tawpipe --context-parallel 8
expect 2 "--context-parallel 4: the sequence (--seq 100) does not split into 2C = 8 equal chunks" \
    -- plan -t topologies/cpu-1x4.json -m tiny -s fsdp --seq 100 --context-parallel 4
expect 2 '--context-parallel: expected an integer in [1, ' -- plan -t topologies/cpu-1x4.json -m tiny --context-parallel 0
expect 2 "--context-parallel 2: does not divide" -- compare -t topologies/cpu-uneven.json -m tiny --context-parallel 2
mkdir -p "$tmp/keep"; echo mine >"$tmp/keep/notes.txt"
expect 2 "emit: --context-parallel 2: context-parallel plans cannot be emitted yet: the train loop does not run the ring yet (the CPU model does)" \
    -- emit -t topologies/cpu-1x4.json -m tiny -s weipipe-interleave --context-parallel 2 -o "$tmp/keep"
[ "$(ls "$tmp/keep")" = notes.txt ] && ok || bad "emit refused but wrote: $(ls "$tmp/keep")"

# the same plan: cpu-1x4 in groups of 2, and a node of 2 devices (each group's port twice the bandwidth)
sed 's/"devices": 4/"devices": 2/; s/"bw_GBps": 10,/"bw_GBps": 20,/' topologies/cpu-1x4.json >"$tmp/1x2.json"
for s in weipipe-interleave 1f1b fsdp; do
    "$wpgen" plan -t topologies/cpu-1x4.json -m tiny -s $s --context-parallel 2 --json >"$tmp/cp.json" 2>"$tmp/err" || { bad "$s cp2: $(cat "$tmp/err")"; continue; }
    # (a group runs C x --micro-batches: the step's batch stays the devices')
    "$wpgen" plan -t "$tmp/1x2.json" -m tiny -s $s --micro-batches 8 --json >"$tmp/one.json" 2>"$tmp/err" || { bad "$s 1x2: $(cat "$tmp/err")"; continue; }
    python3 - "$tmp/cp.json" "$tmp/one.json" <<'PY' && ok || bad "$s: a member's memory against the group plan's"
import json, sys
cp, one = (json.load(open(f)) for f in sys.argv[1:])
assert cp["context_parallel"] == 2 and one["context_parallel"] == 1, (cp["context_parallel"], one["context_parallel"])
assert cp["ranks"] == one["ranks"] == 2 and cp["micro_batches"] == one["micro_batches"] == 16
a, b = cp["peak_mem_breakdown"], one["peak_mem_breakdown"]
assert a["activations"] * 2 == b["activations"], (a, b)
assert abs(a["masters_optimizer"] * 2 - b["masters_optimizer"]) <= 8, (a, b)
assert cp["bytes_inter_node"] == one["bytes_inter_node"]
PY
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
