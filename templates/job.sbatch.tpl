#!/bin/bash
${P.first_hash}
${P.header_hash}
#
# The Slurm batch script of this plan: `sbatch job.sbatch TRAIN-FLAGS...` (from this directory or
# any other), e.g. `sbatch job.sbatch --data corpus/ --steps 10000`. What it does, in order:
#   0. with WPGEN_PROBE=1 (off by default: a job step), probes the allocation's nodes and, where
#      they are not the plan's (node count, devices per node, device type), plans again for them
#      first (wpgen replan -t, into this directory's name + .alloc): docs/cluster.md, section 6;
#   1. builds ./train once per job (make; nothing to do when it is up to date);
#   2. launches the ${P.nranks} ranks, in the plan's order (rank r on the plan's node r / ranks per
#      node), one task per rank: srun --mpi=pmix where Slurm has PMIx, else mpirun with a rankfile
#      made from the allocation's nodes (WPGEN_LAUNCH=srun or mpirun chooses);
#   3. saves a checkpoint every WPGEN_SAVE_EVERY steps (default 100) and resumes from it when one is
#      there, so a requeued job goes on where it stopped, with the exact data position;
#   4. on Slurm's warning signal before the time limit (--signal=B:USR1@120 below: 120 s), tells the
#      ranks to stop after the step under way: they save and exit 4, and the job requeues itself;
#   5. when a node is lost (the run fails and Slurm marks the node down; --no-kill keeps the
#      allocation), plans again for the nodes left (wpgen replan --without; with WPGEN_PROBE=1 a
#      probe of them and wpgen replan -t), builds that plan and
#      resumes it from the last checkpoint, at most WPGEN_MAX_REPLANS (2) times: docs/cluster.md,
#      section 5.
# Change the #SBATCH lines below or give the same options to sbatch (they win), e.g.
# `sbatch --time=2-00:00:00 --signal=B:USR1@600 job.sbatch ...`.
#
@ local per, uniform = 0, true
@ local count = {}
@ for _, d in ipairs(ranks) do count[d.node] = (count[d.node] or 0) + 1 end
@ for n = 0, P.nnodes - 1 do
@   local c = count[n] or 0
@   if c > per then per = c end
@   if n > 0 and c ~= (count[0] or 0) then uniform = false end
@ end
#SBATCH --job-name=${sbatch_value("wpgen-" .. P.strategy)}
#SBATCH --nodes=${sbatch_value(P.nnodes)}
#SBATCH --ntasks=${sbatch_value(P.nranks)}
@ if uniform then
#SBATCH --ntasks-per-node=${sbatch_value(per)}
@ end
@ if P.backend == "cuda" then
#SBATCH --gpus-per-task=1
@ end
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --no-kill
#SBATCH --open-mode=append
#SBATCH --output=slurm-%x-%j.out

# the plan's shape, which the allocation must match, and its nodes' names in the topology (the
# allocation's i-th node runs the plan's i-th); plan_hash is for the reader
# shellcheck disable=SC2034
plan_ranks=${P.nranks} plan_nodes=${P.nnodes} plan_hash=${P.hash}
plan_node_names=(${P.nodes_sh})
# the wpgen that emitted this directory, which re-plans for the survivors when a node is lost
# (WPGEN_BIN names another)
wpgen=${P.wpgen_sh}
# where it ran: the paths of plan.json's "command" (-m, --calibration) are from there
emit_cwd=${P.cwd_sh}
