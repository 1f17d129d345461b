#!/usr/bin/env bash
# Ranks that share cores: a node's "cores" in the topology. The simulator divides a node's cores
# among its ranks computing at once (sim.c): with a core per rank (or no "cores") nothing changes;
# with one core for four ranks a step without bubbles (fsdp) takes about four times as long and
# 1F1B, whose bubbles other ranks fill, less than that; calibrate, fitted to a run whose ranks
# share cores, counts each span at the share the simulator gives it and recovers the rates the
# run was made with. Bad "cores" is refused naming the JSON path (exit 2).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

# topologies: cpu-1x4 with "cores" of 4, 2, 1 and a bad one
python3 - "$tmp" <<'EOF' || bad "topologies"
import json, sys
tmp = sys.argv[1]
t = json.load(open('topologies/cpu-1x4.json'))
for c in (4, 2, 1, 0):
    t['nodes'][0]['cores'] = c
    json.dump(t, open('%s/c%d.json' % (tmp, c), 'w'))
EOF
step() {   # TOPO STRATEGY [ARGS]: the predicted step in seconds
    local t=$1 s=$2; shift 2
    "$wpgen" sim -t "$t" -m tiny -s "$s" "$@" 2>"$tmp/err" | awk '$1 == "step" { print $2 }'
}
for s in fsdp 1f1b weipipe-interleave; do
    base=$(step topologies/cpu-1x4.json "$s"); c4=$(step "$tmp/c4.json" "$s"); c2=$(step "$tmp/c2.json" "$s"); c1=$(step "$tmp/c1.json" "$s")
    [ -n "$base" ] && [ "$base" = "$c4" ] && ok || bad "$s: a core per rank changed the step ($base s, with cores 4: $c4 s)"
    python3 - "$s" "$base" "$c2" "$c1" <<'EOF' && ok || bad "$s: shared cores: $base s alone, $c2 s on 2 cores, $c1 s on 1"
import sys
s, base, c2, c1 = sys.argv[1], *map(float, sys.argv[2:])
assert base < c2 < c1, "sharing must slow the step, more with fewer cores"
if s == 'fsdp':     # no bubbles: every rank computes at once
    assert 1.8 * base < c2 <= 2.05 * base and 3.6 * base < c1 <= 4.1 * base, (c2 / base, c1 / base)
else:               # bubbles: other ranks' work fills them, so less than the ranks' count
    assert c2 < 2 * base and c1 < 4 * base, (c2 / base, c1 / base)
EOF
done

# the bad value, named by its JSON path
"$wpgen" sim -t "$tmp/c0.json" -m tiny -s fsdp >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q 'nodes\[0\].cores' "$tmp/err" && ok || bad "cores 0: exit $rc, $(cat "$tmp/err")"

# calibrate on a run sharing one core among 4 ranks: its trace is the simulator's own (the
# defaults table's rates on cpu-1x4, receiving free: the simulator's spans do not hold the copies
# the runtime makes inside them, test_calibrate.sh fits those), written as the runtime writes
# traces (3 steps); the fit must give back those rates and predict the run it was fitted to,
# which a fit ignoring the sharing cannot
cat >"$tmp/gen.json" <<'EOF'
{ "version": 1, "device_types": { "cpu": { "precision": "fp32", "matmul_tflops": 0.025, "matmul_knee_mnk": 1e4,
  "attn_fwd_tflops": 0.0125, "attn_bwd_tflops": 0.0125, "mem_GBps": 10, "op_overhead_us": 0, "recv_GBps": 1e6 } } }
EOF
for sq in 64 128; do
    "$wpgen" emit -t "$tmp/c1.json" -m tiny --seq "$sq" -s 1f1b -o "$tmp/r$sq" >/dev/null 2>"$tmp/err" || bad "emit: $(head -2 "$tmp/err")"
    "$wpgen" sim -t "$tmp/c1.json" -m tiny --seq "$sq" -s 1f1b --calibration "$tmp/gen.json" --trace "$tmp/sim$sq.json" >"$tmp/sim$sq.out" 2>"$tmp/err" ||
        bad "sim: $(head -2 "$tmp/err")"
    python3 - "$tmp/sim$sq.json" "$tmp/r$sq/trace.json" "$(awk '$1 == "step" { print $2 }' "$tmp/sim$sq.out")" <<'EOF' || bad "trace conversion"
import json, sys
src, dst, step = sys.argv[1], sys.argv[2], float(sys.argv[3]) * 1e6
d = json.load(open(src))
ev = d['traceEvents'] if isinstance(d, dict) else d
out = []
for k in range(3):
    opt = {}
    for e in ev:
        if e.get('ph') != 'X': continue
        if e['cat'] == 'compute':
            out.append(dict(e, cat='forward' if e['name'][0] == 'F' else 'backward', ts=e['ts'] + k * step))
        elif e['cat'] == 'local' and e['name'].startswith('OPT'):
            a = opt.setdefault(e['pid'], [e['ts'], 0.0])
            a[1] += e['dur']
    for r, (t, dur) in opt.items():
        out.append(dict(ph='X', name='AdamW', cat='optimizer', pid=r, tid=0, ts=t + k * step, dur=dur))
json.dump(dict(displayTimeUnit='ms', traceEvents=out), open(dst, 'w'))
EOF
done
"$wpgen" calibrate -t "$tmp/c1.json" --trace "$tmp/r64/trace.json" --trace "$tmp/r128/trace.json" -o "$tmp/cal.json" >"$tmp/cal.out" 2>"$tmp/err" ||
    bad "calibrate: $(head -3 "$tmp/err")"
grep -q 'ranks share cores' "$tmp/cal.out" && ok || bad "calibrate does not say the ranks share cores: $(cat "$tmp/cal.out")"
python3 - "$tmp/cal.json" "$tmp/cal.out" <<'EOF' && ok || bad "calibrate with shared cores: $(cat "$tmp/cal.out")"
import json, sys
c = json.load(open(sys.argv[1]))['device_types']['cpu']
# the defaults table's CPU row on cpu-1x4 (50 GFLOP/s): products 0.5, attention 0.25 of peak, 10 GB/s
assert abs(c['matmul_tflops'] / 0.025 - 1) < 0.02, c
assert abs(c['attn_fwd_tflops'] / 0.0125 - 1) < 0.05 and abs(c['attn_bwd_tflops'] / 0.0125 - 1) < 0.05, c
worst = max(abs(float([w for w in l.split() if w.endswith('%')][0].rstrip('%'))) for l in open(sys.argv[2]) if 'trace.json' in l)
assert worst < 2, worst
EOF
# the same traces fitted as if every rank had its own core: the rates come out well under (products
# 1.3 times too slow, attention 8, memory 3.6, with the four ranks' updates sharing the core at the
# step's end; products 1.8 times when the updates ran in their turns)
"$wpgen" calibrate -t topologies/cpu-1x4.json --trace "$tmp/r64/trace.json" --trace "$tmp/r128/trace.json" -o "$tmp/cal0.json" >"$tmp/cal0.out" 2>"$tmp/err" ||
    bad "calibrate: $(head -3 "$tmp/err")"
python3 - "$tmp/cal0.json" <<'EOF' && ok || bad "a fit ignoring the sharing should find slower rates: $(cat "$tmp/cal0.out")"
import json, sys
c = json.load(open(sys.argv[1]))['device_types']['cpu']
assert c['matmul_tflops'] < 0.025 / 1.25 and c['attn_fwd_tflops'] < 0.0125 / 1.25 and c['mem_GBps'] < 10 / 1.25, c
EOF

echo "shared cores: $pass passed, $fail failed"
[ "$fail" = 0 ]
