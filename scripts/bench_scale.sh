#!/usr/bin/env bash
# make bench-scale: wpgen at cluster scale (issue 15). A 128-node x 8 H100 InfiniBand cluster (1,024
# GPUs, tests/data/scale/h100-128x8-ib400.json) and a 1,024-node one (8,192 GPUs,
# tests/data/scale/h100-1024x8-ib400.json), a 128-layer model (hidden 4096, GQA 32/8, FFN 14336,
# vocabulary 128256: tests/data/scale/config.json) at sequence 8192, 8 micro-batches per rank:
#   1,024 GPUs: `wpgen sim -s auto` and `wpgen compare` (each with the search's counts), the plain
#               commands (compare also with --search-seconds 8: the best found once 8 s have passed,
#               with how many candidates were not tried), and `wpgen emit` of the plan auto chose;
#   8,192 GPUs: `wpgen sim -s auto`.
# For each: wall-clock seconds, CPU seconds (user + system: on a machine others use too, the wall
# clock says as much about them), wpgen's peak memory (/usr/bin/time -v, maximum resident set) and
# what it answered (the plan, whether it fits). Targets (the issue's): under 10 s for the 1,024-GPU
# commands, under 60 s for 8,192. Each command is stopped after BENCH_TIMEOUT seconds (default
# 600). Prints figures; never fails the build on a target.
set -u
build=${1:-build}
limit=${BENCH_TIMEOUT:-600}
cd "$(dirname "$0")/.."
wpgen=$build/wpgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="-m tests/data/scale/config.json --seq 8192 --micro-batches 8"
t1k=tests/data/scale/h100-128x8-ib400.json
t8k=tests/data/scale/h100-1024x8-ib400.json

# measure LABEL OUT -- wpgen args...: runs it under /usr/bin/time -v with the time limit; sets
# wall (s), peak (MiB) and rc; stdout in OUT, stderr in OUT.err
measure() {
    local label=$1 out=$2; shift 3
    WPGEN_PROGRESS=0 /usr/bin/time -v -o "$tmp/time" timeout "$limit" "$wpgen" "$@" >"$out" 2>"$out.err"
    rc=$?
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$tmp/time")
    peak=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$tmp/time")
    cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.1f", u + s }' "$tmp/time")
    if [ "$rc" = 124 ]; then wall=">$limit"; fi
    printf '%-46s %8s s (cpu %6s s)  peak %6s MiB  ' "$label" "$wall" "$cpu" "$peak"
}

echo "bench-scale: $wpgen on $(nproc) cores ($(date -u +%Y-%m-%d)); model 128 layers, H 4096, GQA 32/8, seq 8192, 8 micro-batches per rank"

show_auto() {   # the plan sim -s auto --json chose, from its output file
    python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
a = d['auto']
print('%s, %d replicas%s%s: %.4g s/step, peak %.1f GiB, %s' % (d['strategy'], a['replicas'], ', twice the chunks' if a['chunks_option'] else '',
      ', recomputation' if d['recompute'] else '', d['step_time_s'], d['peak_mem_bytes'] / 2**30, 'fits' if d['fits'] else 'DOES NOT FIT'))
print('    why: ' + a['why'])
EOF
}

# the whole search (compare also within --search-seconds: what a user at a terminal asks for)
measure "1,024 GPUs: sim -s auto" "$tmp/auto" -- sim -t $t1k $model -s auto --json
if [ "$rc" = 0 ]; then show_auto "$tmp/auto"; else echo "no answer (exit $rc)"; fi

for q in "" "--search-seconds 8"; do
    measure "1,024 GPUs: compare $q" "$tmp/cmp" -- compare -t $t1k $model $q
    if [ "$rc" -le 1 ]; then
        echo "$(grep -c 'OOM' "$tmp/cmp") OOM rows; fastest: $(grep -- '<- fastest' "$tmp/cmp" | awk '{print $1, $2 " s"}')"
        grep '^search:' "$tmp/cmp" | sed 's/^/    /'
    else echo "no answer (exit $rc)"; fi
done

chosen=""
for f in "$tmp/auto"; do
    [ -z "$chosen" ] && [ -s "$f" ] && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$f" 2>/dev/null && chosen=$f
done
if [ -n "$chosen" ]; then
    opts=$(python3 - "$chosen" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
a = d['auto']
o = '-s %s --replicas %d' % (d['strategy'], a['replicas'])
if a['chunks_option']: o += ' --chunks %d' % a['chunks_option']
if d['recompute']: o += ' --recompute'
print(o)
EOF
)
    measure "1,024 GPUs: emit $opts" "$tmp/emit" -- emit -t $t1k $model $opts -o "$tmp/out"
    if [ "$rc" = 0 ]; then echo "$(ls "$tmp/out"/rank_*.c | wc -l) rank sources, $(du -sh "$tmp/out" | cut -f1)"; else echo "failed (exit $rc): $(tail -1 "$tmp/emit.err")"; fi
    rm -rf "$tmp/out"
else echo "1,024 GPUs: emit: skipped, sim -s auto chose nothing"; fi

measure "8,192 GPUs: sim -s auto" "$tmp/auto8" -- sim -t $t8k $model -s auto --json
if [ "$rc" = 0 ]; then show_auto "$tmp/auto8"; else echo "no answer (exit $rc)"; fi
echo "targets: 1,024 GPUs: sim -s auto, compare and emit each under 10 s; 8,192 GPUs: sim -s auto under 60 s"
