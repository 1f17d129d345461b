#!/usr/bin/env bash
# A node lost under a real Slurm: two slurmd of this host as nodes w1 and w2 (slurm_lib.sh), a
# 2-node x 2-rank CPU plan's job.sbatch submitted on them (WPGEN_LAUNCH=mpirun: Slurm's PMIx
# plugin cannot run two slurmd's steps on one host, they share its folder in /tmp), saving every
# 20 steps. Mid-run node w2 dies: its slurmd and its ranks are killed with SIGKILL. --no-kill keeps
# the job; the script waits for Slurm to mark w2 down (SlurmdTimeout 10 s here), re-plans for w1
# alone (wpgen replan --without n1), builds that plan and resumes the checkpoint on w1, by itself.
# Checked: one re-plan, logged with its plan; the job completes; its final weights are
# bit-identical to the same two plans run by hand (the 4-rank plan to the step the job resumed
# from, the survivors' plan from there), and every step after the resume is in the log once.
# Needs root; about two minutes: `make test-slurm` runs it after slurm_job.sh.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
. tests/slurm/slurm_lib.sh
. tests/ckpt.sh
slurm_install
slurm_start 4 w1 w2
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --allow-run-as-root)

d=$tmp/job
"$build/wpgen" emit -t topologies/cpu-2x2.json -m tiny -s weipipe-interleave -o "$d" >"$tmp/emit.out" 2>&1 &&
    make -s -C "$d" -j2 >"$tmp/make.out" 2>&1 || { bad "emit or make: $(tail -2 "$tmp/emit.out" "$tmp/make.out")"; exit 1; }
steps=200 run=(--synthetic --seed 3)
t0=$SECONDS
# (sbatch passes the environment on; no shared memory between ranks: Open MPI's would mix the two
# emulated nodes' segments, which are on one host)
jid=$(cd "$tmp" && WPGEN_LAUNCH=mpirun WPGEN_SAVE_EVERY=20 WPGEN_MPIRUN_FLAGS="${mpirun[*]:1} --mca btl ^vader" WP_COMM_TIMEOUT=20 \
    sbatch --parsable -o "$tmp/job-%j.out" "$d/job.sbatch" "${run[@]}" --steps $steps) || { bad "sbatch refused the job"; exit 1; }
# node w2 dies once the job has a checkpoint: its slurmd, then every process it runs for the job
lines() { { wc -l <"$d/train-log.jsonl"; } 2>/dev/null || echo 0; }
for i in $(seq 600); do [ "$(lines)" -ge 50 ] && break; sleep 0.2; done
kill -9 "$(cat "$tmp/slurm/slurmd-w2.pid")"
victims=0
for p in $(pgrep -f "$d/train|orted"); do
    { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURMD_NODENAME=w2" && kill -9 "$p" && victims=$((victims + 1))
done
echo "node w2 killed after step $(lines) ($victims processes)"
[ $victims -ge 2 ] && ok || bad "node w2's ranks were not found ($victims killed)"
for i in $(seq 300); do
    sleep 1
    state=$(squeue -h -j "$jid" -o %T 2>/dev/null)
    [ -z "$state" ] || [ "$state" = COMPLETED ] || [ "$state" = FAILED ] && break
done
out=$tmp/job-$jid.out
echo "the job ran $((SECONDS - t0)) s; Slurm says w2 is $(sinfo -h -N -n w2 -o %t); the script said:"
grep -E "^job.sbatch|^train: (resuming|checkpoint)" "$out" | sed 's/^/    /'
s=$(sed -n 's/^train: resuming from .* at step \([0-9]*\)$/\1/p' "$out" | tail -1)
grep -q "node(s) lost: w2 (n1); re-plan 1 of 2: $d.replan-1, 2 ranks on 1 node(s) (w1), resuming from step $s of" "$out" &&
    [ "$(grep -c "re-plan [0-9]" "$out")" = 1 ] && grep -q ": done$" "$out" && ok ||
    bad "the job did not re-plan once and finish: $(grep '^job.sbatch' "$out" | tail -3)"
# by hand: the 4-rank plan to step s, then the survivors' plan from there
same_as_by_hand "$d/checkpoint/checkpoint.json" "$tmp/ref" "${s:-0}" 4 "$d/train" 2 "$d.replan-1/train" "${run[@]}" --steps $steps
steps_once_after_resume "$d/train-log.jsonl" "${s:-0}" $steps
echo "slurm replan: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
