#!/usr/bin/env bash
# fsdp's two variants (schedules/fsdp.lua, --fsdp-variant): full-shard, PyTorch FSDP FULL_SHARD
# under gradient accumulation, gathers every chunk for every micro-batch's forward and backward
# and reduce-scatters per micro-batch: exactly N times gather-once's bytes with one replica, and
# less memory (one micro-batch's activations at a time); it verifies in several shapes; compare
# and -s auto say which variant ran; an emitted full-shard program trains to gather-once's losses.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

for args in "-t topologies/cpu-2x2.json -m tiny --micro-batches 1" "-t topologies/cpu-2x2.json -m tiny --micro-batches 4" \
            "-t topologies/cpu-4x2.json -m tiny --micro-batches 3 --recompute --chunks 2" \
            "-t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h1024 --seq 4096 --micro-batches 2"; do
    n=$(echo "$args" | sed 's/.*--micro-batches \([0-9]*\).*/\1/')
    "$wpgen" sim $args -s fsdp --json >"$tmp/once" 2>"$tmp/e" && ok || bad "gather-once $args: $(head -2 "$tmp/e")"
    "$wpgen" sim $args -s fsdp --fsdp-variant full-shard --json >"$tmp/full" 2>"$tmp/e" && ok || bad "full-shard $args: $(head -2 "$tmp/e")"
    python3 - "$tmp/once" "$tmp/full" "$n" <<'EOF' && ok || bad "full-shard against gather-once ($args)"
import json, sys
a, b, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
for k in ('bytes_intra_node', 'bytes_inter_node'):
    assert abs(b[k] - n * a[k]) <= 1e-9 * b[k], (k, a[k], b[k], n)
assert b['peak_mem_bytes'] <= a['peak_mem_bytes'] and (n == 1 or b['peak_mem_bytes'] < a['peak_mem_bytes']), (a['peak_mem_bytes'], b['peak_mem_bytes'])
assert b['turns'] == n * (2 * b['chunks'] + 1) + 1 or n == 1, (b['turns'], n, b['chunks'])
EOF
done
"$wpgen" plan -t topologies/cpu-4x2.json -m tiny -s fsdp --fsdp-variant full-shard --replicas 2 >"$tmp/o" 2>"$tmp/e" &&
    grep -q "variant full-shard" "$tmp/o" && ok || bad "full-shard with replicas: $(head -2 "$tmp/e")"
"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s fsdp --fsdp-variant half >/dev/null 2>"$tmp/e"; [ $? = 2 ] &&
    grep -q -- '--fsdp-variant: expected gather-once or full-shard, got "half"' "$tmp/e" && ok || bad "a bad variant: $(head -2 "$tmp/e")"

# compare says which ran; -s auto tries both
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --strategies fsdp,1f1b >"$tmp/c" 2>&1 && grep -q "^fsdp/gather-once " "$tmp/c" && ok || bad "compare: $(cat "$tmp/c")"
"$wpgen" compare -t topologies/cpu-2x2.json -m tiny --strategies fsdp --fsdp-variant full-shard --json >"$tmp/c" 2>&1 &&
    python3 -c "import json; a=json.load(open('$tmp/c')); assert a[0]['fsdp_variant'] == 'full-shard'" && ok || bad "compare --json variant: $(head -3 "$tmp/c")"
"$wpgen" plan -t topologies/cpu-2x2.json -m tiny -s auto >/dev/null 2>"$tmp/e"; grep -q "auto picked" "$tmp/e" && ok || bad "auto: $(cat "$tmp/e")"

# an emitted full-shard program: the same losses as gather-once
if command -v mpirun >/dev/null; then
    mpirun=(mpirun --oversubscribe); [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
    for v in gather-once full-shard; do
        "$wpgen" emit -t topologies/cpu-2x2.json -m tiny -s fsdp --fsdp-variant $v --micro-batches 2 -o "$tmp/$v" >/dev/null 2>"$tmp/e" &&
            bash tests/make_emitted.sh "$tmp/$v" >/dev/null 2>&1 &&
            (cd "$tmp/$v" && OMP_NUM_THREADS=1 timeout 300 "${mpirun[@]}" -np 4 ./train --synthetic --steps 3 >out 2>&1) && ok || bad "run $v: $(tail -3 "$tmp/$v/out" 2>/dev/null)"
    done
    python3 - "$tmp/gather-once/out" "$tmp/full-shard/out" <<'EOF' && ok || bad "full-shard's losses differ from gather-once's"
import re, sys
l = [[float(m) for m in re.findall(r'^step .*?\| loss ([0-9.]+)', open(f).read(), re.M)] for f in sys.argv[1:3]]
assert len(l[0]) == 3 and len(l[1]) == 3, l
assert all(abs(a - b) <= 1e-5 * abs(a) for a, b in zip(*l)), l
EOF
fi

echo "fsdp variants: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
