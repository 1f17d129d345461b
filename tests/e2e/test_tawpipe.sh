#!/usr/bin/env bash
# TawPipe end to end (tests/e2e/test_parity.sh's structure and tolerances): emitted tawpipe plans
# on the CPU test clusters (2x2, 4x2, the uneven 2+1+3), with one and several micro-batches, in
# one round or several, other chunk counts, the other groupings the solver can be told to take
# (--grouping), and data-parallel replicas, train under mpirun and match the single-process reference trainer on
# the same global batch: the loss of every step to a relative 1e-5 and every weight tensor after
# the steps to a relative 1e-4.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/parity_lib.sh

s=tawpipe
case_ "$s" topologies/cpu-2x2.json 4 1
case_ "$s" topologies/cpu-2x2.json 4 3
# the micro-batches in rounds (one forward and one backward sweep each): one per round, uneven
case_ "$s" topologies/cpu-2x2.json 4 3 --rounds 3
case_ "$s" topologies/cpu-uneven.json 6 3 --chunks 5 --rounds 2
case_ "$s" topologies/cpu-4x2.json 8 2
case_ "$s" topologies/cpu-uneven.json 6 1
case_ "$s" topologies/cpu-uneven.json 6 2 --chunks 4
case_ "$s" topologies/cpu-2x2.json 4 2 --replicas 2
case_ "$s" topologies/cpu-uneven.json 6 1 --replicas 2   # replicas of different shapes: 2+1 and 3
case_ "$s" "$(topo_for 3)" 3 2 --chunks 3
# the groupings the solver can be told to take: the published layout; PCIe islands as groups
# (one node of 4 processes in 2 islands)
case_ "$s" topologies/cpu-uneven.json 6 2 --grouping published
isl="$tmp/islands.json"
printf '{"version":1,"name":"cpu-1x4-2islands","device_types":{"cpu":{"peak_tflops_fp32":0.05,"mem_gb":4,"hbm_GBps":10}},"nodes":[{"name":"n0","devices":4,"islands":2,"type":"cpu","intra":{"type":"PCI","bw_GBps":5,"lat_us":1}}]}\n' >"$isl"
case_ "$s" "$isl" 4 2 --grouping island
echo "tawpipe parity: $pass passed, $fail failed in $((SECONDS - t0)) s"
[ "$fail" -eq 0 ]
