#!/usr/bin/env bash
# No output of a trainer may name one of its inputs or another output (runtime/common/outpaths.c,
# called by train_flags_parse for wp-ref and every emitted train): exit 2 at start, nothing
# written, the input byte for byte as it was; by inode, so hard and symbolic links are caught.
# Also what else a trainer takes from outside: OMP_NUM_THREADS checked as a flag, SIGHUP a stop
# with a checkpoint (exit 4), the process keeps its name through the re-exec.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
ref=("$build/wp-ref" -m tiny --seq 16 --micro-batch-size 1 --steps 2)
ref3=("$build/wp-ref" -m tiny --seq 16 --micro-batch-size 1 --steps 3)   # a flag is given once
printf 'the quick brown fox jumps over the lazy dog, again and again and again.\n%.0s' {1..20} >"$tmp/d.bin"

# the data
expect_refused "--log $tmp/d.bin is --data" "$tmp/d.bin" -- "${ref[@]}" --data "$tmp/d.bin" --log "$tmp/d.bin"
expect_refused "--trace $tmp/d.bin is --data" "$tmp/d.bin" -- "${ref[@]}" --data "$tmp/d.bin" --trace "$tmp/d.bin"
ln "$tmp/d.bin" "$tmp/hard.bin"; ln -s d.bin "$tmp/soft.bin"
expect_refused "is --data" "$tmp/d.bin" -- "${ref[@]}" --data "$tmp/d.bin" --log "$tmp/hard.bin"
expect_refused "is --data" "$tmp/d.bin" -- "${ref[@]}" --data "$tmp/soft.bin" --trace "$tmp/./d.bin"
# a checkpoint: the manifest --init and --resume read, and its shards
mkdir -p "$tmp/c"
"${ref[@]}" --synthetic --save "$tmp/c/checkpoint.json" >/dev/null 2>&1 || bad "save a checkpoint"
opt=$(ls "$tmp"/c/checkpoint.shard.*.safetensors | head -1)
expect_refused "--log $tmp/c/checkpoint.json is --init" "$tmp/c/checkpoint.json" -- "${ref[@]}" --synthetic --init "$tmp/c/checkpoint.json" --log "$tmp/c/checkpoint.json"
expect_refused "is --resume " "$tmp/c/checkpoint.json" -- "${ref3[@]}" --synthetic --resume "$tmp/c/checkpoint.json" --trace "$tmp/c/checkpoint.json"
expect_refused "is a file of --resume" "$opt" -- "${ref3[@]}" --synthetic --resume "$tmp/c/checkpoint.json" --log "$opt"
# the model's config.json and the program itself
cp tests/data/tiny8/config.json "$tmp/cfg.json"
expect_refused "is -m" "$tmp/cfg.json" -- "$build/wp-ref" -m "$tmp/cfg.json" --steps 1 --synthetic --log "$tmp/cfg.json"
cp "$build/wp-ref" "$tmp/wp-ref"
expect_refused "is the program" "$tmp/wp-ref" -- "$tmp/wp-ref" -m tiny --steps 1 --synthetic --trace "$tmp/wp-ref"
# outputs against each other, before anything is written
expect_refused "each output needs a file of its own" "$tmp/d.bin" -- "${ref[@]}" --synthetic --log "$tmp/x.json" --trace "$tmp/x.json"
[ ! -e "$tmp/x.json" ] && ok || bad "a refused run wrote $tmp/x.json"
mkdir -p "$tmp/y"
expect_refused "each output needs a file of its own" "$tmp/d.bin" -- "${ref[@]}" --synthetic --save "$tmp/y/checkpoint.json" --log "$tmp/y/checkpoint.json"
expect_refused "each output needs a file of its own" "$tmp/d.bin" -- "${ref[@]}" --synthetic --save "$tmp/y/checkpoint.json" --trace "$tmp/y/config.json"
[ -z "$(ls -A "$tmp/y")" ] && ok || bad "a refused save wrote into $tmp/y: $(ls "$tmp/y")"
# an output where it cannot be written is found at start, not after training
expect_refused "--trace $tmp/nodir/t.json: its directory" "$tmp/d.bin" -- "${ref[@]}" --synthetic --trace "$tmp/nodir/t.json"
expect_refused "--log $tmp/c: is a directory" "$tmp/d.bin" -- "${ref[@]}" --synthetic --log "$tmp/c"
# what may be shared: a resume saving over its own checkpoint, /dev/null for both notes
"${ref3[@]}" --synthetic --resume "$tmp/c/checkpoint.json" --save "$tmp/c/checkpoint.json" >"$tmp/out" 2>&1 &&
    ok || bad "resume saving over its own checkpoint: $(tail -2 "$tmp/out")"
"${ref[@]}" --synthetic --log /dev/null --trace /dev/null >"$tmp/out" 2>&1 && ok || bad "/dev/null twice: $(tail -2 "$tmp/out")"
[ -c /dev/null ] && ok || bad "the trace replaced /dev/null with a $(stat -c %F /dev/null)"
# the trace's temporary is a name of its own, never a file of the user's
echo mine >"$tmp/t.json.tmp"
"${ref[@]}" --synthetic --trace "$tmp/t.json" >"$tmp/out" 2>&1 && [ "$(cat "$tmp/t.json.tmp")" = mine ] &&
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/t.json" && ok || bad "trace beside a user's t.json.tmp"
# the trace is written as it goes: 200 steps hold every span (2 per micro-batch and the
# optimizer's, per step), none of them buffered in memory (its trace_buffer event)
"$build/wp-ref" -m tiny --seq 16 --micro-batch-size 1 --micro-batches 2 --steps 200 --synthetic --trace "$tmp/long.json" >"$tmp/out" 2>&1 &&
    python3 - "$tmp/long.json" <<'PY' && ok || bad "wp-ref's long trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in ev if e["ph"] == "X"]
buf = [e["args"] for e in ev if e["name"] == "trace_buffer"]
assert len(spans) == 200 * 5 and buf == [{"events": 1000, "most_buffered": 0}], (len(spans), buf)
assert [e["args"]["step"] for e in spans if e["name"] == "optimizer"] == list(range(1, 201))
PY

# one checkpoint, one saving run: a second run saving it is refused at its start, the first
# goes on; one folder, one model: another model's checkpoint is not saved beside it
mkdir -p "$tmp/l"
"$build/wp-ref" -m tiny --synthetic --steps 100000 --save "$tmp/l/checkpoint.json" >"$tmp/l1.out" 2>&1 &
first=$!
for _ in $(seq 600); do grep -q '^step' "$tmp/l1.out" 2>/dev/null && break; sleep 0.1; done
"${ref[@]}" --synthetic --save "$tmp/l/checkpoint.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "another run (pid $first) is saving this checkpoint" "$tmp/out" && kill -0 $first 2>/dev/null && ok ||
    bad "a second run saving one checkpoint: exit $rc: $(head -2 "$tmp/out")"
kill -TERM $first; wait $first
# (its checkpoint is the first run's: going on with that run, one step past where it stopped)
at=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["step"])' "$tmp/l/checkpoint.json")
"$build/wp-ref" -m tiny --synthetic --steps 100000 --stop-at $((at + 1)) --resume "$tmp/l/checkpoint.json" --save "$tmp/l/checkpoint.json" \
    >"$tmp/out" 2>&1 && ok || bad "saving once the first run ended: $(head -2 "$tmp/out")"
"$build/wp-ref" -m tests/data/tiny8/config.json --seq 16 --steps 1 --synthetic --save "$tmp/l/other.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "config.json describes another model (hidden_size 64, 4 layers" "$tmp/out" && [ ! -e "$tmp/l/other.json" ] && ok ||
    bad "another model saved into the folder of a checkpoint: exit $rc: $(head -2 "$tmp/out")"

# OMP_NUM_THREADS is input: named, exit 2
for v in 999999 abc 0 "4,x"; do
    OMP_NUM_THREADS=$v "${ref[@]}" --synthetic >"$tmp/out" 2>&1
    rc=$?
    [ $rc = 2 ] && grep -q "OMP_NUM_THREADS=$v: expected a positive integer" "$tmp/out" && ok || bad "OMP_NUM_THREADS=$v: exit $rc: $(head -2 "$tmp/out")"
done
OMP_NUM_THREADS=1,1 "${ref[@]}" --synthetic >"$tmp/out" 2>&1 && ok || bad "OMP_NUM_THREADS=1,1 refused: $(head -2 "$tmp/out")"

# a long run: its name in ps is its own (the re-exec that sets OMP_WAIT_POLICY keeps it), and
# SIGHUP stops it at a step boundary with a checkpoint that resumes (exit 4)
unset OMP_NUM_THREADS OMP_WAIT_POLICY
mkdir -p "$tmp/h"
"$build/wp-ref" -m tiny --synthetic --steps 100000 --save "$tmp/h/checkpoint.json" >"$tmp/hup.out" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q '^step' "$tmp/hup.out" 2>/dev/null && break; sleep 0.1; done
name=$(cat /proc/$pid/comm 2>/dev/null)
[ "$name" = wp-ref ] && ok || bad "the process is called \"$name\" in ps, not wp-ref"
kill -HUP $pid
wait $pid
rc=$?
[ $rc = 4 ] && grep -q SIGHUP "$tmp/hup.out" && [ -f "$tmp/h/checkpoint.json" ] && ok || bad "SIGHUP: exit $rc (want 4): $(tail -2 "$tmp/hup.out")"

echo "test_outputs: $pass checks passed, $fail failed"
[ $fail = 0 ]
