#!/usr/bin/env bash
# WPGEN_PROBE=1 under a real Slurm: two slurmd of this host as nodes w1 and w2 (slurm_lib.sh).
# 1. A 2-node x 2-rank CPU plan (topologies/cpu-2x2.json, nodes n0 n1) submitted with
#    WPGEN_PROBE=1: the job probes w1 and w2 (one task per node, each named by its Slurm node
#    name), merges them, finds 1 CPU device per node where the plan has 2 (this host is one NUMA
#    node), re-plans for that into DIR.alloc (2 ranks), says so, trains and completes; its weights
#    are bit-identical to DIR.alloc's program run by hand.
# 2. A plan emitted from that job's own probe (DIR/probe/allocation.json) submitted the same way:
#    the allocation is the plan's, said, and the plan runs as emitted (no DIR.alloc).
# WPGEN_LAUNCH=mpirun, as slurm_replan.sh says why. Needs root; about a minute: `make test-slurm`.
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
run=(--synthetic --seed 3 --steps 30)

# submit DIR: its job.sbatch with WPGEN_PROBE=1, waited for; sets out (the job's output)
submit() {
    local jid state
    jid=$(cd "$tmp" && WPGEN_PROBE=1 WPGEN_LAUNCH=mpirun WPGEN_MPIRUN_FLAGS="${mpirun[*]:1} --mca btl ^vader" \
        sbatch --parsable -o "$tmp/job-%j.out" "$1/job.sbatch" "${run[@]}") || { bad "sbatch refused $1/job.sbatch"; exit 1; }
    for i in $(seq 120); do
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
"$build/wpgen" emit -t topologies/cpu-2x2.json -m tiny -s weipipe-interleave -o "$d" >"$tmp/emit.out" 2>&1 ||
    { bad "emit: $(tail -2 "$tmp/emit.out")"; exit 1; }
t0=$SECONDS
submit "$d"
grep -q '"name": "w1"' "$d/probe/w1.json" 2>/dev/null && grep -q '"name": "w2"' "$d/probe/w2.json" 2>/dev/null &&
    grep -q '"name": "w1"' "$d/probe/allocation.json" && grep -q '"name": "w2"' "$d/probe/allocation.json" && ok ||
    bad "the nodes were not probed by their Slurm names: $(ls "$d/probe" 2>&1 | tr '\n' ' ')"
grep -q "WPGEN_PROBE=1: the allocation has 2 node(s): w1 1 x cpu, w2 1 x cpu; the plan 2 node(s): n0 2 x cpu, n1 2 x cpu (probed in [0-9]* s); re-planned for it: $d.alloc, 2 ranks on 2 node(s) (w1 w2)" "$out" &&
    grep -q ": done$" "$out" && [ "$(wc -l <"$d/train-log.jsonl")" = 30 ] && ok ||
    bad "the job did not re-plan for the probe and finish: $(grep '^job.sbatch' "$out" | tail -3)"
grep -q -- "-np 2 --rankfile $d.alloc/rankfile.slurm-" "$out" && ok || bad "the job did not run $d.alloc's 2 ranks"
# the same re-planned program by hand
mkdir -p "$tmp/ref"
"${mpirun[@]}" -np 2 "$d.alloc/train" "${run[@]}" --save "$tmp/ref/checkpoint.json" >"$tmp/ref.out" 2>&1 ||
    bad "the run by hand: $(tail -2 "$tmp/ref.out")"
"$build/tools/ckpt_compare" "$d/checkpoint/checkpoint.json" "$tmp/ref/checkpoint.json" 0 >"$tmp/cmp.out" 2>&1 && ok ||
    bad "the job's weights differ from $d.alloc run by hand: $(tail -2 "$tmp/cmp.out")"

# ---- 2. a plan for the probed allocation: it matches, runs as emitted ----
e=$tmp/job2
"$build/wpgen" emit -t "$d/probe/allocation.json" -m tiny -s weipipe-interleave -o "$e" >"$tmp/emit2.out" 2>&1 ||
    { bad "emit from the job's probe: $(tail -2 "$tmp/emit2.out")"; exit 1; }
submit "$e"
grep -q "WPGEN_PROBE=1: the allocation's 2 node(s) (w1 w2) are the plan's (devices and their type; $e/probe/allocation.json, probed in [0-9]* s): running it as emitted" "$out" &&
    ! grep -q "re-planned" "$out" && [ ! -e "$e.alloc" ] && grep -q -- "-np 2 --rankfile $e/rankfile.slurm-" "$out" &&
    grep -q ": done$" "$out" && ok || bad "the matching allocation was not run as emitted: $(grep '^job.sbatch' "$out" | tail -3)"
echo "both jobs: $((SECONDS - t0)) s"
echo "slurm probe: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
