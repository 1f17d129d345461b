#!/usr/bin/env bash
# make bench-gen: how long wpgen takes for a 32-rank plan (4 x 8, 32 layers, 64 micro-batches per
# rank) and a 1,024-rank plan (32 replicas of a 32-rank weipipe-interleave ring), with the emitted
# size per rank. For each: `wpgen plan` (strategy + verifier), `wpgen sim` less `wpgen plan` (the
# simulator, which `wpgen emit` also runs: its prediction goes into the summary), and `wpgen emit`,
# which is plan + verify + sim + emit in one command: the figure the targets are about. Wall-clock
# seconds, best of BENCH_RUNS runs (default 1), and the CPU seconds of the emit command (user + system:
# on a machine others use too, the wall clock says as much about them). Prints figures; never fails
# the build on a target.
set -u
build=${1:-build}
runs=${BENCH_RUNS:-1}
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

secs() {   # "wall cpu": the best wall-clock seconds of $runs runs of wpgen "$@" and that run's CPU seconds
    local best="" cpu="" t rc
    for _ in $(seq "$runs"); do
        rm -rf "$tmp/out"
        TIMEFORMAT="%R %U %S"
        { time "$wpgen" "$@" >/dev/null 2>"$tmp/err"; rc=$?; } 2>"$tmp/time"
        # exit 1 (planned, but it does not fit the devices) is fine here
        [ $rc -le 1 ] || { echo "failed"; return; }
        t=$(tail -1 "$tmp/time")
        if [ -z "$best" ] || awk -v a="${t%% *}" -v b="$best" 'BEGIN{exit !(a < b)}'; then
            best=${t%% *}
            cpu=$(echo "$t" | awk '{print $2 + $3}')
        fi
    done
    echo "$best $cpu"
}

run() {   # label, args...
    local label=$1; shift
    local plan sim emit ranks lines
    plan=$(secs plan "$@")
    sim=$(secs sim "$@")
    emit=$(secs emit "$@" -o "$tmp/out")
    if [ "$emit" = failed ] || [ ! -d "$tmp/out" ]; then echo "$label: emit failed: $(head -1 "$tmp/err")"; return; fi
    ranks=$(ls "$tmp/out"/rank_*.c | wc -l)
    lines=$(cat "$tmp/out"/rank_*.c | wc -l)
    printf '%-44s plan+verify %5.2f s  sim %5.2f s  emit (plan+verify+sim+emit) %6.2f s, cpu %6.2f s  %5d ranks, %6d lines/rank, %s\n' \
        "$label" "${plan%% *}" "$(awk "BEGIN{d = ${sim%% *} - ${plan%% *}; print (d > 0 ? d : 0)}")" "${emit%% *}" "${emit##* }" \
        "$ranks" "$((lines / ranks))" "$(du -sh "$tmp/out" | cut -f1)"
    rm -rf "$tmp/out"
}

echo "bench-gen: $wpgen on $(nproc) cores ($(date -u +%Y-%m-%d)), best of $runs"
for s in weipipe-interleave weipipe-naive 1f1b fsdp; do
    run "$s 4x8, 32 layers, seq 1024, 64 mb/rank" -t topologies/weipipe-4x8-a800-pcie-10gbe.json -m llama-h1024 --seq 1024 -s $s --micro-batches 64
done
run "weipipe-interleave 1024 = 32 x 32-rank rings" -t "$tmp/h100-128x8.json" -m llama-h1024 -s weipipe-interleave --replicas 32 --micro-batches 4
echo "targets: wpgen emit under 2 s for weipipe-interleave on 32 ranks, under 10 s for 1,024 ranks"
