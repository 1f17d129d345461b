${P.first_hash}

This directory is a training program written out by wpgen: the plan below, verified, as one
fully unrolled training step per rank in C, plus the runtime it links against.

${P.summary}

Number formats: working weights, activations and their gradients in ${P.precision}; weight gradients
on the wire in ${P.grad_precision}; master weights, AdamW's moments and the gradient it reads in fp32.
@ if P.weight_wire ~= P.precision then
Working weights move between ranks in ${P.weight_wire} (--weight-wire) and are rounded on arrival.
@ end

Build and run
-------------

    make -j$(nproc)
    mpirun -np ${P.nranks} --rankfile rankfile ./train --synthetic --steps 10

On one machine, without the rankfile's host names (run.sh builds ./train, starts mpirun with the
flags it needs and turns SIGTERM or Ctrl-C into the ranks' stop-and-save; its top says how):

    ./run.sh --synthetic --steps 10

Other flags: --data SPEC (token shards from `wpgen data`, llm.c's, a list, a glob or their
directory; or a file read as bytes), --no-shuffle, --val-data SPEC, --val-every N, --lr, --min-lr,
--schedule, --decay-fraction, --warmup, --beta1, --beta2, --eps, --weight-decay, --clip, --seed,
--init FILE, --save DIR/checkpoint.json (a shard per rank beside it: DIR must be shared by all
ranks), --save-every N, --keep N, --resume DIR/checkpoint.json [--allow-batch-change], --log FILE,
--trace FILE.json (./train --help says them all).
./train refuses to run with a world size other than ${P.nranks}.
@ if P.backend == "cuda" then

Backends: compute cuda (bf16 on GPUs: rank i of a node uses its GPU i mod the GPUs it has;
`make CUDA_HOME=...` names the toolkit, `make CUDA_ARCH=...` other GPUs than sm_80 and sm_90),
@   if P.comm == "nccl" then
communication nccl (NCCL between the GPUs, started over MPI: as many ranks per node as GPUs).
@   else
communication ${P.comm} (every transfer staged through host memory: several ranks may share one
GPU, for tests, not for speed).
@   end
Each rank prints at start what it reserved on its GPU; without a GPU, or when the plan does not
fit, ./train stops at start with exit status 5.
@ end

Files
-----

    ${fmt("%-20s", "rank_" .. string.rep("N", P.width) .. ".c")}the step of one rank, turn by turn: one call per operation, commented
                        with the strategy line that added it (plan.h says how to read them)
    plan.h, plan_desc.c the plan's tables for the runtime: buffers, chunks, owners, groups
    main.c              int main() { return wp_main(...); }
    schedule.txt        every rank's turns, one line each (the notation is at its top)
    plan.json           the whole plan: model, chunks, owners, groups, buffers, operations
    rankfile            Open MPI rankfile: which node and slot runs which rank
    run.sh              the launch on this machine: ./run.sh TRAIN-FLAGS... (its top says what it does)
    job.sbatch          the Slurm batch script: sbatch job.sbatch TRAIN-FLAGS... (its top says what it does)
    runtime/            the wpgen runtime: model, communication, optimizer, data, checkpoints

Generated files start with the line above; regenerate with wpgen rather than editing them.
