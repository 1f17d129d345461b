#!/usr/bin/env bash
# An emitted training program as a user meets it: it refuses a world size other than its plan's
# and a checkpoint of another model shape (exit 2); its checkpoints and the reference trainer's
# are the same files, so either resumes the other and lands on the same weights; --trace writes
# a Chrome trace with every rank's compute and transfers.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
model=tests/data/tiny8/config.json
common=(--synthetic --seed 3 --lr 2e-3 --warmup 1 --steps 4)
ref=("$build/wp-ref" -m "$model" --micro-batch-size 2 --micro-batches 8)
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

d=$tmp/plan
"$build/wpgen" emit -t topologies/cpu-2x2.json -m "$model" --micro-batch-size 2 -s weipipe-interleave --micro-batches 2 -o "$d" >/dev/null &&
    make -s -j2 -C "$d" >/dev/null 2>&1 && ok || { bad "emit or build"; echo "0 passed, 1 failed"; exit 1; }
train=("${mpirun[@]}" -np 4 "$d/train")

# the world size is the plan's
"${mpirun[@]}" -np 3 "$d/train" --synthetic --steps 1 >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "generated for 4 ranks" "$tmp/out" && ok || bad "world size 3: exit $rc: $(head -3 "$tmp/out")"
# bad flags
"${train[@]}" --synthetic --steps x >"$tmp/out" 2>&1
[ $? = 2 ] && grep -q -- "--steps: expected an integer" "$tmp/out" && ok || bad "bad --steps: $(head -3 "$tmp/out")"
"${train[@]}" --synthetic -m tiny >"$tmp/out" 2>&1
[ $? = 2 ] && grep -q "fixed by the plan" "$tmp/out" && ok || bad "-m accepted: $(head -3 "$tmp/out")"
# a checkpoint of another shape
"$build/wp-ref" -m tiny --synthetic --steps 0 --save "$tmp/other.safetensors" >/dev/null 2>&1 || bad "wp-ref --steps 0"
"${train[@]}" --synthetic --steps 1 --init "$tmp/other.safetensors" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "shape" "$tmp/out" && ok || bad "other shape: exit $rc: $(head -3 "$tmp/out")"

# 4 steps straight, reference
"${ref[@]}" "${common[@]}" --save "$tmp/straight.safetensors" >/dev/null 2>&1 || bad "wp-ref straight"
# reference 2 steps, pipelined resumes to 4
"${ref[@]}" "${common[@]}" --stop-at 2 --save "$tmp/r2.safetensors" >/dev/null 2>&1 || bad "wp-ref 2 steps"
"${train[@]}" "${common[@]}" --resume "$tmp/r2.safetensors" --save "$tmp/p4.safetensors" >"$tmp/out" 2>&1 || bad "train --resume: $(tail -3 "$tmp/out")"
"$build/tools/ckpt_compare" "$tmp/p4.safetensors" "$tmp/straight.safetensors" 1e-4 >"$tmp/cmp" 2>&1 && ok || bad "pipelined resume of a reference checkpoint: $(cat "$tmp/cmp")"
# pipelined 2 steps, reference resumes to 4
"${train[@]}" "${common[@]}" --stop-at 2 --save "$tmp/p2.safetensors" >"$tmp/out" 2>&1 || bad "train 2 steps: $(tail -3 "$tmp/out")"
"${ref[@]}" "${common[@]}" --resume "$tmp/p2.safetensors" --save "$tmp/r4.safetensors" >/dev/null 2>&1 || bad "wp-ref --resume"
"$build/tools/ckpt_compare" "$tmp/r4.safetensors" "$tmp/straight.safetensors" 1e-4 >"$tmp/cmp" 2>&1 && ok || bad "reference resume of a pipelined checkpoint: $(cat "$tmp/cmp")"
[ -f "$tmp/config.json" ] && grep -q '"num_hidden_layers": *8' "$tmp/config.json" && ok || bad "config.json beside the checkpoint"

# the trace: valid JSON, every rank, compute and transfers
"${train[@]}" --synthetic --steps 2 --trace "$tmp/trace.json" >"$tmp/out" 2>&1 || bad "train --trace"
python3 - "$tmp/trace.json" <<'PY' && ok || bad "trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in ev if e.get("ph") == "X"]
pids = {e["pid"] for e in spans}
cats = {e["cat"] for e in spans}
assert pids == {0, 1, 2, 3}, pids
assert {"forward", "backward", "transfer", "optimizer"} <= cats, cats
assert all(e["dur"] >= 0 for e in spans)
PY

echo "train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
