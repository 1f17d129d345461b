#!/usr/bin/env bash
# WPGEN_PROBE=1 under a real Slurm: two slurmd of this host as nodes w1 and w2 (slurm_lib.sh).
# 1. A 2-node CPU plan of one rank more per node than this host's NUMA nodes (topologies/cpu-2x2.json
#    so edited, nodes n0 n1; the probe makes one device per NUMA node) submitted with
#    WPGEN_PROBE=1: the job probes w1 and w2 (one task per node, each named by its Slurm node
#    name), merges them, finds fewer devices per node than the plan has, re-plans for them into
#    DIR.alloc, says so, trains and completes; its weights are bit-identical to DIR.alloc's
#    program run by hand.
# 2. A plan emitted from that job's own probe (DIR/probe/allocation.json) submitted the same way:
#    the allocation is the plan's, said, and the plan runs as emitted (no DIR.alloc). Mid-run node
#    w2 is killed (as slurm_replan.sh does): the script probes the survivor w1, re-plans with -t
#    survivors.json (one rank per NUMA node), resumes and completes, bit-identical to the two plans run by hand,
#    every step after the resume once in the log.
# WPGEN_LAUNCH=mpirun, as slurm_replan.sh says why. Needs root; about 90 s: `make test-slurm`.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
. tests/slurm/slurm_lib.sh
. tests/ckpt.sh
slurm_install
# what the probe sees here: one device per NUMA node; the plan of case 1 has one more per node
per=$("$build/wpgen" probe | python3 -c 'import json, sys; print(json.load(sys.stdin)["nodes"][0]["devices"])') ||
    { bad "wpgen probe on this host"; exit 1; }
slurm_start $((per + 1 > 4 ? per + 1 : 4)) w1 w2
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --allow-run-as-root)
run=(--synthetic --seed 3 --steps 30)

# submit DIR [HOOK]: its job.sbatch with WPGEN_PROBE=1, waited for (HOOK, a command, run once it
# is submitted); sets out (the job's output)
submit() {
    local jid state
    jid=$(cd "$tmp" && WPGEN_PROBE=1 WPGEN_LAUNCH=mpirun WPGEN_MPIRUN_FLAGS="${mpirun[*]:1} --mca btl ^vader" WPGEN_SAVE_EVERY=20 \
        WP_COMM_TIMEOUT=20 sbatch --parsable -o "$tmp/job-%j.out" "$1/job.sbatch" "${run[@]}") || { bad "sbatch refused $1/job.sbatch"; exit 1; }
    [ -n "${2:-}" ] && $2 "$1"
    for i in $(seq 300); do
        sleep 1
        state=$(squeue -h -j "$jid" -o %T 2>/dev/null)
        [ -z "$state" ] && break
    done
    out=$tmp/job-$jid.out
    echo "job $jid ($1):"
    grep -E "^job.sbatch" "$out" | sed 's/^/    /'
}

# ---- 1. the probe differs from the plan: re-planned, trained ----
d=$tmp/job
python3 - topologies/cpu-2x2.json $((per + 1)) >"$tmp/cpu-2xM.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for n in t["nodes"]: n["devices"] = int(sys.argv[2])
print(json.dumps(t))
PY
"$build/wpgen" emit -t "$tmp/cpu-2xM.json" -m tiny -s weipipe-interleave -o "$d" >"$tmp/emit.out" 2>&1 ||
    { bad "emit: $(tail -2 "$tmp/emit.out")"; exit 1; }
t0=$SECONDS
submit "$d"
grep -q '"name": "w1"' "$d/probe/w1.json" 2>/dev/null && grep -q '"name": "w2"' "$d/probe/w2.json" 2>/dev/null &&
    grep -q '"name": "w1"' "$d/probe/allocation.json" && grep -q '"name": "w2"' "$d/probe/allocation.json" && ok ||
    bad "the nodes were not probed by their Slurm names: $(ls "$d/probe" 2>&1 | tr '\n' ' ')"
grep -q "WPGEN_PROBE=1: the allocation has 2 node(s): w1 $per x cpu, w2 $per x cpu; the plan 2 node(s): n0 $((per + 1)) x cpu, n1 $((per + 1)) x cpu (probed in [0-9]* s); re-planned for it: $d.alloc, $((2 * per)) ranks on 2 node(s) (w1 w2)" "$out" &&
    grep -q ": done$" "$out" && [ "$(wc -l <"$d/train-log.jsonl")" = 30 ] && ok ||
    bad "the job did not re-plan for the probe and finish: $(grep '^job.sbatch' "$out" | tail -3)"
grep -q -- "-np $((2 * per)) --rankfile $d.alloc/rankfile.slurm-" "$out" && ok || bad "the job did not run $d.alloc's $((2 * per)) ranks"
# the same re-planned program by hand
mkdir -p "$tmp/ref"
"${mpirun[@]}" -np $((2 * per)) "$d.alloc/train" "${run[@]}" --save "$tmp/ref/checkpoint.json" >"$tmp/ref.out" 2>&1 ||
    bad "the run by hand: $(tail -2 "$tmp/ref.out")"
"$build/tools/ckpt_compare" "$d/checkpoint/checkpoint.json" "$tmp/ref/checkpoint.json" 0 >"$tmp/cmp.out" 2>&1 && ok ||
    bad "the job's weights differ from $d.alloc run by hand: $(tail -2 "$tmp/cmp.out")"

echo "the first job: $((SECONDS - t0)) s"
# bad input, before anything runs: another value; a probe outside a Slurm job
WPGEN_PROBE=yes bash "$d/job.sbatch" >"$tmp/bad.out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "WPGEN_PROBE=yes: expected 0 (run the plan as emitted) or 1" "$tmp/bad.out" && ok || bad "WPGEN_PROBE=yes: exit $rc: $(tail -1 "$tmp/bad.out")"
WPGEN_PROBE=1 bash "$d/job.sbatch" >"$tmp/bad.out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "WPGEN_PROBE=1 probes the allocation's nodes with srun: it needs a Slurm job" "$tmp/bad.out" && ok ||
    bad "WPGEN_PROBE=1 outside Slurm: exit $rc: $(tail -1 "$tmp/bad.out")"

# ---- 2. a plan for the probed allocation: it matches, runs as emitted; then a loss: the survivor
# probed, its plan made from that probe ----
# node w2 dies once the job DIR has a checkpoint: its slurmd, then every process it runs for the job
lines() { { wc -l <"$1/train-log.jsonl"; } 2>/dev/null || echo 0; }
kill_w2() {
    local victims=0 p
    for i in $(seq 600); do [ "$(lines "$1")" -ge 50 ] && break; sleep 0.2; done
    kill -9 "$(cat "$tmp/slurm/slurmd-w2.pid")"
    for p in $(pgrep -f "$1/train|orted"); do
        { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURMD_NODENAME=w2" && kill -9 "$p" && victims=$((victims + 1))
    done
    echo "node w2 killed after step $(lines "$1") ($victims processes)"
    [ $victims -ge 1 ] && ok || bad "node w2's rank was not found"
}
f=$tmp/job2 steps=200
run=(--synthetic --seed 3 --steps $steps)
t1=$SECONDS
"$build/wpgen" emit -t "$d/probe/allocation.json" -m tiny -s weipipe-interleave -o "$f" >"$tmp/emit3.out" 2>&1 ||
    { bad "emit from the job's probe: $(tail -2 "$tmp/emit3.out")"; exit 1; }
submit "$f" kill_w2
grep -q "WPGEN_PROBE=1: the allocation's 2 node(s) (w1 w2) are the plan's (devices and their type; $f/probe/allocation.json, probed in [0-9]* s): running it as emitted" "$out" &&
    ! grep -q "re-planned for it" "$out" && [ ! -e "$f.alloc" ] && grep -q -- "-np $((2 * per)) --rankfile $f/rankfile.slurm-" "$out" && ok ||
    bad "the matching allocation was not run as emitted: $(grep '^job.sbatch' "$out" | head -3)"
s=$(sed -n 's/^train: resuming from .* at step \([0-9]*\)$/\1/p' "$out" | tail -1)
grep -q "the survivors probed in [0-9]* s: $f/probe/survivors.json" "$out" && grep -q '"name": "w1"' "$f/probe/survivors.json" &&
    ! grep -q '"name": "w2"' "$f/probe/survivors.json" &&
    grep -q "node(s) lost: w2 (w2); re-plan 1 of 2: $f.replan-1, $per ranks on 1 node(s) (w1), resuming from step $s of" "$out" &&
    [ "$(grep -c "re-plan [0-9]" "$out")" = 1 ] && grep -q ": done$" "$out" && ok ||
    bad "the job did not probe the survivor, re-plan once and finish: $(grep '^job.sbatch' "$out" | tail -3)"
same_as_by_hand "$f/checkpoint/checkpoint.json" "$tmp/ref3" "${s:-0}" $((2 * per)) "$f/train" $per "$f.replan-1/train" "${run[@]}"
steps_once_after_resume "$f/train-log.jsonl" "${s:-0}" $steps
echo "the second job, with its loss: $((SECONDS - t1)) s"
echo "slurm probe: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
