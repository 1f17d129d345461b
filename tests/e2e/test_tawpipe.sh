#!/usr/bin/env bash
# TawPipe end to end (tests/e2e/test_parity.sh's structure and tolerances): emitted tawpipe plans
# on the CPU test clusters (2x2, 4x2, the uneven 2+1+3), with one and several micro-batches, in
# one round or several, other chunk counts, the other groupings the solver can be told to take
# (WPGEN_TAWPIPE_GROUPING), and data-parallel replicas, train under mpirun and match the single-process reference trainer on
# the same global batch: the loss of every step to a relative 1e-5 and every weight tensor after
# the steps to a relative 1e-4.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
steps=3
# 8 layers, so that 8 pipeline stages fit; 4 layers in 3 chunks below are uneven
model=tests/data/tiny8/config.json
common=(--synthetic --steps "$steps" --seed 5 --lr 2e-3 --warmup 1)

# 1-node clusters of n CPU devices, for the rank counts the shipped topologies do not have
topo_for() {
    local n=$1 f="$tmp/c$1.json"
    [ -f "$f" ] || printf '{"version":1,"name":"cpu-1x%d","device_types":{"cpu":{"peak_tflops_fp32":0.05,"mem_gb":4,"hbm_GBps":10}},"nodes":[{"name":"n0","devices":%d,"type":"cpu","intra":{"type":"SHM","bw_GBps":5,"lat_us":1}}]}\n' "$n" "$n" >"$f"
    echo "$f"
}

ref_for() {   # M -> checkpoint of the reference trainer over M micro-batches
    local M=$1 d="$tmp/ref-$1"
    if [ ! -f "$d/model.safetensors" ]; then
        mkdir -p "$d"
        "$build/wp-ref" -m "$model" --micro-batch-size 2 --micro-batches "$M" "${common[@]}" --save "$d/model.safetensors" --log "$d/log" >"$d/out" 2>&1 ||
            { echo "wp-ref failed:"; cat "$d/out"; return 1; }
    fi
    echo "$d"
}

losses() { grep -o '"loss": *[-0-9.eE+naif]*' "$1" | sed 's/.*: *//'; }

pass=0; fail=0; t0=$SECONDS
case_() {   # strategy topology ranks micro-batches [extra wpgen flags...]
    local s=$1 topo=$2 n=$3 mb=$4; shift 4
    local label="$s on $(basename "$topo" .json), $mb mb/rank $* ${LABEL:-}"
    local d="$tmp/run" M=$((n * mb)) ref
    ref=$(ref_for "$M") || { fail=$((fail + 1)); return; }
    rm -rf "$d"
    if ! "$build/wpgen" emit -t "$topo" -m "$model" --micro-batch-size 2 -s "$s" --micro-batches "$mb" "$@" -o "$d" >"$tmp/emit.out" 2>&1; then
        echo "FAIL $label: emit: $(cat "$tmp/emit.out")"; fail=$((fail + 1)); return
    fi
    if ! make -s -j2 -C "$d" >"$tmp/make.out" 2>&1; then
        echo "FAIL $label: make:"; tail -20 "$tmp/make.out"; fail=$((fail + 1)); return
    fi
    if ! timeout 300 "${mpirun[@]}" -np "$n" "$d/train" "${common[@]}" --save "$d/model.safetensors" --log "$d/log" >"$tmp/run.out" 2>&1; then
        echo "FAIL $label: train:"; tail -20 "$tmp/run.out"; fail=$((fail + 1)); return
    fi
    # losses of every step, relative 1e-5
    if ! paste <(losses "$ref/log") <(losses "$d/log") | awk -v n="$steps" '
        { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
          if (NF != 2 || d > 1e-5 * a) { print "step " NR ": loss " $1 " vs " $2; bad = 1 } }
        END { if (NR != n) { print NR " steps logged, expected " n; bad = 1 } exit bad }' >"$tmp/loss.out"; then
        echo "FAIL $label: losses differ: $(cat "$tmp/loss.out")"; fail=$((fail + 1)); return
    fi
    if ! "$build/tools/ckpt_compare" "$d/model.safetensors" "$ref/model.safetensors" 1e-4 >"$tmp/cmp.out" 2>&1; then
        echo "FAIL $label: weights differ:"; cat "$tmp/cmp.out"; fail=$((fail + 1)); return
    fi
    pass=$((pass + 1))
    echo "ok   $label: $(tail -n 1 "$tmp/cmp.out" | sed 's/ckpt-compare: //')"
}

s=tawpipe
case_ "$s" topologies/cpu-2x2.json 4 1
case_ "$s" topologies/cpu-2x2.json 4 3
# the micro-batches in rounds (one forward and one backward sweep each): one per round, uneven
LABEL="(3 rounds)" WPGEN_TAWPIPE_ROUNDS=3 case_ "$s" topologies/cpu-2x2.json 4 3
LABEL="(2 rounds)" WPGEN_TAWPIPE_ROUNDS=2 case_ "$s" topologies/cpu-uneven.json 6 3 --chunks 5
case_ "$s" topologies/cpu-4x2.json 8 2
case_ "$s" topologies/cpu-uneven.json 6 1
case_ "$s" topologies/cpu-uneven.json 6 2 --chunks 4
case_ "$s" topologies/cpu-2x2.json 4 2 --replicas 2
case_ "$s" topologies/cpu-uneven.json 6 1 --replicas 2   # replicas of different shapes: 2+1 and 3
case_ "$s" "$(topo_for 3)" 3 2 --chunks 3
# the groupings the solver can be told to take: the published layout; PCIe islands as groups
# (one node of 4 processes in 2 islands)
LABEL="(published layout)" WPGEN_TAWPIPE_GROUPING=published case_ "$s" topologies/cpu-uneven.json 6 2
isl="$tmp/islands.json"
printf '{"version":1,"name":"cpu-1x4-2islands","device_types":{"cpu":{"peak_tflops_fp32":0.05,"mem_gb":4,"hbm_GBps":10}},"nodes":[{"name":"n0","devices":4,"islands":2,"type":"cpu","intra":{"type":"PCI","bw_GBps":5,"lat_us":1}}]}\n' >"$isl"
LABEL="(grouped by island)" WPGEN_TAWPIPE_GROUPING=island case_ "$s" "$isl" 4 2
echo "tawpipe parity: $pass passed, $fail failed in $((SECONDS - t0)) s"
[ "$fail" -eq 0 ]
