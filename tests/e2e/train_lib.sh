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

# A committed checkpoint is its model file: its metadata has the step and names its optimizer
# file (by content, so equal states saved under one file name are byte-identical).
st_meta() {   # FILE KEY
    python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); print(json.loads(b[8:8+struct.unpack("<Q",b[:8])[0]])["__metadata__"][sys.argv[2]])' "$1" "$2" 2>/dev/null
}
ckpt_step() { st_meta "$1" step; }
ckpt_opt() { local o; o=$(st_meta "$1" optimizer) && echo "$(dirname "$1")/$o"; }
same_ckpt() { cmp -s "$1" "$2" && cmp -s "$(ckpt_opt "$1")" "$(ckpt_opt "$2")"; }
