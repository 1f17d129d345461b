#!/usr/bin/env bash
# make bench-gen: how long plan + verify + emit take for a 32-rank plan (4 x 8, 32 layers, 64
# micro-batches per rank) and a 1,024-rank plan (32 replicas of a 32-rank weipipe-interleave
# ring), with the emitted size per rank. Prints figures; never fails the build on a target.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
wpgen=$build/wpgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A 128-node x 8-GPU H100 cluster (1,024 devices), written here: too big to be worth shipping.
python3 - "$tmp/h100-128x8.json" <<'PY'
import json, sys
nodes = [{"name": "n%03d" % i, "devices": 8, "type": "H100",
          "intra": {"type": "NVL", "bw_GBps": 450, "lat_us": 3}} for i in range(128)]
json.dump({"version": 1, "name": "h100-128x8-ib400",
           "device_types": {"H100": {"peak_tflops_bf16": 989, "mem_gb": 80, "hbm_GBps": 3350}},
           "nodes": nodes, "network": {"type": "NET", "bw_GBps": 50, "lat_us": 5, "nics_per_node": 8}},
          open(sys.argv[1], "w"))
PY

run() {   # label, args...
    local label=$1; shift
    local t0 t1 t2
    t0=$(date +%s.%N)
    # exit 1 for a plan that verifies but does not fit the devices is fine here: it was planned
    "$wpgen" plan "$@" >/dev/null 2>&1
    [ $? -le 1 ] || { echo "$label: plan failed"; return; }
    t1=$(date +%s.%N)
    "$wpgen" emit "$@" -o "$tmp/out" >/dev/null || { echo "$label: emit failed"; return; }
    t2=$(date +%s.%N)
    local ranks lines
    ranks=$(ls "$tmp/out"/rank_*.c | wc -l)
    lines=$(cat "$tmp/out"/rank_*.c | wc -l)
    printf '%-44s plan+verify %6.2f s   plan+verify+emit %6.2f s   %5d ranks, %7d lines per rank, %s\n' \
        "$label" "$(awk "BEGIN{print $t1 - $t0}")" "$(awk "BEGIN{print $t2 - $t0}")" "$ranks" "$((lines / ranks))" "$(du -sh "$tmp/out" | cut -f1)"
    rm -rf "$tmp/out"
}

echo "bench-gen: wpgen on $(nproc) cores ($(date -u +%Y-%m-%d))"
for s in weipipe-interleave weipipe-naive 1f1b fsdp; do
    run "$s 4x8, 32 layers, seq 1024, 64 mb/rank" -t topologies/weipipe-4x8-a800-pcie-10gbe.json -m llama-h1024 --seq 1024 -s $s --micro-batches 64
done
run "weipipe-interleave 1024 = 32 x 32-rank rings" -t "$tmp/h100-128x8.json" -m llama-h1024 -s weipipe-interleave --replicas 32 --micro-batches 4
echo "targets: 32 ranks under 2 s, 1,024 ranks under 20 s"
