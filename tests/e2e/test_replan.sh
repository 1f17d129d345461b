#!/usr/bin/env bash
# A node lost, the survivors re-planned: a 2-node x 2-rank plan (emulated nodes, cpu-2x2) trains
# and saves every 4 steps; node n1's two ranks are killed with SIGKILL mid-run; the job ends by
# itself (no hang) with its last checkpoint committed; `wpgen replan` makes the plan again for
# the survivors (1 node x 2 ranks) with the old strategy, model and global batch; the new program
# resumes the checkpoint to the end. Checked: the re-planned plan keeps the global batch (16
# micro-batches of 2 sequences), the resumed run ends bit-identical to the same re-planned run
# resumed from a copy of that checkpoint, and its data position is exactly steps x batch (no
# sequence replayed or skipped). Also: a survivors' topology too small for the plan's memory is
# refused with exit 1, and a topology that is not JSON with exit 2, both before anything is written.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
steps=16
run=(--synthetic --seed 5 --lr 2e-3 --steps $steps)

a=$tmp/a
"$build/wpgen" emit -t topologies/cpu-2x2.json -m "$model" --micro-batch-size 2 -s weipipe-interleave --micro-batches 4 \
    -o "$a" >"$tmp/emit.out" 2>&1 && bash tests/make_emitted.sh "$a" >/dev/null 2>&1 || { echo "FAIL: emit or build: $(tail -2 "$tmp/emit.out")"; echo "0 passed, 1 failed"; exit 1; }

rank_pid() {   # MPIRUN_PID RANK: the pid of that rank among mpirun's children
    local c
    for c in $(pgrep -P "$1"); do
        tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$c"; return; }
    done
}

# 1. the job on 2 nodes, node n1 (ranks 2 and 3) lost after step 9
mkdir -p "$tmp/ck"
t0=$SECONDS
# a job that outlives 120 s has hung: timeout kills it (and leaves nothing behind, unlike a
# watchdog subshell whose sleep would hold the test's output open)
WP_COMM_TIMEOUT=20 timeout -s KILL 120 "${mpirun[@]}" -np 4 "$a/train" "${run[@]}" --save "$tmp/ck/checkpoint.json" \
    --save-every 4 --log "$tmp/a.log" >"$tmp/a.out" 2>&1 &
job=$!
for i in $(seq 900); do [ -f "$tmp/a.log" ] && [ "$(wc -l <"$tmp/a.log")" -ge 9 ] && break; sleep 0.1; done
mp=$(pgrep -P $job -n)
v2=$(rank_pid "$mp" 2) v3=$(rank_pid "$mp" 3)
[ -n "$v2" ] && [ -n "$v3" ] && kill -9 "$v2" "$v3"
wait $job; rc=$?
[ -n "$v2" ] && [ $rc != 0 ] && [ $((SECONDS - t0)) -lt 110 ] && ok ||
    bad "node n1 killed: exit $rc after $((SECONDS - t0)) s (victims ${v2:-?} ${v3:-?}): $(tail -2 "$tmp/a.out")"
s=$(ckpt_step "$tmp/ck/checkpoint.json")
[ -n "$s" ] && [ "$s" -ge 4 ] && [ "$s" -lt $steps ] && ok || bad "no committed checkpoint before the loss (step '${s}')"
echo "node n1 lost after step $(wc -l <"$tmp/a.log"); the job ended by itself after $((SECONDS - t0)) s; the last checkpoint is of step $s"
cp -r "$tmp/ck" "$tmp/ck-copy"

# 2. the survivors: node n0 alone
python3 - topologies/cpu-2x2.json "$tmp/survivors.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
t["nodes"] = [n for n in t["nodes"] if n["name"] != t["nodes"][1]["name"]]
t["name"] = "survivors"
json.dump(t, open(sys.argv[2], "w"))
EOF
"$build/wpgen" replan "$a" -t "$tmp/survivors.json" -o "$tmp/b" >"$tmp/replan.out" 2>&1 && bash tests/make_emitted.sh "$tmp/b" >/dev/null 2>&1 && ok ||
    { bad "replan for the survivors: $(tail -3 "$tmp/replan.out")"; echo "$pass passed, $fail failed"; exit 1; }
grep -q "the same global batch for 2 ranks (was 4" "$tmp/replan.out" && ok || bad "replan did not say it kept the batch: $(cat "$tmp/replan.out")"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert (p["nranks"], p["micro_batches"], p["strategy"]) == (2, 16, "weipipe-interleave"), p["micro_batches"]' \
    "$tmp/b/plan.json" && ok || bad "the re-planned plan is not 2 ranks of the same strategy and batch"

# 3. resumed on the survivors to the end; and again from the copy: the same weights, bit for bit
"${mpirun[@]}" -np 2 "$tmp/b/train" "${run[@]}" --resume "$tmp/ck/checkpoint.json" --save "$tmp/ck/checkpoint.json" \
    --log "$tmp/b.log" >"$tmp/b.out" 2>&1 && ok || bad "resume on the survivors: $(tail -3 "$tmp/b.out")"
"${mpirun[@]}" -np 2 "$tmp/b/train" "${run[@]}" --resume "$tmp/ck-copy/checkpoint.json" --save "$tmp/ck-copy/checkpoint.json" \
    >"$tmp/c.out" 2>&1 || bad "the second resume: $(tail -3 "$tmp/c.out")"
"$build/tools/ckpt_compare" "$tmp/ck/checkpoint.json" "$tmp/ck-copy/checkpoint.json" 0 >"$tmp/cmp" 2>&1 && ok ||
    bad "the re-planned run is not reproducible: $(tail -2 "$tmp/cmp")"
# the data position: every sequence of steps x 16 micro-batches x 2, read once
python3 - "$tmp/ck/checkpoint.json" "$tmp/b.log" $s $steps <<'EOF' && ok || bad "data position or steps wrong after the re-plan"
import json, sys
st = json.load(open(sys.argv[1]))["state"]
steps = [json.loads(l)["step"] for l in open(sys.argv[2]) if l.strip()]
first, total = int(sys.argv[3]), int(sys.argv[4])
assert int(st["step"]) == total and int(st["data_seq"]) == total * 16 * 2, st
assert steps == list(range(first + 1, total + 1)), steps
EOF

# 4. survivors that cannot hold the plan, and a topology that is not one: refused, nothing written
python3 - "$tmp/survivors.json" "$tmp/tiny-mem.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
for d in t["device_types"].values(): d["mem_gb"] = 0.001
json.dump(t, open(sys.argv[2], "w"))
EOF
"$build/wpgen" replan "$a" -t "$tmp/tiny-mem.json" -o "$tmp/c" >"$tmp/out" 2>&1; rc=$?
[ $rc = 1 ] && [ ! -e "$tmp/c" ] && grep -q "does not fit" "$tmp/out" && ok || bad "survivors too small: exit $rc: $(tail -2 "$tmp/out")"
echo '{' >"$tmp/broken.json"
"$build/wpgen" replan "$a" -t "$tmp/broken.json" -o "$tmp/c" >"$tmp/out" 2>&1; rc=$?
[ $rc = 2 ] && [ ! -e "$tmp/c" ] && ok || bad "a broken topology: exit $rc: $(tail -2 "$tmp/out")"
"$build/wpgen" replan "$tmp" -t "$tmp/survivors.json" -o "$tmp/c" >"$tmp/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "plan.json" "$tmp/out" && ok || bad "a folder that is no emission: exit $rc: $(tail -2 "$tmp/out")"
echo "replan: $pass passed, $fail failed"
[ "$fail" = 0 ]
