# The set-up of the MPI tests (sourced, with build set and the program's name in prog): bin, the
# test program in BUILD/tests-mpi (built by make); mpi, mpirun as every test runs it
# (--oversubscribe, and --allow-run-as-root as root); tmp, a folder removed at exit; failed=0.
bin=$build/tests-mpi/$prog
[ -x "$bin" ] || { echo "missing $bin: run make first"; exit 1; }
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
