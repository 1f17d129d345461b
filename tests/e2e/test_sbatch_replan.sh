#!/usr/bin/env bash
# job.sbatch re-plans by itself when a node is lost, outside Slurm (WPGEN_LAUNCH=mpirun): a
# 2-node x 2-rank plan (cpu-2x2, its nodes given as WPGEN_NODES="localhost 127.0.0.1", two names
# of this machine) trains under the script and saves every 4 steps; node n1's two ranks are killed
# with SIGKILL mid-run; the script, told by its WPGEN_DOWN_CMD hook that 127.0.0.1 is down (what
# Slurm's node state says on a cluster), re-plans for node n0 alone (1 x 2, the same global
# batch), builds that plan and resumes the checkpoint to the end. Checked: one re-plan, logged
# with its plan; the run ends bit-identical to the same re-planned program resumed from a copy of
# that checkpoint (the hook takes the copy, before the resume); no sequence replayed or skipped
# (the steps after the resume, and the final data position = steps x batch). Hostile cases: a node
# list that does not match the plan (exit 2, nothing run); survivors too small for the plan (the
# re-plan is refused with what fits, the script stops at once, exit 3, the checkpoint intact); a
# second loss during the re-planned run with WPGEN_MAX_REPLANS=1 (exit 3, a clear last line, the
# checkpoint intact; the re-plan, the same as the first run's, keeps that one's build). About 35 s.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
steps=40
run=(--synthetic --seed 5 --lr 2e-3)

a=$tmp/a
"$build/wpgen" emit -t topologies/cpu-2x2.json -m "$model" --micro-batch-size 2 -s weipipe-interleave --micro-batches 4 \
    -o "$a" >"$tmp/emit.out" 2>&1 && bash tests/make_emitted.sh "$a" >/dev/null 2>&1 || { echo "FAIL: emit or build: $(tail -2 "$tmp/emit.out")"; echo "0 passed, 1 failed"; exit 1; }
grep -q "^#SBATCH --no-kill$" "$a/job.sbatch" && grep -qx "wpgen='$(cd "$build" && pwd)/wpgen'" "$a/job.sbatch" &&
    grep -qx "plan_node_names=('n0' 'n1')" "$a/job.sbatch" && ok || bad "job.sbatch's header lacks --no-kill, wpgen= or the node names"
# a copy of the built plan for the survivors that are too small
cp -a "$a" "$tmp/small"

# the script outside Slurm, on emulated nodes: DIR STEPS [ENV...]
sbatch_run() {
    local d=$1 n=$2; shift 2
    env WPGEN_LAUNCH=mpirun WPGEN_NODES="localhost 127.0.0.1" WPGEN_SAVE_EVERY=4 WPGEN_MPIRUN_FLAGS="${mpirun[*]:1}" \
        WP_COMM_TIMEOUT=20 "$@" timeout -s KILL 120 bash "$d/job.sbatch" "${run[@]}" --steps "$n"
}
lines() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
# kills the ranks RANKS... of the mpirun that runs DIR's plan, once LOG has AT_LEAST lines
kill_ranks() {   # DIR LOG AT_LEAST RANK...
    local d=$1 log=$2 n=$3 mp="" c r killed=0; shift 3
    for i in $(seq 1200); do
        mp=$(pgrep -f -- "--rankfile $d/rankfile.slurm-local" | head -1)
        [ -n "$mp" ] && [ "$(lines "$log")" -ge "$n" ] && break
        sleep 0.05
    done
    for c in $(pgrep -P "${mp:-0}"); do
        for r in "$@"; do
            { tr '\0' '\n' <"/proc/$c/environ"; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$r" && kill -9 "$c" && killed=$((killed + 1))
        done
    done
    [ $killed = $# ]
}

# 1. a node list that does not match the plan: refused before anything runs
sbatch_run "$a" 4 WPGEN_NODES=localhost >"$tmp/o1" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "the node list (localhost, from WPGEN_NODES) has 1 node(s), the plan 2 (n0 n1)" "$tmp/o1" && [ ! -e "$a/train-log.jsonl" ] && ok ||
    bad "a 1-node list for a 2-node plan: exit $rc: $(tail -2 "$tmp/o1")"
"$build/wpgen" replan "$a" --without n7 -o "$tmp/x" >"$tmp/o1" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "no node of that name (it has: n0, n1)" "$tmp/o1" && [ ! -e "$tmp/x" ] && ok || bad "replan --without n7: exit $rc: $(tail -2 "$tmp/o1")"
"$build/wpgen" replan "$a" --without n0,n1 -o "$tmp/x" >"$tmp/o1" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "no node of .* is left to plan for" "$tmp/o1" && [ ! -e "$tmp/x" ] && ok || bad "replan --without n0,n1: exit $rc: $(tail -2 "$tmp/o1")"

# 2. node n1 lost after step 9: the script re-plans for n0 and resumes, by itself
t0=$SECONDS
sbatch_run "$a" $steps WPGEN_DOWN_CMD="cp -r '$a/checkpoint' '$tmp/ck-copy'; echo 127.0.0.1" >"$tmp/a.out" 2>&1 &
job=$!
kill_ranks "$a" "$a/train-log.jsonl" 9 2 3 && ok || bad "could not kill node n1's ranks"
wait $job; rc=$?
echo "the job, node n1 lost mid-run, ended after $((SECONDS - t0)) s with exit $rc; its script said:"
grep "^job.sbatch: .*\(re-plan\|done\|exited\)" "$tmp/a.out" | sed 's/^job.sbatch: [^ ]* job none restart 0: /    /'
s=$(ckpt_step "$tmp/ck-copy/checkpoint.json")
[ $rc = 0 ] && grep -q "node(s) lost: 127.0.0.1 (n1); re-plan 1 of 2: $a.replan-1, 2 ranks on 1 node(s) (localhost), resuming from step $s of" "$tmp/a.out" &&
    [ "$(grep -c "re-plan [0-9]" "$tmp/a.out")" = 1 ] && grep -q "restart 0: done" "$tmp/a.out" && ok ||
    bad "the script did not re-plan once and finish (exit $rc, step '$s'): $(grep '^job.sbatch' "$tmp/a.out" | tail -3)"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert (p["nranks"], p["micro_batches"], p["nodes"]) == (2, 16, ["n0"]), p' \
    "$a.replan-1/plan.json" && ok || bad "the survivors' plan is not 2 ranks on n0 with the global batch of 16"
# the same re-planned program resumed from the copy: the same weights, bit for bit
"${mpirun[@]}" -np 2 "$a.replan-1/train" "${run[@]}" --steps $steps --resume "$tmp/ck-copy/checkpoint.json" \
    --save "$tmp/ck-copy/checkpoint.json" >"$tmp/ref.out" 2>&1 || bad "the reference resume: $(tail -3 "$tmp/ref.out")"
"$build/tools/ckpt_compare" "$a/checkpoint/checkpoint.json" "$tmp/ck-copy/checkpoint.json" 0 >"$tmp/cmp" 2>&1 && ok ||
    bad "the script's re-planned run differs from the reference resume: $(tail -2 "$tmp/cmp")"
# no sequence replayed or skipped: the log is the lost run's steps 1..k then s+1..steps, and the
# final data position is steps x 16 micro-batches x 2 sequences
python3 - "$a/checkpoint/checkpoint.json" "$a/train-log.jsonl" "${s:-0}" $steps <<'EOF' && ok || bad "data position or steps wrong after the script's re-plan"
import json, sys
st = json.load(open(sys.argv[1]))["state"]
log = [json.loads(l)["step"] for l in open(sys.argv[2]) if l.strip()]
s, total = int(sys.argv[3]), int(sys.argv[4])
assert int(st["step"]) == total and int(st["data_seq"]) == total * 16 * 2, st
k = log.index(s + 1, s + 1) if log.count(s + 1) == 2 else log.index(s + 1)
assert 4 <= s < total and log[:k] == list(range(1, k + 1)) and k >= s and log[k:] == list(range(s + 1, total + 1)), (s, log)
EOF

# 3. survivors too small for the plan: the re-plan is refused with what fits, the script stops
# there (exit 3, no second try). The plan's recorded topology is given devices of 3.3 MB: the
# 4-rank plan (2.9 MB a rank) fits, none of 2 ranks (3.8 MB) does. (An edited copy of the built
# plan, rather than a plan emitted for that topology, to spare a build.)
python3 - "$tmp/small/plan.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
for d in p["topology_json"]["device_types"].values(): d["mem_gb"] = 0.0033
json.dump(p, open(sys.argv[1], "w"), indent=1)
EOF
sbatch_run "$tmp/small" $steps WPGEN_DOWN_CMD="echo 127.0.0.1" >"$tmp/small.out" 2>&1 &
job=$!
kill_ranks "$tmp/small" "$tmp/small/train-log.jsonl" 9 2 3 || bad "could not kill the small plan's node n1"
wait $job; rc=$?
s=$(ckpt_step "$tmp/small/checkpoint/checkpoint.json")
echo "survivors too small: exit $rc; $(grep "re-plan" "$tmp/small.out" | sed 's/^job.sbatch: [^ ]* job none restart 0: //')"
[ $rc = 3 ] && grep -q "re-plan 1 refused: .*does not fit.*what fits: the old plan, 4 ranks on 2 node(s)" "$tmp/small.out" &&
    [ "$(grep -c "re-plan [0-9]" "$tmp/small.out")" = 1 ] && [ ! -e "$tmp/small.replan-1" ] &&
    grep -q "stopping; the last checkpoint, of step $s, is" "$tmp/small.out" && [ -n "$s" ] && [ "$s" -ge 4 ] && ok ||
    bad "survivors too small: exit $rc (step '$s'): $(grep '^job.sbatch' "$tmp/small.out" | tail -2)"

# 4. a second loss during the re-planned run, WPGEN_MAX_REPLANS=1: the script stops, saying so.
# The same folder again, with a checkpoint and log of its own: the re-plan is the same plan as
# a.replan-1, which is kept with its build
d=$a ck=$tmp/ck4/checkpoint.json log=$tmp/twice.log
sbatch_run "$d" 400 WPGEN_MAX_REPLANS=1 WPGEN_DOWN_CMD="echo 127.0.0.1" WPGEN_CHECKPOINT="$ck" WPGEN_LOG="$log" >"$tmp/twice.out" 2>&1 &
job=$!
kill_ranks "$d" "$log" 9 2 3 || bad "could not kill node n1 (first loss)"
n1=$(lines "$log")
kill_ranks "$d.replan-1" "$log" $((n1 + 8)) 1 || bad "could not kill rank 1 of the re-planned run (second loss)"
wait $job; rc=$?
s=$(ckpt_step "$ck")
echo "a second loss: exit $rc; $(grep "^job.sbatch" "$tmp/twice.out" | tail -1 | sed 's/^job.sbatch: [^ ]* job none restart 0: //')"
[ $rc = 3 ] && grep -q "re-plan 1 of 1: $d.replan-1, .*(the same plan as there already: its build kept)" "$tmp/twice.out" &&
    grep -q "train exited [0-9]* (a rank lost) after 1 re-plan(s), WPGEN_MAX_REPLANS=1: stopping; the last checkpoint, of step $s, is $ck" "$tmp/twice.out" &&
    [ ! -e "$d.replan-2" ] && [ -n "$s" ] && [ "$s" -ge 8 ] && [ "$s" -lt 400 ] && ok ||
    bad "a second loss: exit $rc (step '$s'): $(grep '^job.sbatch' "$tmp/twice.out" | tail -2)"
# the checkpoint it names is whole: the survivors' plan resumes it for a step
"${mpirun[@]}" -np 2 "$d.replan-1/train" "${run[@]}" --steps $((s + 1)) --resume "$ck" >"$tmp/r.out" 2>&1 &&
    grep -q "resuming from .* at step $s" "$tmp/r.out" && ok || bad "the last checkpoint does not resume: $(tail -2 "$tmp/r.out")"
echo "sbatch_replan: $pass passed, $fail failed"
[ "$fail" = 0 ]
