#!/usr/bin/env bash
# An emitted training program's checkpoints (issue 14): --steps 0 --save writes the initial model
# (it used to say "final weights FILE" and write nothing); a run resumed without --seed continues
# with the checkpoint's seed (it used to take the default, 1, and train on other synthetic data),
# and one resumed with another --seed says it ignores it; a checkpoint of a plan with replicated ends
# resumes in one without and back; a full disk during a save (a small tmpfs: root only) leaves the
# previous checkpoint whole, with one line naming the shard that could not be written, exit 1;
# --steps beyond an int is refused.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh

d=$tmp/plan
emit_tiny8 "$d" || { echo "FAIL: emit or build"; echo "0 passed, 1 failed"; exit 1; }
train=("${mpirun[@]}" -np 4 "$d/train")
mkdir -p "$tmp/s0" "$tmp/r0" "$tmp/a" "$tmp/b" "$tmp/c" "$tmp/e"

# --steps 0 --save: the initial model, the same as the reference trainer's
"${train[@]}" --synthetic --seed 5 --steps 0 --save "$tmp/s0/checkpoint.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 0 ] && [ -f "$tmp/s0/checkpoint.json" ] && ok || bad "--steps 0 --save: exit $rc, $(ls "$tmp/s0" | tr '\n' ' ')$(tail -2 "$tmp/out")"
"$build/wp-ref" -m "$model" --micro-batch-size 2 --micro-batches 8 --synthetic --seed 5 --steps 0 --save "$tmp/r0/checkpoint.json" >/dev/null 2>&1
"$build/tools/ckpt_compare" "$tmp/s0/checkpoint.json" "$tmp/r0/checkpoint.json" 0 >"$tmp/cmp" 2>&1 && ok || bad "--steps 0: not the reference's initial model: $(cat "$tmp/cmp")"

# resumed without --seed: the checkpoint's seed, so the same weights as a run straight through
common=(--synthetic --lr 2e-3 --warmup 1 --steps 4)
"${train[@]}" "${common[@]}" --seed 5 --save "$tmp/a/checkpoint.json" >"$tmp/out" 2>&1 || bad "straight: $(tail -2 "$tmp/out")"
"${train[@]}" "${common[@]}" --seed 5 --stop-at 2 --save "$tmp/b/checkpoint.json" >"$tmp/out" 2>&1 || bad "2 steps: $(tail -2 "$tmp/out")"
cp -r "$tmp/b/." "$tmp/c/"
"${train[@]}" "${common[@]}" --resume "$tmp/b/checkpoint.json" --save "$tmp/b/checkpoint.json" >"$tmp/out" 2>&1 || bad "resume: $(tail -2 "$tmp/out")"
same_ckpt "$tmp/a/checkpoint.json" "$tmp/b/checkpoint.json" && ok || bad "resumed without --seed: other weights than straight through (seed 1 instead of 5?)"
# resumed with another --seed: ignored, with a warning
"${train[@]}" "${common[@]}" --seed 9 --resume "$tmp/c/checkpoint.json" --save "$tmp/c/checkpoint.json" >"$tmp/out" 2>&1 || bad "resume --seed 9: $(tail -2 "$tmp/out")"
grep -q "warning: --seed 9 ignored: the run being resumed has seed 5" "$tmp/out" && ok || bad "no warning for --seed 9: $(head -3 "$tmp/out")"
same_ckpt "$tmp/a/checkpoint.json" "$tmp/c/checkpoint.json" && ok || bad "resumed with --seed 9: other weights than straight through"
# a checkpoint moves between a plan with the embedding and LM head replicated on every rank
# (--replicate-ends, written once) and one without, both ways: resumed, the same weights as the
# run straight through, up to the order in which the ends' gradients are summed
rd=$tmp/rplan
"$build/wpgen" emit -t topologies/cpu-2x2.json -m "$model" --micro-batch-size 2 -s weipipe-interleave --micro-batches 2 \
    --replicate-ends -o "$rd" >/dev/null && bash tests/make_emitted.sh "$rd" >/dev/null 2>&1 || bad "emit --replicate-ends"
rtrain=("${mpirun[@]}" -np 4 "$rd/train")
mkdir -p "$tmp/f" "$tmp/g"
"${rtrain[@]}" "${common[@]}" --seed 5 --stop-at 2 --save "$tmp/f/checkpoint.json" >"$tmp/out" 2>&1 || bad "replicated ends, 2 steps: $(tail -2 "$tmp/out")"
"${train[@]}" "${common[@]}" --resume "$tmp/f/checkpoint.json" --save "$tmp/f/checkpoint.json" >"$tmp/out" 2>&1 || bad "resumed without: $(tail -2 "$tmp/out")"
"$build/tools/ckpt_compare" "$tmp/f/checkpoint.json" "$tmp/a/checkpoint.json" 1e-4 >"$tmp/cmp" 2>&1 && ok ||
    bad "replicated ends' checkpoint resumed without them: $(tail -1 "$tmp/cmp")"
"${train[@]}" "${common[@]}" --seed 5 --stop-at 2 --save "$tmp/g/checkpoint.json" >"$tmp/out" 2>&1 || bad "2 steps: $(tail -2 "$tmp/out")"
"${rtrain[@]}" "${common[@]}" --resume "$tmp/g/checkpoint.json" --save "$tmp/g/checkpoint.json" >"$tmp/out" 2>&1 || bad "resumed with replicated ends: $(tail -2 "$tmp/out")"
"$build/tools/ckpt_compare" "$tmp/g/checkpoint.json" "$tmp/a/checkpoint.json" 1e-4 >"$tmp/cmp" 2>&1 && ok ||
    bad "checkpoint resumed with replicated ends: $(tail -1 "$tmp/cmp")"

# a checkpoint to resume that is not there: exit 2, one line
"${train[@]}" --synthetic --resume "$tmp/none.safetensors" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "train: $tmp/none.safetensors: No such file" "$tmp/out" && ok || bad "missing --resume: exit $rc: $(head -2 "$tmp/out")"
# --steps is counted in an int: 2^31 + 2 is refused, not wrapped
"${train[@]}" --synthetic --stop-at 1 --steps 2147483650 >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--steps: expected an integer in \[0, 2147483647\]" "$tmp/out" && ok || bad "--steps 2^31+2: exit $rc: $(head -2 "$tmp/out")"

# a full disk during a save: the previous checkpoint as it was (and resumable), one line naming
# the file, exit 1. A 2 MiB tmpfs holds one checkpoint of tiny8 (1.3 MB) but not a second.
fs=$tmp/fs
mkdir -p "$fs"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=2m tmpfs "$fs" 2>/dev/null; then
    trap 'umount "$fs" 2>/dev/null; rm -rf "$tmp"' EXIT
    "${train[@]}" "${common[@]}" --seed 5 --stop-at 2 --save "$fs/ckpt.json" >"$tmp/out" 2>&1 || bad "save to the tmpfs: $(tail -2 "$tmp/out")"
    cp -r "$fs" "$tmp/fs.before"
    "${train[@]}" "${common[@]}" --resume "$fs/ckpt.json" --save "$fs/ckpt.json" >"$tmp/out" 2>&1
    rc=$?
    n=$(grep -c "cannot save" "$tmp/out")
    [ $rc = 1 ] && [ "$n" = 1 ] && grep -q "train: step 4: cannot save the checkpoint: $fs/ckpt.shard.4.[0-9]*.[0-9a-f]*.safetensors: .*No space left on device" "$tmp/out" &&
        diff -r "$fs" "$tmp/fs.before" >/dev/null && ok || bad "full disk: exit $rc, $n lines: $(grep -v '^step' "$tmp/out" | head -3); $(diff -r "$fs" "$tmp/fs.before" | head -2)"
    mkdir -p "$tmp/after"
    "${train[@]}" "${common[@]}" --resume "$fs/ckpt.json" --save "$tmp/after/ckpt.json" >"$tmp/out" 2>&1 &&
        "$build/tools/ckpt_compare" "$tmp/after/ckpt.json" "$tmp/a/checkpoint.json" 0 >"$tmp/cmp" 2>&1 && ok ||
        bad "the checkpoint left by a full disk does not resume to the straight run: $(tail -2 "$tmp/out") $(cat "$tmp/cmp")"
    umount "$fs"
else
    echo "  full disk: skipped (mounting a tmpfs needs root)"
fi

echo "train checkpoints: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
