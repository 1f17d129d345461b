#!/usr/bin/env bash
# fsdp --fsdp-overlap off (schedules/fsdp.lua): every gather and reduce-scatter in a turn of its
# own, so that in the simulated trace no collective of a rank runs while that rank computes (with
# overlap on, some do: the check can fail); every chunk gathered again for its backward (gathers
# and reduce-scatters per block 3C against overlap's 3C-2, 5C turns a block); the step no
# shorter; a bad value refused; compare names it; an emitted program trains to the same losses,
# and calibrate finds its plan again from its trace.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

# no collective beside its rank's compute (serial), or some (overlapped); args: trace, expect
overlaps() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t['traceEvents'] if isinstance(t, dict) else t
spans = {}
for e in ev:
    if e.get('ph') == 'X' and e.get('cat') in ('comm', 'compute') and e['dur'] > 0:
        spans.setdefault((e['pid'], e['cat']), []).append((e['ts'], e['ts'] + e['dur'], e['name']))
both = 0
for (pid, cat), comms in spans.items():
    if cat != 'comm': continue
    for a0, a1, an in comms:
        for b0, b1, bn in spans.get((pid, 'compute'), []):
            # a microsecond of slack: the trace's times are rounded
            if min(a1, b1) - max(a0, b0) > 1e-3 * max(1.0, a1 - a0): both += 1
want = sys.argv[2]
assert (both == 0) if want == 'none' else (both > 0), (want, both)
EOF
}

for args in "-t topologies/cpu-2x2.json -m tiny --micro-batches 1" "-t topologies/cpu-2x2.json -m tiny --micro-batches 3" \
            "-t topologies/cpu-4x2.json -m tiny --micro-batches 2 --recompute --chunks 2 --replicas 2" \
            "-t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h1024 --seq 4096 --micro-batches 2"; do
    n=$(echo "$args" | sed 's/.*--micro-batches \([0-9]*\).*/\1/')
    for v in gather-once full-shard; do
        "$wpgen" sim $args -s fsdp --fsdp-variant $v --json --trace "$tmp/on.json" >"$tmp/on" 2>"$tmp/e" && ok || bad "$v $args: $(head -2 "$tmp/e")"
        "$wpgen" sim $args -s fsdp --fsdp-variant $v --fsdp-overlap off --json --trace "$tmp/off.json" >"$tmp/off" 2>"$tmp/e" &&
            ok || bad "$v off $args: $(head -2 "$tmp/e")"
        overlaps "$tmp/off.json" none && ok || bad "$v off $args: a collective beside its rank's compute"
        python3 - "$tmp/on" "$tmp/off" "$n" "$v" "$tmp/on.json" "$tmp/off.json" <<'EOF' && ok || bad "$v off against on ($args)"
import json, sys
a, b, n, v = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
C, blocks = b['chunks'], n if v == 'full-shard' else 1
assert b['step_time_s'] >= a['step_time_s'], (a['step_time_s'], b['step_time_s'])
# 5C turns a block (gather, compute twice per chunk, and a reduce-scatter), one more for
# replicas' all-reduce of the last shard
assert b['turns'] - blocks * 5 * C in (0, 1), (b['turns'], blocks, C)
# per block, overlap gathers C + (C - 2) chunks (the last two kept), serial 2C; both
# reduce-scatter C (rank 0's trace); more bytes
def count(f, what):
    t = json.load(open(f))
    ev = t['traceEvents'] if isinstance(t, dict) else t
    return sum(1 for e in ev if e.get('pid') == 0 and e.get('name', '').startswith(what))
on, off = sys.argv[5], sys.argv[6]
assert count(off, 'ALLGATHER') == blocks * 2 * C, (count(off, 'ALLGATHER'), blocks, C)
assert count(on, 'ALLGATHER') == blocks * (C + max(C - 2, 0)), (count(on, 'ALLGATHER'), blocks, C)
assert count(off, 'REDUCE_SCATTER') == count(on, 'REDUCE_SCATTER') == blocks * C, (count(off, 'REDUCE_SCATTER'), blocks, C)
if C >= 2: assert b['bytes_intra_node'] + b['bytes_inter_node'] > a['bytes_intra_node'] + a['bytes_inter_node']
EOF
    done
done
# on a GPU cluster whose network is slow, overlap on puts gathers beside compute (the check bites)
"$wpgen" sim -t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h1024 --seq 4096 --micro-batches 2 -s fsdp \
    --trace "$tmp/on.json" >/dev/null 2>"$tmp/e" && overlaps "$tmp/on.json" some && ok || bad "overlap on: no collective beside compute"

"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s fsdp --fsdp-overlap maybe >/dev/null 2>"$tmp/e"; [ $? = 2 ] &&
    grep -q -- '--fsdp-overlap: expected on or off, got "maybe"' "$tmp/e" && ok || bad "a bad --fsdp-overlap: $(head -2 "$tmp/e")"
"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s fsdp --fsdp-overlap off >"$tmp/o" 2>"$tmp/e" &&
    grep -q -- "--fsdp-overlap off: each gather" "$tmp/o" && ok || bad "plan's note: $(head -2 "$tmp/e")"

# compare names it, in text and JSON
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --strategies fsdp,1f1b --fsdp-overlap off >"$tmp/c" 2>&1 &&
    grep -q "^fsdp/gather-once/no-overlap" "$tmp/c" && ok || bad "compare: $(cat "$tmp/c")"
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --strategies fsdp --fsdp-overlap off --json >"$tmp/c" 2>&1 &&
    python3 -c "import json; a=json.load(open('$tmp/c')); assert a[0]['fsdp_overlap'] is False" && ok || bad "compare --json: $(head -3 "$tmp/c")"

# an emitted serial program trains to the same losses as the overlapped one
if command -v mpirun >/dev/null; then
    mpirun=(mpirun --oversubscribe); [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
    for o in on off; do
        "$wpgen" emit -t topologies/cpu-2x2.json -m tiny -s fsdp --fsdp-variant full-shard --fsdp-overlap $o --micro-batches 2 \
            -o "$tmp/run-$o" >/dev/null 2>"$tmp/e" && bash tests/make_emitted.sh "$tmp/run-$o" >/dev/null 2>&1 &&
            (cd "$tmp/run-$o" && OMP_NUM_THREADS=1 timeout 300 "${mpirun[@]}" -np 4 ./train --synthetic --steps 3 --trace trace.json >out 2>&1) &&
            ok || bad "run overlap $o: $(tail -3 "$tmp/run-$o/out" 2>/dev/null; head -3 "$tmp/e")"
    done
    python3 - "$tmp/run-on/out" "$tmp/run-off/out" <<'EOF' && ok || bad "--fsdp-overlap off's losses differ"
import re, sys
l = [[float(m) for m in re.findall(r'^step .*?\| loss ([0-9.]+)', open(f).read(), re.M)] for f in sys.argv[1:3]]
assert len(l[0]) == 3 and len(l[1]) == 3, l
assert all(a == b for a, b in zip(*l)), l
EOF
    # calibrate plans a run's trace again from its plan.json: the serial plan, from its note
    "$wpgen" calibrate -t topologies/cpu-2x2.json --trace "$tmp/run-off/trace.json" -o "$tmp/cal.json" >"$tmp/c" 2>&1 &&
        ok || bad "calibrate on a --fsdp-overlap off run: $(tail -3 "$tmp/c")"
fi

echo "fsdp overlap: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
