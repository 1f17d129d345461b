# Shared by the tests of emitted training programs (test_train, test_train_ckpt, test_kill):
# sourced after `build=...; cd` to the repository. A temporary directory, mpirun's flags, the
# pass/fail counters, the small plan they all train, and what a committed checkpoint says.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
model=tests/data/tiny8/config.json
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# weipipe-interleave on cpu-2x2 with the tiny8 model, emitted into DIR and built
emit_tiny8() {   # DIR
    "$build/wpgen" emit -t topologies/cpu-2x2.json -m "$model" --micro-batch-size 2 -s weipipe-interleave --micro-batches 2 \
        -o "$1" >/dev/null && make -s -j2 -C "$1" >/dev/null 2>&1
}

# what a committed checkpoint says: ckpt_step, ckpt_shards, same_ckpt, ckpt_poke
source tests/ckpt.sh
