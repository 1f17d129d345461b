#!/usr/bin/env bash
# The emitted job.sbatch under a real Slurm: slurmctld, slurmd and munged from Debian's packages
# (installed with apt-get when missing), configured here as a one-node cluster of 8 CPUs in a
# temporary folder, on ports of their own, and stopped at the end (slurm_lib.sh). A CPU plan of 4 ranks is emitted,
# its job.sbatch submitted with a one-minute time limit and Slurm's warning signal 55 s before it:
# the job trains, gets the signal, stops after its step with a checkpoint, requeues itself (the
# test moves the requeued job's start time, which Slurm delays by two minutes, to now) and resumes;
# its final weights must be bit-identical to an uninterrupted run's, and its log must have every
# step once, in order. Also: an allocation smaller than the plan is refused with what the plan
# needs. Needs root (the daemons run as root here); skipped, saying so, where that or apt-get is
# missing. About three minutes: not in `make test`; `make test-slurm` runs it.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

. tests/slurm/slurm_lib.sh
slurm_install

# ---- a one-node Slurm in $tmp/slurm ----
slurm_start 8 "$(hostname -s)"

# ---- the plan, built as a user would ----
d=$tmp/job
"$build/wpgen" emit -t topologies/cpu-1x4.json -m tiny -s weipipe-interleave -o "$d" >"$tmp/emit.out" 2>&1 ||
    { bad "emit: $(tail -2 "$tmp/emit.out")"; exit 1; }
grep -q "^#SBATCH --ntasks=4$" "$d/job.sbatch" && grep -q "^#SBATCH --nodes=1$" "$d/job.sbatch" &&
    grep -q "^#SBATCH --signal=B:USR1@" "$d/job.sbatch" && grep -q "^#SBATCH --requeue$" "$d/job.sbatch" && ok ||
    bad "job.sbatch lacks the plan's resources: $(grep '^#SBATCH' "$d/job.sbatch" | tr '\n' ' ')"
bash -n "$d/job.sbatch" && ok || bad "job.sbatch is not valid bash"

# ---- uninterrupted: the same run under mpirun, for the weights to compare with ----
# long enough (about a minute here) that the warning comes first: slurmctld looks at time limits
# every 30 s or so, so the signal due 5 s in may come 35 s in
steps=1200
make -s -C "$d" -j2 >"$tmp/make.out" 2>&1 || { bad "make: $(tail -3 "$tmp/make.out")"; exit 1; }
mkdir -p "$tmp/u"
mpirun --allow-run-as-root --oversubscribe -np 4 "$d/train" --synthetic --steps $steps --save "$tmp/u/checkpoint.json" \
    >"$tmp/u.out" 2>&1 || bad "the uninterrupted run: $(tail -3 "$tmp/u.out")"

# ---- the job: signalled before its time limit, saved, requeued, resumed ----
t0=$SECONDS
jid=$(cd "$tmp" && sbatch --parsable --time=1 --signal=B:USR1@55 -o "$tmp/job-%j.out" "$d/job.sbatch" --synthetic --steps $steps) ||
    { bad "sbatch refused the job"; exit 1; }
requeued=0
for i in $(seq 400); do
    sleep 1
    state=$(squeue -h -j "$jid" -o %T 2>/dev/null)
    restarts=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
    # Slurm holds a requeued job back two minutes: start it now, once the node has cleaned up
    # after its first run (a step launched before that fails)
    if [ "$state" = PENDING ] && [ "${restarts:-0}" -gt $requeued ] && sinfo -h -o %t | grep -qx idle; then
        sleep 5
        scontrol update jobid="$jid" StartTime=now >/dev/null 2>&1 && requeued=$restarts
    fi
    [ -z "$state" ] || [ "$state" = COMPLETED ] || [ "$state" = FAILED ] && break
done
out=$tmp/job-$jid.out
echo "the job ran $((SECONDS - t0)) s; its output:"; grep -E "^job.sbatch|^train: (stopped|resuming|checkpoint)" "$out" | sed 's/^/    /'
grep -q "time-limit warning: stopping after this step" "$out" && ok || bad "the job never got Slurm's warning signal: $(tail -3 "$out")"
grep -q "stopped and saved: requeueing" "$out" && ok || bad "the job did not save and requeue on the signal"
grep -q "^train: resuming from .* at step [1-9]" "$out" && ok || bad "the requeued job did not resume: $(tail -3 "$out")"
grep -q "restart [1-9][0-9]*: done" "$out" && ok || bad "the requeued job did not finish: $(tail -3 "$out")"
"$build/tools/ckpt_compare" "$d/checkpoint/checkpoint.json" "$tmp/u/checkpoint.json" 0 >"$tmp/cmp.out" 2>&1 && ok ||
    bad "the requeued job's weights differ from the uninterrupted run's: $(tail -2 "$tmp/cmp.out")"
# every step once, in order, across the two runs of the job
python3 - "$d/train-log.jsonl" $steps <<'EOF' && ok || bad "the job's log does not have steps 1..$steps once each"
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if l.strip()]
assert steps == list(range(1, int(sys.argv[2]) + 1)), steps[:5]
EOF

# ---- an allocation that is not the plan's: refused with what the plan needs ----
jid=$(cd "$tmp" && sbatch --parsable --ntasks=2 --ntasks-per-node=2 -o "$tmp/small-%j.out" "$d/job.sbatch" --synthetic --steps 2)
for i in $(seq 60); do sleep 1; [ -z "$(squeue -h -j "$jid" -o %T 2>/dev/null)" ] && break; done
grep -q "the allocation has 2 tasks, the plan 4" "$tmp/small-$jid.out" && ok ||
    bad "a 2-task allocation was not refused: $(tail -2 "$tmp/small-$jid.out")"
echo "slurm: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
