#!/usr/bin/env bash
# wpgen sim and compare as a user meets them: text and --json fields, exit statuses, the trace
# and the SVG picture, -s auto, bf16 against fp32, and on the papers' clusters: twice the
# bandwidth of every link never makes a step slower.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

# sim, text: the plan's summary and the prediction
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny >"$tmp/out" 2>"$tmp/err" && ok || bad "sim cpu-2x2 tiny: $(head -2 "$tmp/err")"
for w in "strategy    weipipe-interleave" "step  " "tokens/s per device" "bubble" "links       SHM" "NET" "mem/rank"; do
    grep -qF -- "$w" "$tmp/out" && ok || bad "sim text lacks '$w'"
done

# sim --json: plan's fields plus the simulator's
for s in weipipe-naive weipipe-interleave 1f1b fsdp zb1 weipipe-zb1 weipipe-zb2; do
    "$wpgen" sim -t topologies/cpu-2x2.json -m tiny -s $s --micro-batches 2 --json >"$tmp/j" 2>"$tmp/e" || { bad "sim --json $s: $(head -2 "$tmp/e")"; continue; }
    python3 - "$tmp/j" <<'EOF' && ok || bad "sim --json $s fields"
import json, sys
d = json.load(open(sys.argv[1]))
need = ['strategy', 'ranks', 'nodes', 'replicas', 'chunks', 'micro_batches_per_rank', 'turns', 'bytes_intra_node',
        'bytes_inter_node', 'peak_mem_bytes', 'fits', 'step_time_s', 'tokens_per_s_per_device', 'bubble_ratio']
missing = [k for k in need if k not in d]
assert not missing, missing
assert d['step_time_s'] > 0 and 0 <= d['bubble_ratio'] < 1
assert abs(d['tokens_per_s_per_device'] - d['tokens_per_step'] / d['step_time_s'] / d['ranks']) < 1e-6 * d['tokens_per_s_per_device']
assert len(d['peak_mem_bytes_per_rank']) == d['ranks'] and max(d['peak_mem_bytes_per_rank']) == d['peak_mem_bytes']
assert abs(sum(d['bytes_by_link'].values()) - d['bytes_intra_node'] - d['bytes_inter_node']) <= 1 + 1e-9 * sum(d['bytes_by_link'].values())
EOF
done

# compare --json: one object per strategy, non-fitting included with fits: false; one fastest.
# In fp32, the replicas and recomputation fixed (compare searches them where they are not given,
# and finds a plan of each strategy that fits): the weight-passing rings do not fit.
oom="-t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h4096 --seq 8192 --precision fp32 --replicas 4 --recompute"
"$wpgen" compare $oom --json >"$tmp/c" 2>"$tmp/e" && ok || bad "compare --json: $(head -2 "$tmp/e")"
python3 - "$tmp/c" <<'EOF' && ok || bad "compare --json content"
import json, sys
a = json.load(open(sys.argv[1]))
names = [d['strategy'] for d in a]
for s in ['weipipe-naive', 'weipipe-interleave', '1f1b', 'fsdp', 'zb1', 'weipipe-zb1', 'weipipe-zb2']:
    assert s in names, (s, names)
assert any(not d['fits'] for d in a), 'expected a plan that does not fit'
fast = [d for d in a if d.get('fastest')]
assert len(fast) == 1 and fast[0]['fits']
assert all(fast[0]['step_time_s'] <= d['step_time_s'] for d in a if d['fits'] and 'step_time_s' in d)
EOF
# compare, text: the fastest marked, OOM marked (fp32, as above)
"$wpgen" compare $oom >"$tmp/ct" 2>&1 && ok || bad "compare text"
grep -q "<- fastest" "$tmp/ct" && ok || bad "compare marks no fastest: $(cat "$tmp/ct")"
grep -q "OOM" "$tmp/ct" && ok || bad "compare marks no OOM"
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --strategies 1f1b,weipipe-naive --json >"$tmp/c2" && ok || bad "compare --strategies"
python3 -c "import json; a=json.load(open('$tmp/c2')); assert [d['strategy'] for d in a]==['1f1b','weipipe-naive']" && ok || bad "compare --strategies order"
# nothing fits: exit 1
"$wpgen" compare -t topologies/cpu-1x4.json -m llama2-7b >"$tmp/o" 2>&1; [ $? = 1 ] && ok || bad "compare with nothing fitting should exit 1"
"$wpgen" sim -t topologies/cpu-1x4.json -m llama2-7b >"$tmp/o" 2>"$tmp/e"; [ $? = 1 ] && grep -q "does not fit" "$tmp/e" && ok || bad "sim of a plan that does not fit should exit 1"
# bad input
# --strategies: compare's, and -s auto's (the strategies it searches); refused for one strategy
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny --strategies a >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q -- "--strategies: for compare, or -s auto" "$tmp/e" && ok || bad "sim --strategies without -s auto should be refused"
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --svg x.svg >/dev/null 2>"$tmp/e"; [ $? = 2 ] && ok || bad "compare --svg should be an unknown flag"
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --strategies 1f1b,no-such >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q 'strategy "no-such": not one of 1f1b' "$tmp/e" && ok || bad "compare of an unknown strategy should exit 2"
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny --trace /no/such/dir/t.json >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q "cannot write" "$tmp/e" && ok || bad "unwritable trace"

# precision on the WeiPipe paper's cluster and shape (2x8 A800, H1024, 16 x 4k tokens per
# micro-batch, recomputation): with weights, activations and gradients in bf16 every strategy moves
# half the bytes between nodes of fp32 (+-1%) and needs less memory; with bf16 weights and
# activations but fp32 gradients the activation-passing 1F1B still halves, the others land between
# half and all of fp32; the default on this GPU cluster is bf16, gradients too.
# (--replicas 1 and --context-parallel 1 fixed: compare would otherwise pick each precision's own best)
shape="-t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h1024 --seq 4096 --micro-batch-size 16 --recompute --replicas 1 --context-parallel 1"
"$wpgen" compare $shape --precision fp32 --json >"$tmp/p32" 2>"$tmp/e" && ok || bad "compare --precision fp32: $(head -2 "$tmp/e")"
"$wpgen" compare $shape --precision bf16 --grad-precision bf16 --json >"$tmp/p16" 2>"$tmp/e" && ok || bad "compare bf16: $(head -2 "$tmp/e")"
"$wpgen" compare $shape --precision bf16 --grad-precision fp32 --json >"$tmp/p16g" 2>"$tmp/e" && ok || bad "compare bf16, fp32 gradients: $(head -2 "$tmp/e")"
"$wpgen" compare $shape --json >"$tmp/pdef" 2>"$tmp/e" && ok || bad "compare default precision: $(head -2 "$tmp/e")"
python3 - "$tmp/p32" "$tmp/p16" "$tmp/p16g" "$tmp/pdef" <<'EOF' && ok || bad "compare: bf16 against fp32"
import json, sys
a32, a16, a16g, adef = ([d for d in json.load(open(f)) if 'error' not in d] for f in sys.argv[1:5])
assert len(a32) == 8 and [d['strategy'] for d in a32] == [d['strategy'] for d in a16] == [d['strategy'] for d in a16g]
for f, g, h in zip(a32, a16, a16g):
    s = f['strategy']
    assert f['precision'] == 'fp32' and g['precision'] == 'bf16' and g['grad_precision'] == 'bf16' and h['grad_precision'] == 'fp32', s
    r = g['bytes_inter_node'] / f['bytes_inter_node']
    assert abs(r - 0.5) <= 0.005, (s, 'inter-node bytes', r)
    assert abs(g['bytes_intra_node'] / f['bytes_intra_node'] - 0.5) <= 0.005, (s, 'intra-node bytes')
    assert g['peak_mem_bytes'] < f['peak_mem_bytes'] and h['peak_mem_bytes'] < f['peak_mem_bytes'], (s, 'peak memory')
    rg = h['bytes_inter_node'] / f['bytes_inter_node']
    assert (abs(rg - 0.5) <= 0.005) if s in ('1f1b', 'zb1') else (0.5 < rg < 1), (s, 'fp32 gradients', rg)
    for d in (f, g, h):
        b = d['peak_mem_breakdown']
        assert sum(b[k] for k in ('working_weights', 'gradients', 'masters_optimizer', 'activations', 'workspace')) == d['peak_mem_bytes']
        assert d['peak_mem_bytes_per_rank'][b['rank']] == d['peak_mem_bytes'] == max(d['peak_mem_bytes_per_rank'])
for d, e in zip(adef, a16):
    assert d['precision'] == 'bf16' and d['grad_precision'] == 'bf16' and d['bytes_inter_node'] == e['bytes_inter_node'], d['strategy']
EOF
"$wpgen" compare $shape >"$tmp/pt" 2>&1 && ok || bad "compare text, default precision"
grep -q "precision bf16, gradients bf16" "$tmp/pt" && ok || bad "compare does not say its precision: $(head -1 "$tmp/pt")"

# an output that is one of the inputs (by another name too) or the other output: refused, input intact
cp topologies/cpu-2x2.json "$tmp/topo.json"; ln "$tmp/topo.json" "$tmp/same.json"
"$wpgen" sim -t "$tmp/topo.json" -m tiny --svg "$tmp/same.json" >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q "is the input of -t" "$tmp/e" &&
    cmp -s "$tmp/topo.json" topologies/cpu-2x2.json && ok || bad "--svg over the topology: $(head -2 "$tmp/e")"
"$wpgen" sim -t "$tmp/topo.json" -m tiny --trace "$tmp/topo.json" >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q "refusing to overwrite" "$tmp/e" &&
    cmp -s "$tmp/topo.json" topologies/cpu-2x2.json && ok || bad "--trace over the topology: $(head -2 "$tmp/e")"
cp tests/data/tiny8/config.json "$tmp/model.json"
"$wpgen" sim -t topologies/cpu-2x2.json -m "$tmp/model.json" --trace "$tmp/model.json" >/dev/null 2>"$tmp/e"; [ $? = 2 ] &&
    cmp -s "$tmp/model.json" tests/data/tiny8/config.json && ok || bad "--trace over the model: $(head -2 "$tmp/e")"
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny --trace "$tmp/o" --svg "$tmp/o" >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q "same file" "$tmp/e" &&
    ok || bad "--trace and --svg the same file: $(head -2 "$tmp/e")"
# trace and picture
"$wpgen" sim -t topologies/weipipe-4x8-a800-pcie-10gbe.json -m llama-h1024 -s weipipe-interleave --trace "$tmp/t.json" --svg "$tmp/t.svg" >/dev/null 2>"$tmp/e" && ok || bad "sim --trace --svg: $(head -2 "$tmp/e")"
python3 - "$tmp/t.json" "$tmp/t.svg" <<'EOF' && ok || bad "trace / svg content"
import json, sys, xml.etree.ElementTree as ET
t = json.load(open(sys.argv[1]))
ev = t['traceEvents']
pids = {e['pid'] for e in ev}
assert pids == set(range(32)), len(pids)
x = [e for e in ev if e['ph'] == 'X']
assert any(e['name'].startswith('F') for e in x) and any(e['cat'] == 'comm' for e in x)
assert all(e['dur'] >= 0 and e['ts'] >= 0 for e in x)
root = ET.parse(sys.argv[2]).getroot()
texts = [el.text or '' for el in root.iter('{http://www.w3.org/2000/svg}text')]
assert sum(1 for s in texts if s.startswith('rank ')) == 32, 'one row per rank'
assert len(list(root.iter('{http://www.w3.org/2000/svg}rect'))) > 1000
EOF

# -s auto: picks a plan that fits, says which and why
"$wpgen" sim -t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h2048 --seq 8192 -s auto >"$tmp/a" 2>"$tmp/e" && ok || bad "sim -s auto: $(head -2 "$tmp/e")"
grep -q "^auto        picked .*fastest of" "$tmp/a" && ok || bad "auto does not say what it picked: $(head -2 "$tmp/a")"
grep -q "memory .*: fits" "$tmp/a" && ok || bad "auto picked a plan that does not fit"
"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s auto --json >"$tmp/aj" 2>"$tmp/e" && ok || bad "plan -s auto"
grep -q "auto picked" "$tmp/e" && ok || bad "plan -s auto says nothing on stderr"

# --calibration: measured rates in place of the defaults. A calibration of the topology's type at
# twice the rates of another halves the compute of the prediction; bad files and files of other
# device types are refused (exit 2, the JSON path named).
cal() {   # FILE SCALE: the cpu type at SCALE x some rates, and a measured network
    python3 - "$1" "$2" <<'EOF2'
import json, sys
s = float(sys.argv[2])
json.dump({"version": 1, "device_types": {"cpu": {"precision": "fp32", "matmul_tflops": 0.02 * s, "matmul_knee_mnk": 1e4,
           "attn_fwd_tflops": 0.01 * s, "attn_bwd_tflops": 0.008 * s, "mem_GBps": 5 * s, "op_overhead_us": 10 / s}},
           "links": {"network": {"bw_GBps": 0.5, "lat_us": 50}}}, open(sys.argv[1], "w"))
EOF2
}
cal "$tmp/c1.json" 1; cal "$tmp/c2.json" 2
for f in c1 c2; do
    "$wpgen" sim -t topologies/cpu-2x2.json -m tiny --calibration "$tmp/$f.json" --json >"$tmp/$f.out" 2>"$tmp/e" && ok || bad "sim --calibration: $(head -2 "$tmp/e")"
done
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny --json >"$tmp/c0.out" 2>"$tmp/e" && ok || bad "sim without calibration"
python3 - "$tmp/c0.out" "$tmp/c1.out" "$tmp/c2.out" <<'EOF' && ok || bad "sim --calibration: compute scales with the rates"
import json, sys
d0, d1, d2 = (json.load(open(f)) for f in sys.argv[1:4])
assert abs(d2['compute_s_per_rank'] - d1['compute_s_per_rank'] / 2) <= 1e-9 * d1['compute_s_per_rank'], (d1['compute_s_per_rank'], d2['compute_s_per_rank'])
assert abs(d1['compute_s_per_rank'] - d0['compute_s_per_rank']) > 0.01 * d0['compute_s_per_rank']
EOF
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --calibration "$tmp/c2.json" --strategies 1f1b,fsdp >"$tmp/o" 2>"$tmp/e" && ok || bad "compare --calibration: $(head -2 "$tmp/e")"
"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s auto --calibration "$tmp/c2.json" >"$tmp/o" 2>"$tmp/e" && ok || bad "plan -s auto --calibration: $(head -2 "$tmp/e")"
echo '{"version": 1, "device_types": {"cpu": {"precision": "fp32", "matmul_tflops": "fast"}}}' >"$tmp/cb.json"
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny --calibration "$tmp/cb.json" >/dev/null 2>"$tmp/e"; [ $? = 2 ] &&
    grep -q "cb.json: device_types.cpu.matmul_tflops: expected a number" "$tmp/e" && ok || bad "bad calibration: $(head -2 "$tmp/e")"
sed 's/"cpu"/"gpu9"/' "$tmp/c1.json" >"$tmp/co.json"
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --calibration "$tmp/co.json" >/dev/null 2>"$tmp/e"; [ $? = 2 ] &&
    grep -q "names none of the topology's device types (cpu)" "$tmp/e" && ok || bad "calibration of other types: $(head -2 "$tmp/e")"
"$wpgen" sim -t topologies/cpu-2x2.json -m tiny --calibration "$tmp/none.json" >/dev/null 2>"$tmp/e"; [ $? = 2 ] &&
    grep -q "cannot open" "$tmp/e" && ok || bad "missing calibration: $(head -2 "$tmp/e")"

# twice the bandwidth of every link (and the network) never slows a step down
for topo in weipipe-2x8-a800-nvlink-10gbe weipipe-1x8-a800-nvlink weipipe-4x8-a800-pcie-10gbe tawpipe-3x8-a800-pcie-10gbe; do
    python3 - topologies/$topo.json "$tmp/fast.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
for n in t['nodes']: n['intra']['bw_GBps'] *= 2
if 'network' in t: t['network']['bw_GBps'] *= 2
json.dump(t, open(sys.argv[2], 'w'))
EOF
    for s in weipipe-naive weipipe-interleave 1f1b fsdp; do
        a=$("$wpgen" sim -t topologies/$topo.json -m llama-h1024 --seq 4096 -s $s --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['step_time_s'])")
        b=$("$wpgen" sim -t "$tmp/fast.json" -m llama-h1024 --seq 4096 -s $s --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['step_time_s'])")
        if [ -z "$a" ] || [ -z "$b" ]; then bad "$topo $s: no prediction"; continue; fi
        python3 -c "import sys; sys.exit(0 if $b <= $a * (1 + 1e-9) else 1)" && ok || bad "$topo $s: twice the bandwidth: $b s, was $a s"
    done
done

echo "sim cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
