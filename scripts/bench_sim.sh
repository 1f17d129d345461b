#!/usr/bin/env bash
# `make bench-sim`: the simulator's prediction against measured runs, side by side. The CPU
# runtime runs each plan under mpirun with WP_EMULATE=1, which delays every send by the plan's
# link (latency + bytes / bandwidth); the cluster has a deliberately slow emulated network
# between its nodes. The simulator is calibrated by `wpgen calibrate` on this machine: fitted to
# the traces of one rank running the whole model (in chunks of different sizes, with the
# backward split and whole), as many at once as the machine has cores, and of one node of 2
# ranks passing weights with a strategy not held out (the core's receiving rate), before each
# round of the others and after the last; every strategy's run is held out, on the 2
# emulated nodes and on one node of 2 ranks not emulated (MPI's shared memory as it is), each
# REPEAT times, the strategies in turn (a b c a b c ...: this VM's speed has drifted by up to
# 10-20% between minutes, and repeats taken at different minutes average it out; calibrate
# shows each repeat's median: most within 3% of the pooled one on a quiet day, some 7-12%);
# calibrate prints each plan's predicted and measured step (the median of its repeats' steps
# after the first, pooled; each repeat's own median beside it) and the fitted and held-out
# errors. Then both rankings.
# Never fails the build.
# usage: scripts/bench_sim.sh BUILD_DIR   (env: MODEL, SEQ, MBS, NB=micro-batches per rank,
#        NET_GBPS (default 0.05), NET_US (default 200), STEPS (default 5), STRATEGIES, SHARED=1,
#        REPEAT (default 3), KEEP=DIR: the emitted runs, their traces and the calibrations kept in DIR)
# Each run prints how many of the machine's cores other work kept busy meanwhile (/proc/stat's
# busy time less the run's own CPU time): the measured side is only as good as that is small.
# Measured on this 2-core machine (loaded: load average 7.4), zero-bubble regime, median ms per
# step: 1f1b 801.8, zb1 729.9, weipipe-interleave 787.7, weipipe-zb1 649.4, weipipe-zb2 644.4.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
wpgen=$build/wpgen
model=${MODEL:-small}; seq=${SEQ:-256}; mbs=${MBS:-1}; nb=${NB:-2}; steps=${STEPS:-5}; repeat=${REPEAT:-3}
net_gbps=${NET_GBPS:-0.05}; net_us=${NET_US:-200}
strategies=${STRATEGIES:-"weipipe-naive weipipe-interleave 1f1b"}
ncpu=$(nproc)
export OMP_NUM_THREADS=1
if [ -n "${KEEP:-}" ]; then tmp=$KEEP; mkdir -p "$tmp" || exit 0   # the runs, traces and calibrations kept there
else tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; fi
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
command -v mpirun >/dev/null || { echo "bench-sim: mpirun missing; skipped"; exit 0; }
[ -x "$wpgen" ] || { echo "bench-sim: $wpgen missing (make all); skipped"; exit 0; }
# the machine's busy CPU seconds since boot (all processes), from /proc/stat
busy_s() { awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { print ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

topo() {   # FILE NODES PER PEAK_TFLOPS EFFICIENCY [CORES]: CORES per node (the machine's split among the nodes)
    python3 - "$1" "$2" "$3" "$4" "$5" "$net_gbps" "$net_us" "${6:-$((ncpu / $2 > 0 ? ncpu / $2 : 1))}" <<'EOF'
import json, sys
path, nodes, per, peak, eff, bw, lat, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8])
t = {"version": 1, "name": "bench-%dx%d" % (nodes, per),
     "device_types": {"cpu": {"peak_tflops_fp32": peak, "mem_gb": 8, "hbm_GBps": 10, "efficiency": eff}},
     "nodes": [{"name": "n%d" % i, "devices": per, "type": "cpu", "cores": cores, "intra": {"type": "SHM", "bw_GBps": 10, "lat_us": 1}} for i in range(nodes)]}
if nodes > 1: t["network"] = {"type": "NET", "bw_GBps": bw, "lat_us": lat, "nics_per_node": 1}
json.dump(t, open(path, "w"), indent=1)
EOF
}

# emit_built DIR TOPO STRATEGY [EMIT ARGS...]: DIR emitted for the regime's shape and built; 0 or 1
emit_built() {
    local d=$1 t=$2 s=$3
    shift 3
    rm -rf "$d"
    "$wpgen" emit -t "$t" -m "$model" --seq "$seq" --micro-batch-size "$mbs" --micro-batches "$nb" -s "$s" "$@" -o "$d" >/dev/null 2>&1 || return 1
    (cd "$d" && make -s -j"$ncpu" >/dev/null 2>"$tmp/make.err") || { echo "bench-sim: build of $d failed: $(head -3 "$tmp/make.err")" >&2; return 1; }
}

# run DIR NP EMULATE TRACE [MPIRUN ARGS...]: trains STEPS steps with a trace (DIR/TRACE); 0 or 1
run() {
    local d=$1 np=$2 emu=$3 trace=$4
    shift 4
    local busy0; busy0=$(busy_s)
    (cd "$d" && WP_EMULATE=$emu timeout 600 /usr/bin/time -f "%e %U %S" -o "$tmp/time" "${mpirun[@]}" "$@" -np "$np" ./train --synthetic --steps "$steps" --trace "$trace" >"$tmp/run.out" 2>&1) ||
        { echo "bench-sim: run failed: $(tail -3 "$tmp/run.out")" >&2; return 1; }
    # what the rest of the machine took meanwhile: its busy CPU seconds less the run's own
    read -r wall usr sys <"$tmp/time"
    awk -v b0="$busy0" -v b1="$(busy_s)" -v w="$wall" -v u="$usr" -v s="$sys" -v d="${d##*/} ${trace%.json}" -v n="$ncpu" \
        'BEGIN { o = (b1 - b0 - u - s) / w; if (o < 0) o = 0; printf "bench-sim: %-32s %5.1f s, %.2f of %d cores busy with other work\n", d, w, o, n }' >&2
}

# run_loaded TAG DIR...: one-rank programs as many at once as the machine has cores (copy k runs
# the k-th DIR, round the list), each with its own trace (DIR/trace-TAG-K.json, added to fit):
# calibrate then fits the rate of a core while the others compute too, as they do in the held-out
# runs. On this VM ranks computing at once ran up to 23% slower each than one alone, in some
# minutes and not in others (calibrate's "spans" column), which a fit to a rank alone read as the
# model's error.
run_loaded() {
    local tag=$1 k pids=() dirs=() busy0 t0
    shift
    busy0=$(busy_s); t0=$(date +%s.%N)
    for ((k = 0; k < ncpu; k++)); do
        local d=${@:$((k % $# + 1)):1}
        dirs+=("$d")
        (cd "$d" && timeout 600 "${mpirun[@]}" --bind-to none -np 1 ./train --synthetic --steps "$steps" --trace "trace-$tag-$k.json" \
            >"$tmp/run-$k.out" 2>&1) &
        pids+=($!)
    done
    for k in "${!pids[@]}"; do
        if wait "${pids[$k]}"; then fit+=(--trace "${dirs[$k]}/trace-$tag-$k.json")
        else echo "bench-sim: a fitted run failed: $(tail -2 "$tmp/run-$k.out")" >&2; fi
    done
    local names=${*##*/}
    awk -v b0="$busy0" -v b1="$(busy_s)" -v t0="$t0" -v t1="$(date +%s.%N)" -v n="$ncpu" -v d="${names// /+} x$ncpu ($tag)" \
        'BEGIN { w = t1 - t0; printf "bench-sim: %-32s %5.1f s, %.2f of %d cores busy in all\n", d, w, (b1 - b0) / w, n }' >&2
}

echo "bench-sim: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $ncpu CPUs, 1 OpenMP thread per rank"
echo "bench-sim: load average before starting: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews the measured side)"

run_config() {
    echo "bench-sim: model $model, seq $seq, $mbs sequence(s) per micro-batch, $nb micro-batches per rank; emulated network $net_gbps GB/s, $net_us us"
    # 1. the runs calibrate fits to: one rank, the whole model (2 x NB micro-batches: the same
    #    global batch as the two-rank runs) in chunks of different sizes, which tell a span's
    #    fixed cost from its layers' (small's 6 layers in 4 chunks: 1, 2, 2, 1; tiny's 4 in 3:
    #    1, 2, 1), and in 2 (3 and 3; 2 and 2), run with its backward split in two (weipipe-zb1:
    #    the weight-gradient half is products alone, which tells the products' rate from
    #    attention's and memory's) and whole (weipipe-naive), one of each per core at once.
    #    Fitted to one whole-backward run in one chunk, this VM's products came out at 1.2
    #    TFLOP/s (ten times a core's) and attention at a tenth: right in sum, wrong in every
    #    split backward and every chunk of another size. Without the chunks of 3 layers, the
    #    held-out runs' (1f1b's, say) spans of 3 layers ran 4-7% slower than fitted.
    #    And 4. one node of 2 ranks passing weights, not emulated (weipipe-zb1, or weipipe-naive
    #    where zb1 is held out; in the held-out runs' chunks): the spans during which a rank
    #    received, and how much (the simulator says), give the core's receiving rate (MPI's
    #    copy and what it displaces), by default half the memory rate.
    topo "$tmp/one.json" 1 1 0.05 0.5
    local s fc="4 2" c
    [ "$model" = tiny ] && fc="3 2"
    for c in $fc; do
        for s in weipipe-zb1 weipipe-naive; do
            rm -rf "$tmp/one-$s-$c"
            "$wpgen" emit -t "$tmp/one.json" -m "$model" --seq "$seq" --micro-batch-size "$mbs" --micro-batches "$((nb * 2))" -s "$s" --chunks "$c" -o "$tmp/one-$s-$c" >/dev/null || { echo "bench-sim: emit failed"; return; }
            (cd "$tmp/one-$s-$c" && make -s -j"$ncpu" >/dev/null 2>&1) || { echo "bench-sim: build of $tmp/one-$s-$c failed"; return; }
        done
    done
    fit=() fit2=()
    # the held-out runs: 2. two nodes of one rank each, slow network (p-), and 3. one node of two
    # ranks, a core each, not emulated: what MPI's shared memory really does (n-); REPEAT times
    topo "$tmp/two.json" 2 1 0.05 0.5
    topo "$tmp/node.json" 1 2 0.05 0.5
    held=()
    local cases=() c k two=weipipe-zb1
    case " $strategies " in *" $two "*) two=weipipe-naive ;; esac
    emit_built "$tmp/fit2-$two" "$tmp/node.json" "$two" && two=fit2-$two || two=
    for s in $strategies; do
        if emit_built "$tmp/p-$s" "$tmp/two.json" "$s"; then cases+=("p-$s two 1"); else printf '%-22s %s\n' "$s" "does not plan here"; fi
        if emit_built "$tmp/n-$s" "$tmp/node.json" "$s"; then cases+=("n-$s node 0"); else printf '%-22s %s\n' "$s" "does not plan on one node"; fi
    done
    # the fitted runs before each round of held-out runs and after the last: fitted to all of
    # them (calibrate takes the median of the same spans), the rates are this machine's over the
    # whole measurement, not its speed of some minutes (this VM's fitted products rate moved
    # 0.15-0.20 TFLOP/s between quiet runs minutes apart; the same spans 4% between minutes)
    for ((k = 1; k <= repeat; k++)); do
        for c in $fc; do run_loaded "r$k-$c" "$tmp/one-weipipe-zb1-$c" "$tmp/one-weipipe-naive-$c"; done
        [ -n "$two" ] && run "$tmp/$two" 2 0 "trace-$k.json" && fit2+=(--trace "$tmp/$two/trace-$k.json")
        for c in "${cases[@]}"; do
            read -r d t emu <<<"$c"
            run "$tmp/$d" 2 "$emu" "trace-$k.json" && held+=(-t "$tmp/$t.json" --held-out "$tmp/$d/trace-$k.json")
        done
    done
    for c in $fc; do run_loaded "after-$c" "$tmp/one-weipipe-zb1-$c" "$tmp/one-weipipe-naive-$c"; done
    [ ${#fit[@]} -gt 0 ] || return
    rm -f "$tmp/cal.json"
    [ ${#fit2[@]} -gt 0 ] && fit+=(-t "$tmp/node.json" "${fit2[@]}")
    "$wpgen" calibrate -t "$tmp/one.json" "${fit[@]}" "${held[@]}" -o "$tmp/cal.json" | tee "$tmp/cal.out" ||
        { echo "bench-sim: calibrate failed"; return; }
    rows=$(awk 'NF >= 5 && $1 ~ /trace(-[0-9]+)?\.json$/ && $1 ~ /\/p-/ {print $2, $3, $4}' "$tmp/cal.out")
    if [ "$(echo "$rows" | grep -c .)" -gt 1 ]; then
        pr=$(echo "$rows" | sort -k2 -g | awk '{printf "%s ", $1}')
        mr=$(echo "$rows" | sort -k3 -g | awk '{printf "%s ", $1}')
        echo "bench-sim: ranking predicted: $pr"
        echo "bench-sim: ranking measured:  $mr"
        # where they differ, the pairs the prediction orders the other way and how far apart
        # their measured steps are (a pair within a few percent is a near tie)
        [ "$pr" = "$mr" ] && echo "bench-sim: rankings agree" || echo "$rows" | python3 -c '
import sys
r = [(l.split()[0], float(l.split()[1]), float(l.split()[2])) for l in sys.stdin if l.strip()]
pairs = ["%s and %s (measured %.1f%% apart)" % (a[0], b[0], 100 * (max(a[2], b[2]) / min(a[2], b[2]) - 1))
         for a in r for b in r if a[1] < b[1] and a[2] > b[2]]
print("bench-sim: rankings DIFFER in %d pair(s): %s" % (len(pairs), "; ".join(pairs)) if pairs else
      "bench-sim: rankings agree (plans the simulator times alike, ordered either way)")'
    fi
}

# Ranks sharing cores: twice as many ranks as the machine has cores. Fitted to runs of one rank
# (no sharing: clean spans; a copy per core at once, run_loaded) in as many chunks as the
# held-out runs have ranks (first, middle and last chunks: calls told from FLOPs), of two shapes
# (seq and seq*2: attention from products);
# held out: every strategy on 2 emulated nodes of 2 ranks, each node given half the
# machine's cores (its ranks bound to them by a rankfile), and on 1 node of 4 ranks sharing
# all the cores, not emulated. The topologies say the cores ("cores" of a node), so the
# simulator divides a node's cores among the ranks computing at once.
run_shared() {
    local np=$((2 * ncpu))
    echo "bench-sim: ranks sharing cores: model $model, seq $seq and $((seq * 2)), $mbs sequence(s) per micro-batch, $nb micro-batch(es) per rank, $np ranks on $ncpu cores; emulated network $net_gbps GB/s, $net_us us"
    local fit=() held=()
    topo "$tmp/s-one.json" 1 1 0.05 0.5 1
    for sq in "$seq" "$((seq * 2))"; do
        rm -rf "$tmp/s-one-$sq"
        "$wpgen" emit -t "$tmp/s-one.json" -m "$model" --seq "$sq" --micro-batch-size "$mbs" --micro-batches "$((nb * np))" --chunks "$np" -s weipipe-naive -o "$tmp/s-one-$sq" >/dev/null || { echo "bench-sim: emit failed"; return; }
        (cd "$tmp/s-one-$sq" && make -s -j"$ncpu" >/dev/null 2>&1) && run_loaded "s$sq" "$tmp/s-one-$sq"
    done
    [ ${#fit[@]} -gt 0 ] || return
    topo "$tmp/s-two.json" 2 "$((np / 2))" 0.05 0.5 "$((ncpu / 2 > 0 ? ncpu / 2 : 1))"
    topo "$tmp/s-node.json" 1 "$np" 0.05 0.5 "$ncpu"
    # a rankfile: node 0's ranks on the first half of the cores, node 1's on the second, in turn
    # (`--map-by ppr:2:core` put rank 0 alone on core 0 and ranks 1-3 on core 1)
    local half=$((ncpu / 2 > 0 ? ncpu / 2 : 1)) r
    for ((r = 0; r < np; r++)); do
        echo "rank $r=localhost slot=$(( (r < np / 2 ? 0 : ncpu - half) + r % half ))"
    done >"$tmp/ranks"
    local bind=(--rankfile "$tmp/ranks")
    local cases=() c k t
    for s in $strategies; do
        for t in two node; do
            if emit_built "$tmp/s-$t-$s" "$tmp/s-$t.json" "$s"; then cases+=("$t $s"); else printf '%-22s %s\n' "$s" "does not plan on $t"; fi
        done
    done
    for ((k = 1; k <= repeat; k++)); do
        for c in "${cases[@]}"; do
            read -r t s <<<"$c"
            if [ $t = two ]; then run "$tmp/s-$t-$s" "$np" 1 "trace-$k.json" "${bind[@]}" && held+=(-t "$tmp/s-two.json" --held-out "$tmp/s-$t-$s/trace-$k.json")
            else run "$tmp/s-$t-$s" "$np" 0 "trace-$k.json" && held+=(-t "$tmp/s-node.json" --held-out "$tmp/s-$t-$s/trace-$k.json"); fi
        done
    done
    echo "bench-sim: load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
    rm -f "$tmp/s-cal.json"
    "$wpgen" calibrate -t "$tmp/s-one.json" "${fit[@]}" "${held[@]}" -o "$tmp/s-cal.json" ||
        { echo "bench-sim: calibrate failed"; return; }
}

# Three regimes: a model whose activations are small next to its weights (activation passing
# should win; every strategy, fsdp and tawpipe too), a small model on long sequences of large
# micro-batches over a slower network (weight passing should win), and zero bubble: one
# micro-batch per rank on a fast network, so that the pipeline's fill and drain are much of the
# step (the backward split into B and W should beat 1F1B and WeiPipe-Interleave); then ranks
# sharing cores (run_shared). MODEL/SEQ/MBS/NET_GBPS/NET_US given: that one only; SHARED=1: the
# sharing regime only (MODEL... apply).
if [ -n "${SHARED:-}" ]; then
    model=${MODEL:-small}; strategies=${STRATEGIES:-"weipipe-naive weipipe-interleave 1f1b fsdp tawpipe"}; nb=${NB:-1}
    net_gbps=${NET_GBPS:-0.5}; net_us=${NET_US:-100}   # as in the full run below
    run_shared
elif [ -n "${MODEL:-}" ]; then
    run_config
else
    for cfg in "small 256 1 0.05 200 2 weipipe-naive,weipipe-interleave,1f1b,fsdp,tawpipe" "tiny 512 8 0.002 1000 2 -" \
               "small 256 1 1 50 1 1f1b,zb1,weipipe-interleave,weipipe-zb1,weipipe-zb2"; do
        read -r model seq mbs net_gbps net_us nb strats <<<"$cfg"
        [ "$strats" = - ] && strategies=${STRATEGIES:-"weipipe-naive weipipe-interleave 1f1b"} || strategies=${strats//,/ }
        echo
        run_config
    done
    # and ranks sharing cores (run_shared above)
    echo
    model=small; seq=256; mbs=1; nb=1; net_gbps=0.5; net_us=100
    strategies=${STRATEGIES:-"weipipe-naive weipipe-interleave 1f1b fsdp tawpipe"}
    run_shared
fi
exit 0
