#!/bin/bash
${P.first_hash}
${P.header_hash}
#
# Starts this plan's ${P.nranks} ranks on this machine: `./run.sh TRAIN-FLAGS...` (from any directory),
# e.g. `./run.sh --synthetic --steps 100 --save ckpt/checkpoint.json`. What it does:
#   1. builds ./train (make; nothing to do when it is up to date; the log in build.log);
#   2. runs `mpirun -np ${P.nranks} --oversubscribe --bind-to none` (and --allow-run-as-root as root)
#      with WPGEN_MPIRUN_FLAGS' words after them (e.g. "--rankfile rankfile" for the plan's hosts),
#      in a session of its own, so that a signal to this script's process group (Ctrl-C,
#      timeout(1)) reaches the ranks only through this script. --oversubscribe: each rank sizes its
#      threads itself (the node's cores over its ranks, or OMP_NUM_THREADS when set), so Open MPI's
#      slots (cores, not hardware threads) are no limit; --bind-to none: so that each rank may use
#      the cores it counts;
#   3. turns SIGTERM, SIGINT and SIGHUP sent to it into the ranks' stop-and-save: it sends mpirun
#      SIGUSR1, which mpirun passes on to the ranks; they finish the step under way, save (with
#      --save) and exit 4. The same signal again within 2 s counts once (timeout(1) signals this
#      script and then its process group); a later one ends the ranks at once. mpirun's own
#      answer to SIGTERM would kill the ranks a second later, the step and its save lost;
#   4. exits with the trainer's status (README's table: 0 done, 2 bad input, 4 stopped by a signal).
# Emitted by `wpgen run` (run.json beside this file records it), `./run.sh` without flags runs
# train with the flags that run resolved to, from the directory it ran in (run_args below).
# Under Slurm use job.sbatch instead.
ranks=${P.nranks}
# wpgen run's train flags and WPGEN_MPIRUN_FLAGS (empty: emitted by wpgen emit), and where it ran
run_args=(${P.run_args_sh}) run_mpirun_flags=${P.run_mpirun_flags_sh}
run_cwd=${P.run_cwd_sh}
