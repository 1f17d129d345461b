#!/usr/bin/env bash
# `make bench-sim`: the simulator's prediction against a measured run, side by side. The CPU
# runtime runs each plan under mpirun with WP_EMULATE=1, which delays every send by the plan's
# link (latency + bytes / bandwidth); the cluster has a deliberately slow emulated network
# between its nodes. The simulator is calibrated only by this machine's compute speed: one rank
# runs the same model alone, and the device's FLOP/s in the topology is set so that the
# simulator predicts that run; nothing else is fitted. Prints predicted and measured step times
# (medians of the measured steps after the first) and their ratio, and both rankings.
# Never fails the build.
# usage: scripts/bench_sim.sh BUILD_DIR   (env: MODEL, SEQ, MBS, NB=micro-batches per rank,
#        NET_GBPS (default 0.05), NET_US (default 200), STEPS (default 5), STRATEGIES)
# Measured on this 2-core machine (loaded: load average 7.4), zero-bubble regime, median ms per
# step: 1f1b 801.8, zb1 729.9, weipipe-interleave 787.7, weipipe-zb1 649.4, weipipe-zb2 644.4.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
wpgen=$build/wpgen
model=${MODEL:-small}; seq=${SEQ:-256}; mbs=${MBS:-1}; nb=${NB:-2}; steps=${STEPS:-5}
net_gbps=${NET_GBPS:-0.05}; net_us=${NET_US:-200}
strategies=${STRATEGIES:-"weipipe-naive weipipe-interleave 1f1b"}
ncpu=$(nproc)
export OMP_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
command -v mpirun >/dev/null || { echo "bench-sim: mpirun missing; skipped"; exit 0; }
[ -x "$wpgen" ] || { echo "bench-sim: $wpgen missing (make all); skipped"; exit 0; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

topo() {   # FILE NODES PER PEAK_TFLOPS EFFICIENCY
    python3 - "$@" "$net_gbps" "$net_us" <<'EOF'
import json, sys
path, nodes, per, peak, eff, bw, lat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
t = {"version": 1, "name": "bench-%dx%d" % (nodes, per),
     "device_types": {"cpu": {"peak_tflops_fp32": peak, "mem_gb": 8, "hbm_GBps": 10, "efficiency": eff}},
     "nodes": [{"name": "n%d" % i, "devices": per, "type": "cpu", "intra": {"type": "SHM", "bw_GBps": 10, "lat_us": 1}} for i in range(nodes)]}
if nodes > 1: t["network"] = {"type": "NET", "bw_GBps": bw, "lat_us": lat, "nics_per_node": 1}
json.dump(t, open(path, "w"), indent=1)
EOF
}

# measure DIR NP -> median step ms (steps after the first) on stdout
measure() {
    local d=$1 np=$2
    (cd "$d" && make -s -j"$ncpu" >/dev/null 2>"$tmp/make.err") || { echo "bench-sim: build of $d failed: $(head -3 "$tmp/make.err")" >&2; return 1; }
    WP_EMULATE=1 timeout 600 "${mpirun[@]}" -np "$np" "$d/train" --synthetic --steps "$steps" >"$tmp/run.out" 2>&1 || { echo "bench-sim: run failed: $(tail -3 "$tmp/run.out")" >&2; return 1; }
    grep '^step ' "$tmp/run.out" | tail -n +2 | sed 's/.*| *\([0-9.]*\) ms |.*/\1/' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'
}

echo "bench-sim: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $ncpu CPUs, 1 OpenMP thread per rank"
echo "bench-sim: load average before starting: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews the measured side)"

# calibrate: sets $peak (TFLOP/s per rank) from a one-rank run of the whole model ($tmp/one),
# right before each measured run, so that the machine's load (it may be shared with other work)
# is about the same for both. mpirun binds each rank of a run to its own core; the ranks of the
# measured runs are as many as this machine's CPUs or fewer, so one rank alone is the speed each
# of them gets. (Two separate mpirun jobs at once would both bind to core 0.)
calibrate() {
    [ -x "$tmp/one/train" ] || (cd "$tmp/one" && make -s -j"$ncpu" >/dev/null 2>"$tmp/make.err") || { echo "bench-sim: build failed: $(head -3 "$tmp/make.err")"; return 1; }
    (cd "$tmp" && timeout 600 "${mpirun[@]}" -np 1 "$tmp/one/train" --synthetic --steps "$steps" >"$tmp/cal1.out" 2>&1)
    m1=$(grep '^step ' "$tmp/cal1.out" | tail -n +2 | sed 's/.*| *\([0-9.]*\) ms |.*/\1/' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}')
    [ -n "$m1" ] || { echo "bench-sim: calibration run failed: $(tail -3 "$tmp/cal1.out")"; return 1; }
    # flops from the nominal prediction; the rest of the step is memory-bound work at 10 GB/s
    peak=$(python3 -c "c, s, m = $c_nom, $s_nom, $m1 / 1e3; print('%.6g' % (c * 0.05e12 * 0.5 / max(m - (s - c), 1e-3 * m) / 1e12))")

}

run_config() {
    echo "bench-sim: model $model, seq $seq, $mbs sequence(s) per micro-batch, $nb micro-batches per rank; emulated network $net_gbps GB/s, $net_us us"

    # 1. calibration: one rank, the whole model, nominal device (50 GFLOP/s x 0.5)
    topo "$tmp/one.json" 1 1 0.05 0.5
    rm -rf "$tmp/one"
    "$wpgen" emit -t "$tmp/one.json" -m "$model" --seq "$seq" --micro-batch-size "$mbs" --micro-batches "$((nb * 2))" -s weipipe-naive -o "$tmp/one" >/dev/null || { echo "bench-sim: emit failed"; return; }
    nominal=$("$wpgen" sim -t "$tmp/one.json" -m "$model" --seq "$seq" --micro-batch-size "$mbs" --micro-batches "$((nb * 2))" -s weipipe-naive --json)
    c_nom=$(echo "$nominal" | json "['compute_s_per_rank']")
    s_nom=$(echo "$nominal" | json "['step_time_s']")
    # 2. two nodes of one rank each, slow network: predicted vs measured
    printf '%-22s %12s %12s %8s %14s\n' strategy "predicted ms" "measured ms" "ratio" "calib. GFLOP/s"
    rows=()
    for s in $strategies; do
        topo "$tmp/two.json" 2 1 0.05 1.0
        args=(-t "$tmp/two.json" -m "$model" --seq "$seq" --micro-batch-size "$mbs" --micro-batches "$nb" -s "$s")
        rm -rf "$tmp/p"
        "$wpgen" emit "${args[@]}" -o "$tmp/p" >/dev/null 2>&1 || { printf '%-22s %s\n' "$s" "does not plan here"; continue; }
        (cd "$tmp/p" && make -s -j"$ncpu" >/dev/null 2>"$tmp/make.err") || { printf '%-22s %s\n' "$s" "build failed"; continue; }
        calibrate || continue
        topo "$tmp/two.json" 2 1 "$peak" 1.0
        pred=$("$wpgen" sim "${args[@]}" --json 2>/dev/null | json "['step_time_s'] * 1e3") || { printf '%-22s %s\n' "$s" "sim failed"; continue; }
        meas=$(measure "$tmp/p" 2) || { printf '%-22s %s\n' "$s" "run failed"; continue; }
        printf '%-22s %12.1f %12.1f %8.2f %14.2f\n' "$s" "$pred" "$meas" "$(python3 -c "print($pred / $meas)")" "$(python3 -c "print($peak * 1e3)")"
        rows+=("$s $pred $meas")
    done
    within=$(printf '%s\n' "${rows[@]}" | awk '$3 > 0 && $2 / $3 >= 0.75 && $2 / $3 <= 1.25 {n++} END {print n + 0}')
    echo "bench-sim: ${within} of ${#rows[@]} predictions within +-25% of the measured step"
    if [ ${#rows[@]} -gt 1 ]; then
        pr=$(printf '%s\n' "${rows[@]}" | sort -k2 -g | awk '{printf "%s ", $1}')
        mr=$(printf '%s\n' "${rows[@]}" | sort -k3 -g | awk '{printf "%s ", $1}')
        echo "bench-sim: ranking predicted: $pr"
        echo "bench-sim: ranking measured:  $mr"
        [ "$pr" = "$mr" ] && echo "bench-sim: rankings agree" || echo "bench-sim: rankings DIFFER"
    fi
}

# Three regimes: a model whose activations are small next to its weights (activation passing
# should win), a small model on long sequences of large micro-batches over a slower network
# (weight passing should win), and zero bubble: one micro-batch per rank on a fast network, so
# that the pipeline's fill and drain are much of the step (the backward split into B and W
# should beat 1F1B and WeiPipe-Interleave). MODEL/SEQ/MBS/NET_GBPS/NET_US given: that one only.
if [ -n "${MODEL:-}" ]; then
    run_config
else
    for cfg in "small 256 1 0.05 200 2 -" "tiny 512 8 0.002 1000 2 -" \
               "small 256 1 1 50 1 1f1b,zb1,weipipe-interleave,weipipe-zb1,weipipe-zb2"; do
        read -r model seq mbs net_gbps net_us nb strats <<<"$cfg"
        [ "$strats" = - ] && strategies=${STRATEGIES:-"weipipe-naive weipipe-interleave 1f1b"} || strategies=${strats//,/ }
        echo
        run_config
    done
fi
exit 0
