#!/usr/bin/env bash
# The models as published, trained by emitted pipelined programs under mpirun against the
# reference trainer (tests/e2e/parity_lib.sh: every step's loss and every weight at the end):
# tiny8's shape with Llama 3.1's rope_scaling (an original context of 32, so that head_dim 12's
# six frequencies fall in all three bands of the rule) and an explicit head_dim (4 heads of 12:
# q is 48 wide against a hidden size of 32). A program that dropped either would rotate or
# project differently from wp-ref, which reads the same config.json.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/parity_lib.sh

model=$tmp/llama3-tiny/config.json
mkdir -p "$(dirname "$model")"
python3 - "$model" <<'PY'
import json, sys
c = json.load(open("tests/data/tiny8/config.json"))
c.update(head_dim=12, max_position_embeddings=48, rope_scaling={
    "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32})
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY

case_ weipipe-interleave topologies/cpu-2x2.json 4 1
case_ 1f1b "$(topo_for 2)" 2 2
case_ fsdp "$(topo_for 2)" 2 1
echo "models parity: $pass passed, $fail failed ($((SECONDS - t0)) s)"
[ "$fail" = 0 ]
