#!/usr/bin/env bash
# What the simulator and the traffic count add for --context-parallel C (docs/context-parallel.md):
# every member's ring attention blocks inside the node, exactly (1f1b of tiny on cpu-1x4 in groups
# of 2, against the same plan on a node of 2 devices: per layer, C-1 steps of a K, V block in the
# forward and of K, V, dK, dV in the backward, each block S/C tokens x kv heads x head dim; the same
# 4 micro-batches a step: a group of 2 runs twice --micro-batches); the
# ring on a slow link lengthens the step (it overlaps the compute, but is not free); tokens/s per
# device over ranks x C; and the bytes between nodes do not grow with the sequence: llama2-7b
# with weipipe-interleave --context-parallel 8 on 4 x 8 H100 moves as many at 1,048,576 tokens as
# at 65,536.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

sed 's/"devices": 4/"devices": 2/; s/"bw_GBps": 10,/"bw_GBps": 20,/' topologies/cpu-1x4.json >"$tmp/1x2.json"
sed 's/"bw_GBps": 10,/"bw_GBps": 0.001,/' topologies/cpu-1x4.json >"$tmp/slow.json"
sed 's/"bw_GBps": 20,/"bw_GBps": 0.002,/' "$tmp/1x2.json" >"$tmp/slow1x2.json"
"$wpgen" sim -t topologies/cpu-1x4.json -m tiny -s 1f1b --micro-batches 1 --context-parallel 2 --json >"$tmp/cp.json" 2>"$tmp/err" || bad "cp: $(cat "$tmp/err")"
"$wpgen" sim -t "$tmp/1x2.json" -m tiny -s 1f1b --micro-batches 2 --json >"$tmp/one.json" 2>"$tmp/err" || bad "1x2: $(cat "$tmp/err")"
"$wpgen" sim -t "$tmp/slow.json" -m tiny -s 1f1b --micro-batches 1 --context-parallel 2 --json >"$tmp/slow.out" 2>"$tmp/err" || bad "slow: $(cat "$tmp/err")"
"$wpgen" sim -t "$tmp/slow1x2.json" -m tiny -s 1f1b --micro-batches 2 --json >"$tmp/slow1.out" 2>"$tmp/err" || bad "slow 1x2: $(cat "$tmp/err")"
python3 - "$tmp/cp.json" "$tmp/one.json" "$tmp/slow.out" "$tmp/slow1.out" <<'PY' && ok || bad "tiny 1f1b in groups of 2: the ring's bytes and time"
import json, sys
cp, one, slow, slow1 = (json.load(open(f)) for f in sys.argv[1:])
# tiny: 4 layers in 2 chunks, 4 heads (2 kv) of 16, seq 64, 2 sequences a micro-batch; fp32 on a CPU
C, layers_per_chunk = 2, 2
block = (2 * 64 // C) * 2 * 16 * 4
per_mb_chunk = layers_per_chunk * (C - 1) * (2 + 4) * block      # FWD: K, V; BWD: K, V, dK, dV
M = 4                                                             # 2 devices a group, 1 micro-batch each: 4 a step
ring = C * M * 2 * per_mb_chunk                                   # every member, every micro-batch, 2 chunks
assert cp["bytes_intra_node"] - one["bytes_intra_node"] == ring, (cp["bytes_intra_node"], one["bytes_intra_node"], ring)
assert cp["bytes_by_link"]["SHM"] == cp["bytes_intra_node"], cp["bytes_by_link"]
assert abs(cp["tokens_per_s_per_device"] - cp["tokens_per_step"] / cp["step_time_s"] / 4) < 1e-6 * cp["tokens_per_s_per_device"]
# on a link so slow that the ring outlasts the compute it overlaps, the step is longer than the same
# plan's without context parallelism (whose activations move as fast: the group's port is C members')
assert slow["step_time_s"] > 1.5 * slow1["step_time_s"], (slow["step_time_s"], slow1["step_time_s"])
PY

for S in 65536 1048576; do
    "$wpgen" plan -t topologies/h100-4x8-ib400.json -m llama2-7b --micro-batch-size 1 --seq $S -s weipipe-interleave \
        --context-parallel 8 --recompute --json >"$tmp/s$S.json" 2>/dev/null
    [ -s "$tmp/s$S.json" ] || bad "4x8 at $S: no plan"
done
python3 - "$tmp/s65536.json" "$tmp/s1048576.json" <<'PY' && ok || bad "4x8 H100: bytes between nodes at 65536 and 1048576 tokens"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["bytes_inter_node"] == b["bytes_inter_node"] > 0, (a["bytes_inter_node"], b["bytes_inter_node"])
assert b["bytes_intra_node"] > 10 * a["bytes_intra_node"], (a["bytes_intra_node"], b["bytes_intra_node"])
PY

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
