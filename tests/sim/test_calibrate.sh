#!/usr/bin/env bash
# wpgen calibrate: on synthetic traces of emitted plans whose every span takes what known rates
# say (computed here, independently of the C cost model; a span during which its rank received
# also the bytes the simulator says came then, at a known receiving rate), the fit recovers those
# rates; the
# link fit recovers a known latency and bandwidth; fitted and held-out runs are reported apart (a
# replicated-ends run, --replicate-ends, among them);
# an existing output is not overwritten without --force; bad traces, plans and link files are
# refused with one line naming the file (exit 2). The link benchmark builds and runs on 2 ranks.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

# the rates to recover (R below), the receiving rate and the links of the link benchmark's points
# (below), as a calibration file: the simulator says with it which spans received what (sim.json)
cat >"$tmp/known.json" <<'EOF'
{ "version": 1, "device_types": { "cpu": { "precision": "fp32", "matmul_tflops": 0.04, "matmul_knee_mnk": 2e5,
  "attn_fwd_tflops": 0.012, "attn_bwd_tflops": 0.007, "mem_GBps": 4, "op_overhead_us": 30, "recv_GBps": 1.5 } },
  "links": { "intra": { "bw_GBps": 2, "lat_us": 5 }, "network": { "bw_GBps": 0.5, "lat_us": 40 } } }
EOF
# four runs of different shapes (the features must vary for the rates to be told apart)
emit() {   # NAME TOPO STRATEGY ARGS...
    local n=$1 t=$2 s=$3; shift 3
    "$wpgen" emit -t "topologies/$t.json" -m tiny -s "$s" "$@" -o "$tmp/$n" >/dev/null 2>"$tmp/e" && ok || bad "emit $n: $(head -2 "$tmp/e")"
    "$wpgen" sim -t "topologies/$t.json" -m tiny -s "$s" "$@" --calibration "$tmp/known.json" --trace "$tmp/$n/sim.json" >/dev/null 2>"$tmp/e" ||
        bad "sim $n: $(head -2 "$tmp/e")"
}
emit a cpu-1x4 weipipe-interleave --seq 64 --micro-batches 2
emit b cpu-2x2 1f1b --seq 256 --micro-batch-size 1 --micro-batches 2
emit c cpu-1x4 weipipe-naive --seq 32 --micro-batch-size 8 --recompute
emit d cpu-2x2 fsdp --seq 128 --micro-batch-size 2 --micro-batches 1
# the embedding and head replicated, 3 ring chunks: calibrate plans it again from plan.json's notes
emit ends cpu-2x2 weipipe-interleave --seq 64 --micro-batches 2 --replicate-ends --chunks 3

python3 - "$tmp" <<'EOF' || bad "synthetic traces"
import json, os, sys
tmp = sys.argv[1]
# the rates to recover (known.json's)
R = dict(mm=0.04e12, knee=2e5, af=0.012e12, ab=0.007e12, mem=4e9, ovh=30e-6, recv=1.5e9)
def features(m, chunk, nchunks, layers, kind, rec):
    H, F, V, T, S = m['hidden_size'], m['intermediate_size'], m['vocab_size'], m['seq_len'] * m['micro_batch_size'], m['seq_len']
    nh, nkv = m['num_attention_heads'], m['num_key_value_heads']
    hd = H // nh; q = nh * hd; kv = nkv * hd
    first, last = chunk == 0, chunk == nchunks - 1
    mm = layers * 2 * (T * q * H + 2 * T * kv * H + T * H * q + 3 * T * F * H) + (2 * T * H * V if last else 0)
    calls = 7 * layers + (1 if last else 0)
    attn = layers * m['micro_batch_size'] * nh * S * (S + 1) / 2 * 4 * hd
    by = 4 * T * (layers * (10 * H + 4 * q + 4 * kv + 3 * F) + (H if first else 0) + (2 * H + 3 * V if last else 0))
    if kind == 'F': return mm, calls, attn, 0, by
    f = 1 if rec else 0
    # the last chunk's backward computes the head's logits again (costs.c)
    head, hc = (2 * T * H * V, 1) if last else (0, 0)
    return (2 + f) * mm + head, (2 + f) * calls + hc, f * attn, 2 * attn, (2 + f) * by
def seconds(x):
    mm, calls, af, ab, by = x
    return mm / R['mm'] + calls * 2 * R['knee'] / R['mm'] + af / R['af'] + ab / R['ab'] + by / R['mem'] + R['ovh']
for run in ('a', 'b', 'c', 'd', 'ends'):
    p = json.load(open(os.path.join(tmp, run, 'plan.json')))
    m, chunks = p['model'], p['chunks']
    # what arrived during each compute span, by the simulator at the known rates
    got = {(e['pid'], e['name']): e['args'].get('received_bytes', 0)
           for e in json.load(open(os.path.join(tmp, run, 'sim.json')))['traceEvents'] if e.get('cat') == 'compute'}
    ev = []
    for r in p['ranks']:
        t = 0.0
        opt = 7 * sum(b['bytes'] for b in r['buffers'] if b['master']) / R['mem']
        for step in range(4):
            for turn in sorted(r['turns'], key=int):
                for op in r['turns'][turn]:
                    w = op.split()
                    if w[0] not in ('FWD', 'BWD'): continue
                    c, mb = int(w[2]), int(w[4])
                    name = '%s%d mb%d' % (w[0][0], c, mb)
                    d = seconds(features(m, c, len(chunks), chunks[c]['layers'], w[0][0], p['recompute'])) + got[(r['rank'], name)] / R['recv']
                    ev.append(dict(name=name, cat='forward' if w[0] == 'FWD' else 'backward', ph='X',
                                   pid=r['rank'], tid=0, ts=t * 1e6, dur=d * 1e6, args=dict(turn=int(turn))))
                    t += d + 1e-4
            ev.append(dict(name='AdamW', cat='optimizer', ph='X', pid=r['rank'], tid=0, ts=t * 1e6, dur=opt * 1e6, args=dict(turn=0)))
            t += opt + 1e-3
    json.dump(dict(displayTimeUnit='ms', traceEvents=ev), open(os.path.join(tmp, run, 'trace.json'), 'w'))
# a link benchmark's points: 5 us and 2 GB/s inside a node, 40 us and 0.5 GB/s between hosts
pts = [dict(a=0, b=1, same_host=True, bytes=b, seconds=5e-6 + b / 2e9) for b in (1024, 65536, 4 << 20)]
pts += [dict(a=0, b=2, same_host=False, bytes=b, seconds=40e-6 + b / 0.5e9) for b in (1024, 65536, 4 << 20)]
json.dump({"version": 1, "kind": "wpgen-linkbench", "ranks": 3, "hosts": ["x", "x", "y"], "p2p": pts, "collectives": []},
          open(os.path.join(tmp, 'links.json'), 'w'))
EOF

cal=(calibrate -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json" --held-out "$tmp/c/trace.json"
     -t topologies/cpu-2x2.json --trace "$tmp/b/trace.json" --trace "$tmp/d/trace.json" --links "$tmp/links.json")
"$wpgen" "${cal[@]}" -o "$tmp/cal.json" >"$tmp/out" 2>"$tmp/e" && ok || bad "calibrate: $(head -3 "$tmp/e")"
python3 - "$tmp/cal.json" <<'EOF' && ok || bad "calibrate does not recover the rates: $(cat "$tmp/cal.json")"
import json, sys
c = json.load(open(sys.argv[1]))
t = c['device_types']['cpu']
want = dict(matmul_tflops=0.04, matmul_knee_mnk=2e5, attn_fwd_tflops=0.012, attn_bwd_tflops=0.007, mem_GBps=4, op_overhead_us=30, recv_GBps=1.5)
for k, v in want.items():
    assert abs(t[k] / v - 1) < 0.01, (k, t[k], v)
l = c['links']
assert abs(l['intra']['bw_GBps'] / 2 - 1) < 1e-6 and abs(l['intra']['lat_us'] / 5 - 1) < 1e-6, l
assert abs(l['network']['bw_GBps'] / 0.5 - 1) < 1e-6 and abs(l['network']['lat_us'] / 40 - 1) < 1e-6, l
assert [r['role'] for r in c['fit']['runs']] == ['fitted'] * 3 + ['held-out'], c['fit']
EOF
grep -q "^fitted " "$tmp/out" && grep -q "^held out " "$tmp/out" && grep -q "held-out runs: 1" "$tmp/out" && grep -q "fitted runs: 3" "$tmp/out" &&
    ok || bad "calibrate does not report fitted and held-out runs apart: $(cat "$tmp/out")"
# a replicated-ends run held out too: planned again (the same hash) from its notes
"$wpgen" "${cal[@]}" -t topologies/cpu-2x2.json --held-out "$tmp/ends/trace.json" -o "$tmp/cal-ends.json" >"$tmp/out" 2>"$tmp/e" &&
    grep -q "held-out runs: 2" "$tmp/out" && ok || bad "calibrate with a replicated-ends run: $(head -3 "$tmp/e") $(tail -3 "$tmp/out")"
# a plan run twice (the second run 1.5x slower in every span): one row, measured over both runs'
# steps pooled (3 + 3 steps: the median is halfway, 1.25x the first run's), each run's median shown
python3 - "$tmp/c/trace.json" "$tmp/c/trace-slow.json" <<'EOF' || bad "the slower copy of a trace"
import json, sys
t = json.load(open(sys.argv[1]))
for e in t['traceEvents']:
    e['ts'] *= 1.5; e['dur'] *= 1.5
json.dump(t, open(sys.argv[2], 'w'))
EOF
"$wpgen" "${cal[@]}" -o "$tmp/cal-one.json" >"$tmp/out1" 2>"$tmp/e" &&
"$wpgen" "${cal[@]}" -t topologies/cpu-1x4.json --held-out "$tmp/c/trace-slow.json" -o "$tmp/cal-rep.json" >"$tmp/out" 2>"$tmp/e" &&
python3 - "$tmp/cal-one.json" "$tmp/cal-rep.json" <<'EOF' && grep -q "held-out runs: 1," "$tmp/out" && grep -q " 2 (-20.0% to +20.0%)" "$tmp/out" &&
import json, sys
one, rep = (json.load(open(p))['fit']['runs'] for p in sys.argv[1:3])
h1, h2 = ([r for r in x if r['role'] == 'held-out'] for x in (one, rep))
assert len(h1) == 1 and len(h2) == 1, (h1, h2)
assert len(h2[0]['traces']) == 2 and h2[0]['traces'][1].endswith('trace-slow.json'), h2
assert abs(h2[0]['measured_s'] / h1[0]['measured_s'] - 1.25) < 1e-6, (h1, h2)
assert abs(h2[0]['predicted_s'] / h1[0]['predicted_s'] - 1) < 1e-9, (h1, h2)
EOF
    ok || bad "two runs of one plan are not one row over their pooled steps: $(head -2 "$tmp/e") $(grep -A3 '^held out' "$tmp/out")"
# the calibration it wrote is one sim takes
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny --calibration "$tmp/cal.json" >/dev/null 2>"$tmp/e" && ok || bad "sim --calibration of calibrate's file: $(head -2 "$tmp/e")"
# not overwritten without --force; replaced with it
cp "$tmp/cal.json" "$tmp/keep.json"
"$wpgen" "${cal[@]}" -o "$tmp/keep.json" >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q "refusing to overwrite" "$tmp/e" &&
    cmp -s "$tmp/keep.json" "$tmp/cal.json" && ok || bad "calibrate overwrote a file without --force: $(head -2 "$tmp/e")"
echo '{}' >"$tmp/keep.json"
"$wpgen" "${cal[@]}" -o "$tmp/keep.json" --force >/dev/null 2>"$tmp/e" && python3 -c "import json; json.load(open('$tmp/keep.json'))['device_types']['cpu']" &&
    ok || bad "calibrate --force: $(head -2 "$tmp/e")"

# bad input: one line naming the file, exit 2
expect_bad() {   # WHAT PATTERN ARGS...
    local what=$1 pat=$2; shift 2
    "$wpgen" calibrate "$@" >/dev/null 2>"$tmp/e"; local rc=$?
    [ $rc = 2 ] && grep -q -- "$pat" "$tmp/e" && [ "$(wc -l <"$tmp/e")" -le 1 ] && ok || bad "$what: exit $rc, $(head -3 "$tmp/e")"
}
mkdir -p "$tmp/x"; cp "$tmp/a/plan.json" "$tmp/x/"
echo 'not json' >"$tmp/x/trace.json"
expect_bad "a trace that is not JSON" "x/trace.json: line 1: not a JSON trace" -t topologies/cpu-1x4.json --trace "$tmp/x/trace.json" -o "$tmp/o.json"
expect_bad "a trace that cannot be opened" "x/none.json: cannot open: No such file or directory" -t topologies/cpu-1x4.json --trace "$tmp/x/none.json" -o "$tmp/o.json"
grep -q "line -1" "$tmp/e" && bad "a trace that cannot be opened given a line: $(cat "$tmp/e")"
echo '{"traceEvents": [{"name": "F0 mb0", "cat": "forward", "ph": "X", "pid": 0, "ts": "x", "dur": 1}]}' >"$tmp/x/trace.json"
expect_bad "a span without a time" "traceEvents\[0\].ts: expected a number" -t topologies/cpu-1x4.json --trace "$tmp/x/trace.json" -o "$tmp/o.json"
echo '{"traceEvents": [{"name": "AdamW", "cat": "optimizer", "ph": "X", "pid": 0, "ts": 1, "dur": 1}]}' >"$tmp/x/trace.json"
expect_bad "a trace of one step" "at least 2 steps" -t topologies/cpu-1x4.json --trace "$tmp/x/trace.json" -o "$tmp/o.json"
# degenerate traces: no time at all, or times past any run's
python3 - "$tmp/a/trace.json" "$tmp/x/trace.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
for e in t['traceEvents']:
    if e.get('ph') == 'X' and e.get('cat') in ('forward', 'backward'): e['dur'] = 0.0
json.dump(t, open(sys.argv[2], 'w'))
EOF
expect_bad "a trace whose spans last 0 s" "every forward and backward span lasts 0 s" -t topologies/cpu-1x4.json --trace "$tmp/x/trace.json" -o "$tmp/o.json"
sed -i 's/"dur": 0.0/"dur": 1e300/g' "$tmp/x/trace.json"
expect_bad "a trace with spans of 1e300 us" "dur: expected a number of microseconds in \\[0, 1e12\\]" -t topologies/cpu-1x4.json --trace "$tmp/x/trace.json" -o "$tmp/o.json"
# -o naming an input, a trace given twice
expect_bad "-o naming the topology" "-o topologies/cpu-1x4.json is -t" -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json" -o topologies/cpu-1x4.json --force
expect_bad "-o naming the trace" "is --trace" -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json" -o "$tmp/a/trace.json" --force
expect_bad "a trace fitted and held out" "is the trace also given as --trace" -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json" --held-out "$tmp/a/../a/trace.json" -o "$tmp/o.json"
cp "$tmp/b/trace.json" "$tmp/x/trace.json"
expect_bad "a trace of another plan" "x/trace.json: rank 0 runs F0 mb2, which its plan .*x/plan.json does not" -t topologies/cpu-1x4.json --trace "$tmp/x/trace.json" -o "$tmp/o.json"
expect_bad "no plan.json" "nowhere/plan.json" -t topologies/cpu-1x4.json --plan "$tmp/nowhere/plan.json" --trace "$tmp/a/trace.json" -o "$tmp/o.json"
expect_bad "no -t" "give -t TOPO.json before it" --trace "$tmp/a/trace.json" -o "$tmp/o.json"
expect_bad "no -o" "-o CALIB.json is required" -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json"
expect_bad "only held-out runs" "--trace RUN/trace.json is required" -t topologies/cpu-1x4.json --held-out "$tmp/a/trace.json" -o "$tmp/o.json"
echo '{"version": 1, "kind": "wpgen-linkbench", "p2p": [{"same_host": true, "bytes": -1, "seconds": 1}]}' >"$tmp/l.json"
expect_bad "a bad link benchmark" "l.json: p2p\[0\].bytes: expected a positive number" -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json" --links "$tmp/l.json" -o "$tmp/o.json"
[ ! -e "$tmp/o.json" ] && ok || bad "a failed calibrate wrote its output"

# a zero-bubble plan's trace, whose split backward's halves are "Bb<chunk> mb<m>" and "Bw<chunk> mb<m>"
# (runtime/train/step_ops.c), is read as a held-out run; a half the plan does not have is named
emit zb cpu-2x2 zb1 --seq 64
mkdir -p "$tmp/y"
python3 - "$tmp" <<'EOF' || bad "synthetic zero-bubble trace"
import json, os, sys
tmp = sys.argv[1]
p = json.load(open(os.path.join(tmp, 'zb', 'plan.json')))
names = {'FWD': ('F', 'forward'), 'BWD_B': ('Bb', 'backward'), 'BWD_W': ('Bw', 'backward')}
ev = []
for r in p['ranks']:
    t = 0.0
    for step in range(3):
        for turn in sorted(r['turns'], key=int):
            for op in r['turns'][turn]:
                w = op.split()
                if w[0] not in names: continue
                n, cat = names[w[0]]
                ev.append(dict(name='%s%s mb%s' % (n, w[2], w[4]), cat=cat, ph='X', pid=r['rank'], tid=0, ts=t * 1e6, dur=1e3))
                t += 2e-3
        ev.append(dict(name='AdamW', cat='optimizer', ph='X', pid=r['rank'], tid=0, ts=t * 1e6, dur=1e3))
        t += 2e-3
json.dump(dict(traceEvents=ev), open(os.path.join(tmp, 'zb', 'trace.json'), 'w'))
ev[0]['name'] = 'Bb1 mb0'   # rank 0's first span: a B pass of chunk 1, which is rank 1's
json.dump(dict(traceEvents=ev), open(os.path.join(tmp, 'y', 'trace.json'), 'w'))
EOF
cp "$tmp/zb/plan.json" "$tmp/y/"
"$wpgen" calibrate -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json" -t topologies/cpu-2x2.json --held-out "$tmp/zb/trace.json" \
    -o "$tmp/zbcal.json" >"$tmp/out" 2>"$tmp/e" && grep -q "zb/trace.json  *zb1 " "$tmp/out" &&
    ok || bad "calibrate of a zero-bubble trace: $(head -2 "$tmp/e") $(grep zb1 "$tmp/out")"
expect_bad "a zero-bubble trace of another plan" "y/trace.json: rank 0 runs Bb1 mb0, which its plan" \
    -t topologies/cpu-2x2.json --trace "$tmp/y/trace.json" -o "$tmp/o.json"

# -o into something that is not a file (/dev/null; a FIFO here, safe if it fails) is written
# into, without --force, and stays what it was
rm -f "$tmp/fifo" && mkfifo "$tmp/fifo" && { timeout 20 cat "$tmp/fifo" >"$tmp/fifo.out" & }
"$wpgen" calibrate -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json" -o "$tmp/fifo" >/dev/null 2>"$tmp/e"; rc=$?
wait
[ $rc = 0 ] && [ -p "$tmp/fifo" ] && grep -q '"device_types"' "$tmp/fifo.out" && ok || bad "calibrate -o a FIFO: rc $rc, $(head -2 "$tmp/e")"

# the link benchmark: builds, runs on 2 ranks, and calibrate reads what it writes
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    BUILD=$build OMP_NUM_THREADS=1 scripts/linkbench.sh "$tmp/lb.json" -np 2 --max 65536 --repeats 3 >/dev/null 2>"$tmp/e" && ok || bad "linkbench: $(tail -3 "$tmp/e")"
    python3 - "$tmp/lb.json" <<'EOF' && ok || bad "linkbench output"
import json, sys
d = json.load(open(sys.argv[1]))
assert d['kind'] == 'wpgen-linkbench' and d['ranks'] == 2 and len(d['hosts']) == 2
assert len(d['p2p']) == 4 and all(p['same_host'] and p['seconds'] > 0 for p in d['p2p'])
assert {c['op'] for c in d['collectives']} == {'allreduce', 'bcast', 'allgather'}
EOF
    "$wpgen" calibrate -t topologies/cpu-1x4.json --trace "$tmp/a/trace.json" --links "$tmp/lb.json" -o "$tmp/lbcal.json" >"$tmp/out" 2>"$tmp/e" &&
        grep -q "links inside a node" "$tmp/out" && ok || bad "calibrate --links of linkbench's output: $(head -2 "$tmp/e")"
fi

echo "calibrate: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
