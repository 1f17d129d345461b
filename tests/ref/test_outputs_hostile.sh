#!/usr/bin/env bash
# A trainer's outputs against what the run reads and owns, as a careless or hostile user gives
# them (issue 38: H1-H3 and two of its low ones), wp-ref standing for every trainer
# (runtime/train/trainflags.c's check_paths, ckpt_owner.c's run id):
# - the data are the files a --data/--val-data spec expands to (a directory, a glob, a comma list;
#   and beside them the files `wpgen data` wrote), not the spec's string;
# - a checkpoint's names (its kept steps DIR/STEM.STEP.json of any step, its lock) are its own:
#   no --log or --trace may take one, however spelled;
# - a save replaces or prunes only manifests of its own run (the run id in each one): another
#   run's kept steps stay, a new run over another run's checkpoint is refused (exit 2, saying how
#   to go on); the same run resumed goes on pruning its own.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
ref=("$build/wp-ref" -m tiny --seq 16 --micro-batch-size 1)

# a `wpgen data` folder by hand: two llm.c uint16 shards, its tokenizer.json and .wpgen-data
mkdir -p "$tmp/d"
python3 - "$tmp/d" <<'PY'
import struct, sys
for name in ("train-00000.bin", "val-00000.bin"):
    n = 400
    h = [0] * 256; h[0], h[1], h[2] = 20240520, 1, n
    open(f"{sys.argv[1]}/{name}", "wb").write(struct.pack("<256i", *h) + struct.pack(f"<{n}H", *[(i * 7) % 200 for i in range(n)]))
open(f"{sys.argv[1]}/tokenizer.json", "w").write('{"model": {}}\n')
open(f"{sys.argv[1]}/.wpgen-data", "w").write('{"files": ["train-00000.bin", "val-00000.bin"]}\n')
PY
shard=$tmp/d/train-00000.bin

# H1: the files a spec expands to are inputs, by inode
expect_refused "--log $shard is a file of --data" "$shard" -- "${ref[@]}" --steps 1 --data "$tmp/d" --log "$shard"
expect_refused "--trace $shard is a file of --data" "$shard" -- "${ref[@]}" --steps 1 --data "$tmp/d/train-*.bin" --trace "$shard"
ln "$shard" "$tmp/hard.bin"
expect_refused "is a file of --data" "$shard" -- "${ref[@]}" --steps 1 --data "$tmp/d/val-00000.bin,$tmp/d" --log "$tmp/hard.bin"
expect_refused "is a file of --val-data" "$tmp/d/val-00000.bin" -- "${ref[@]}" --steps 1 --synthetic --val-data "$tmp/d/val-*.bin" \
    --log "$tmp/d/../d/val-00000.bin"
# low: the files `wpgen data` wrote beside the shards, and a checkpoint's lock
expect_refused "--log $tmp/d/tokenizer.json is a file of --data's folder" "$tmp/d/tokenizer.json" -- \
    "${ref[@]}" --steps 1 --data "$tmp/d" --log "$tmp/d/tokenizer.json"
expect_refused "--trace $tmp/d/.wpgen-data is a file of --data's folder" "$tmp/d/.wpgen-data" -- \
    "${ref[@]}" --steps 1 --data "$tmp/d" --trace "$tmp/d/.wpgen-data"
mkdir -p "$tmp/lk"
"${ref[@]}" --steps 1 --synthetic --save "$tmp/lk/c.json" >/dev/null 2>&1 || bad "save c.json"
expect_refused "--log $tmp/lk/c.lock is also --save's lock" "$tmp/lk/c.json" -- "${ref[@]}" --steps 1 --synthetic \
    --save "$tmp/lk/c.json" --log "$tmp/lk/c.lock"

# H3: an output under a name a kept step of the run's own checkpoint would take, refused at start
mkdir -p "$tmp/h3"
"${ref[@]}" --synthetic --steps 2 --save-every 1 --save "$tmp/h3/run.json" >/dev/null 2>&1 || bad "save h3"
expect_refused "--trace $tmp/h3/run.2.json is a file --save $tmp/h3/run.json writes or owns (its checkpoint of step 2" \
    "$tmp/h3/run.2.json" -- "${ref[@]}" --synthetic --steps 3 --save-every 1 --resume "$tmp/h3/run.json" \
    --save "$tmp/h3/run.json" --trace "$tmp/h3/run.2.json"
expect_refused "--log $tmp/h3/../h3/run.7.json is a file --save" "$tmp/h3/run.json" -- \
    "${ref[@]}" --synthetic --steps 3 --resume "$tmp/h3/run.json" --save "$tmp/h3/run.json" --log "$tmp/h3/../h3/run.7.json"
[ ! -e "$tmp/h3/run.7.json" ] && [ ! -e "$tmp/h3/run.3.json" ] && ok || bad "a refused run wrote into $tmp/h3: $(ls "$tmp/h3")"
ln -s h3/run.1.json "$tmp/link.json"
expect_refused "is a file --save $tmp/h3/run.json writes or owns (the same file as $tmp/h3/run.1.json)" "$tmp/h3/run.1.json" -- \
    "${ref[@]}" --synthetic --steps 3 --resume "$tmp/h3/run.json" --save "$tmp/h3/run.json" --log "$tmp/link.json"

# H2: another run's kept steps are neither replaced nor pruned. Run A keeps steps 1-3; its
# latest moved away, run B (another seed) saving the same name is refused at its start: it would
# write run.2.json and run.3.json, A's
mkdir -p "$tmp/k"
"${ref[@]}" --synthetic --steps 3 --save-every 1 --save "$tmp/k/run.json" >/dev/null 2>&1 || bad "run A"
mv "$tmp/k/run.json" "$tmp/a-latest.json"
expect_refused "is the checkpoint of step" "$tmp/k/run.2.json" -- "${ref[@]}" --synthetic --seed 5 --steps 3 --save-every 1 \
    --keep 2 --save "$tmp/k/run.json"
[ -e "$tmp/k/run.1.json" ] && [ ! -e "$tmp/k/run.json" ] && ok || bad "run B changed run A's folder: $(ls "$tmp/k")"
# ... and a run C that goes on from step 2 of its own (another folder) keeps A's run.1.json and
# its shard, whatever --keep 2 says, while pruning its own
mkdir -p "$tmp/c"
"${ref[@]}" --synthetic --seed 9 --steps 6 --stop-at 2 --save "$tmp/c/c.json" >/dev/null 2>&1 || bad "run C"
rm "$tmp/k/run.2.json" "$tmp/k/run.3.json"
a1=$(sum "$tmp/k/run.1.json")
"${ref[@]}" --synthetic --seed 9 --steps 6 --save-every 1 --keep 2 --resume "$tmp/c/c.json" --save "$tmp/k/run.json" \
    >"$tmp/out" 2>&1 || bad "run C resumed into A's folder: $(tail -2 "$tmp/out")"
kept=$(cd "$tmp/k" && ls run.*.json | tr '\n' ' ')
[ "$kept" = "run.1.json run.5.json run.6.json " ] && [ "$(sum "$tmp/k/run.1.json")" = "$a1" ] &&
    [ -n "$(ls "$tmp"/k/run.shard.1.0.*.safetensors 2>/dev/null)" ] && ok ||
    bad "run C's --keep 2 pruned run A's step 1 (or kept too many of its own): $kept$(ls "$tmp/k" | grep -c shard.1.) shards of step 1"
"${ref[@]}" --synthetic --steps 1 --init "$tmp/k/run.1.json" >"$tmp/out" 2>&1 && ok || bad "A's step 1 after C: $(tail -1 "$tmp/out")"

# the same run resumed is the same run: it goes on pruning its own kept steps (its id carried
# from the checkpoint), also with another --lr
mkdir -p "$tmp/r"
"${ref[@]}" --synthetic --steps 6 --stop-at 3 --save-every 1 --keep 2 --save "$tmp/r/run.json" >/dev/null 2>&1 || bad "run R"
"${ref[@]}" --synthetic --steps 6 --lr 2e-3 --save-every 1 --keep 2 --resume "$tmp/r/run.json" --save "$tmp/r/run.json" \
    >"$tmp/out" 2>&1 || bad "run R resumed: $(tail -2 "$tmp/out")"
kept=$(cd "$tmp/r" && ls run.*.json | tr '\n' ' ')
[ "$kept" = "run.5.json run.6.json " ] && ok || bad "a resumed run did not prune its own kept steps: $kept"
[ "$(grep -c '"run"' "$tmp/r/run.json")" = 1 ] && [ "$(grep '"run"' "$tmp/r/run.json")" = "$(grep '"run"' "$tmp/r/run.5.json")" ] &&
    ok || bad "the manifests do not record one run id"

# low: a new run over another run's checkpoint is refused (exit 2, how to go on), the checkpoint
# as it was; the same run again (same flags: the same bytes) and --resume are not
mkdir -p "$tmp/f"
"${ref[@]}" --synthetic --steps 2 --save "$tmp/f/checkpoint.json" >/dev/null 2>&1 || bad "run F"
expect_refused "--save $tmp/f/checkpoint.json holds the checkpoint of another run (step 2" "$tmp/f/checkpoint.json" -- \
    "${ref[@]}" --synthetic --steps 2 --lr 5e-3 --save "$tmp/f/checkpoint.json"
grep -qF -- "save into a new path, or --resume $tmp/f/checkpoint.json" "$tmp/out" && ok || bad "no way on: $(head -1 "$tmp/out")"
cp "$tmp/f/checkpoint.json" "$tmp/f.before"
"${ref[@]}" --synthetic --steps 2 --save "$tmp/f/checkpoint.json" >"$tmp/out" 2>&1 && cmp -s "$tmp/f/checkpoint.json" "$tmp/f.before" &&
    ok || bad "the same run again: $(tail -1 "$tmp/out")"
"${ref[@]}" --synthetic --steps 3 --resume "$tmp/f/checkpoint.json" --save "$tmp/f/checkpoint.json" >"$tmp/out" 2>&1 &&
    ok || bad "resume over its own checkpoint: $(tail -1 "$tmp/out")"

echo "test_outputs_hostile: $pass checks passed, $fail failed"
[ $fail = 0 ]
