#!/usr/bin/env bash
# The MPI layer's topology emulation (WP_EMULATE=1, runtime/train/train.c): the same numbers as
# without it, and a step that takes about as long as the simulator predicts for the slow
# emulated network (a loose bound here: the machine running the tests is shared; make
# bench-sim measures it properly).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
wpgen=$build/wpgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v mpirun >/dev/null || { echo "emulate: mpirun missing, skipped"; exit 0; }
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
export OMP_NUM_THREADS=1
cat >"$tmp/topo.json" <<'J'
{ "version": 1, "name": "emu-2x1",
  "device_types": { "cpu": { "peak_tflops_fp32": 0.05, "mem_gb": 4, "hbm_GBps": 10 } },
  "nodes": [ { "name": "n0", "devices": 1, "type": "cpu", "intra": { "type": "SHM", "bw_GBps": 10, "lat_us": 1 } },
             { "name": "n1", "devices": 1, "type": "cpu", "intra": { "type": "SHM", "bw_GBps": 10, "lat_us": 1 } } ],
  "network": { "type": "NET", "bw_GBps": 0.002, "lat_us": 1000, "nics_per_node": 1 } }
J
args=(-t "$tmp/topo.json" -m tiny -s weipipe-interleave --micro-batches 2)
"$wpgen" emit "${args[@]}" -o "$tmp/p" >/dev/null || { echo "FAIL: emit"; exit 1; }
(cd "$tmp/p" && make -s -j2 >/dev/null 2>"$tmp/make.err") || { echo "FAIL: build: $(head -3 "$tmp/make.err")"; exit 1; }
pred=$("$wpgen" sim "${args[@]}" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['step_time_s'] * 1e3)")
WP_EMULATE=0 timeout 300 "${mpirun[@]}" -np 2 "$tmp/p/train" --synthetic --steps 3 >"$tmp/plain" 2>&1 || { echo "FAIL: run: $(tail -3 "$tmp/plain")"; exit 1; }
WP_EMULATE=1 timeout 300 "${mpirun[@]}" -np 2 "$tmp/p/train" --synthetic --steps 3 >"$tmp/emu" 2>&1 || { echo "FAIL: emulated run: $(tail -3 "$tmp/emu")"; exit 1; }
loss() { grep '^step ' "$1" | sed 's/.*loss \([0-9.]*\).*/\1/'; }
[ "$(loss "$tmp/plain")" = "$(loss "$tmp/emu")" ] || { echo "FAIL: emulation changed the losses"; exit 1; }
meas=$(grep '^step ' "$tmp/emu" | tail -n 2 | sed 's/.*| *\([0-9.]*\) ms |.*/\1/' | sort -g | head -1)
plain=$(grep '^step ' "$tmp/plain" | tail -n 2 | sed 's/.*| *\([0-9.]*\) ms |.*/\1/' | sort -g | head -1)
python3 -c "import sys; p, m, q = $pred, $meas, $plain; sys.exit(0 if 0.6 * p <= m <= 3 * p + q and m > q else 1)" ||
    { echo "FAIL: emulated step $meas ms, predicted $pred ms, without emulation $plain ms"; exit 1; }
printf "emulate: same losses; emulated step %s ms, predicted %.1f ms (without emulation %s ms)\n" "$meas" "$pred" "$plain"
