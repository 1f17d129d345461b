#!/usr/bin/env bash
# Resume is exact: 10 steps in one run equal 5 steps, a checkpoint, a resume and 5 more, bit for
# bit (model and optimizer files compared byte by byte, and the losses of steps 6-10). The first
# half stops with --stop-at 5, as an interrupted job would: the schedule still aims at --steps 10.
set -euo pipefail
build=${1:-build}
ref=$build/wp-ref
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/one" "$tmp/two"
# (a flag is given once: common0 without --steps, for the runs that give their own)
common0=(-m tiny --synthetic --seq 32 --micro-batch-size 2 --micro-batches 3 --seed 7 --lr 3e-3 --warmup 3 --weight-decay 0.1 --clip 0.5)
common=("${common0[@]}" --steps 10)

"$ref" "${common[@]}" --save "$tmp/one/checkpoint.json" --log "$tmp/one.log" >"$tmp/one.out"
"$ref" "${common[@]}" --stop-at 5 --save "$tmp/two/checkpoint.json" --log "$tmp/two.log" >"$tmp/two-a.out"
grep -q '"step":5,' "$tmp/two.log" || { echo "FAIL: the first half did not stop at step 5"; exit 1; }
grep -q '"step":6,' "$tmp/two.log" && { echo "FAIL: the first half ran past step 5"; exit 1; }
cp "$tmp/two/checkpoint.json" "$tmp/step5.json"
"$ref" "${common[@]}" --resume "$tmp/two/checkpoint.json" --save "$tmp/two/checkpoint.json" \
    --log "$tmp/two.log" >"$tmp/two-b.out"
grep -q 'resuming from .* at step 5' "$tmp/two-b.out" || { echo "FAIL: no resume message"; cat "$tmp/two-b.out"; exit 1; }

# The same per-step lines (loss, lr, norm), and the same checkpoint bytes.
strip() { sed -E 's/,"ms":.*//' "$1"; }
if ! diff <(strip "$tmp/one.log") <(strip "$tmp/two.log"); then
    echo "FAIL: the resumed run's steps differ from the uninterrupted run's"; exit 1
fi
# The same files (manifest, config.json, the one shard the manifest names: its name holds the
# step and a hash of its content), byte for byte; the interrupted run's folder also keeps the
# checkpoint of step 5 (--keep's default is all: its manifest as checkpoint.5.json, and its shard).
if ! diff <(ls "$tmp/one") <(ls "$tmp/two" | grep -v -e '^checkpoint\.5\.json$' -e '^checkpoint\.shard\.5\.'); then
    echo "FAIL: the checkpoints' files differ"; exit 1; fi
[ -f "$tmp/two/checkpoint.5.json" ] && [ -f "$tmp/two/checkpoint.10.json" ] && [ "$(ls "$tmp/two" | grep -c '\.shard\.')" = 2 ] ||
    { echo "FAIL: the default --keep (all) did not keep both checkpoints: $(ls "$tmp/two" | tr '\n' ' ')"; exit 1; }
[ "$(ls "$tmp/one" | grep -c '^checkpoint\.shard\.10\.0\.[0-9a-f]*\.safetensors$')" = 1 ] || { echo "FAIL: no shard of step 10: $(ls "$tmp/one")"; exit 1; }
for f in $(ls "$tmp/one"); do
    cmp "$tmp/one/$f" "$tmp/two/$f" || { echo "FAIL: $f differs after resume"; exit 1; }
done
# The run did train: the checkpoint of step 5 is not that of step 10.
if cmp -s "$tmp/step5.json" "$tmp/one/checkpoint.json"; then echo "FAIL: weights did not change"; exit 1; fi

# Resuming a finished run does nothing and succeeds.
"$ref" "${common[@]}" --resume "$tmp/one/checkpoint.json" >"$tmp/done.out"
grep -q 'no step to run' "$tmp/done.out" || { echo "FAIL: resume past --steps"; exit 1; }

# --steps 0 --save writes the initial model; training from it with --init is the same run.
mkdir -p "$tmp/three"
"$ref" "${common0[@]}" --steps 0 --save "$tmp/init.json" >/dev/null
"$ref" "${common[@]}" --init "$tmp/init.json" --save "$tmp/three/checkpoint.json" >/dev/null
# (the manifests but for the run's id: a run from --init is a run of its own, checkpoint.h)
norun() { grep -v '^ "run": ' "$1"; }
cmp <(norun "$tmp/one/checkpoint.json") <(norun "$tmp/three/checkpoint.json") || { echo "FAIL: --init of the initial model differs"; exit 1; }
grep -q '^ "run": ' "$tmp/three/checkpoint.json" || { echo "FAIL: the manifest records no run id"; exit 1; }
# The data position: a resume goes on from the checkpoint's data_seq. Another global batch is
# refused (exit 2, nothing written) unless --allow-batch-change, which goes on from data_seq with
# the new batch: the next checkpoint's data_seq is the old one plus what the new steps read.
seq_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["data_seq"])' "$1"; }
mkdir -p "$tmp/four"
shape=(-m tiny --synthetic --seed 7)
small=("${shape[@]}" --seq 16 --steps 8)
"$ref" "${small[@]}" --micro-batch-size 1 --micro-batches 2 --stop-at 2 --save "$tmp/four/checkpoint.json" >/dev/null
[ "$(seq_of "$tmp/four/checkpoint.json")" = 4 ] || { echo "FAIL: data_seq after 2 steps of 2 sequences: $(seq_of "$tmp/four/checkpoint.json")"; exit 1; }
cp "$tmp/four/checkpoint.json" "$tmp/four.before"
rc=0
"$ref" "${small[@]}" --micro-batch-size 1 --micro-batches 3 --resume "$tmp/four/checkpoint.json" --save "$tmp/four/checkpoint.json" >"$tmp/batch.out" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "the checkpoint's run read 2 x 1 sequences of 16 tokens per step (micro-batches x micro-batch size), this run 3 x 1 of 16" "$tmp/batch.out" &&
    cmp -s "$tmp/four/checkpoint.json" "$tmp/four.before" || { echo "FAIL: another batch not refused: exit $rc: $(head -2 "$tmp/batch.out")"; exit 1; }
rc=0
"$ref" "${shape[@]}" --steps 8 --seq 8 --micro-batch-size 1 --micro-batches 2 --resume "$tmp/four/checkpoint.json" >"$tmp/batch.out" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "this run 2 x 1 of 8" "$tmp/batch.out" || { echo "FAIL: another --seq not refused: $(head -2 "$tmp/batch.out")"; exit 1; }
# the same global batch cut otherwise (M and G traded) is the same data: accepted
"$ref" "${small[@]}" --micro-batch-size 2 --micro-batches 1 --stop-at 3 --resume "$tmp/four/checkpoint.json" --save "$tmp/four/checkpoint.json" >"$tmp/batch.out" 2>&1 &&
    [ "$(seq_of "$tmp/four/checkpoint.json")" = 6 ] || { echo "FAIL: M x G traded: $(tail -2 "$tmp/batch.out")"; exit 1; }
"$ref" "${small[@]}" --micro-batch-size 1 --micro-batches 3 --stop-at 5 --allow-batch-change --resume "$tmp/four/checkpoint.json" \
    --save "$tmp/four/checkpoint.json" >"$tmp/batch.out" 2>&1 || { echo "FAIL: --allow-batch-change: $(tail -2 "$tmp/batch.out")"; exit 1; }
# 6 sequences read, then 2 steps of 3: 12 (counting from the step, 5 x 3 = 15, would replay or skip)
[ "$(seq_of "$tmp/four/checkpoint.json")" = 12 ] || { echo "FAIL: data_seq after --allow-batch-change: $(seq_of "$tmp/four/checkpoint.json"), want 12"; exit 1; }
# a new --seq: the first sequence past the 12 x 16 tokens read, 24 of 8 tokens, then 2 steps of 3
"$ref" "${shape[@]}" --steps 8 --seq 8 --micro-batch-size 1 --micro-batches 3 --stop-at 7 --allow-batch-change --resume "$tmp/four/checkpoint.json" \
    --save "$tmp/four/checkpoint.json" >"$tmp/batch.out" 2>&1 && [ "$(seq_of "$tmp/four/checkpoint.json")" = 30 ] ||
    { echo "FAIL: --allow-batch-change with --seq 8: $(seq_of "$tmp/four/checkpoint.json"), want 30: $(tail -2 "$tmp/batch.out")"; exit 1; }
# --keep 2: the last two checkpoints stay, each resumable by its name; resuming the older one
# lands on the newer, byte for byte
mkdir -p "$tmp/keep" "$tmp/again"
"$ref" "${shape[@]}" --seq 16 --micro-batch-size 1 --steps 4 --save "$tmp/keep/checkpoint.json" --save-every 1 --keep 2 >/dev/null
[ "$(ls "$tmp/keep" | grep -c '^checkpoint\.[0-9]*\.json$')" = 2 ] && [ -f "$tmp/keep/checkpoint.3.json" ] &&
    [ "$(ls "$tmp/keep" | grep -c '\.shard\.')" = 2 ] || { echo "FAIL: --keep 2: $(ls "$tmp/keep" | tr '\n' ' ')"; exit 1; }
"$ref" "${shape[@]}" --seq 16 --micro-batch-size 1 --steps 4 --resume "$tmp/keep/checkpoint.3.json" --save "$tmp/again/checkpoint.json" >/dev/null
cmp "$tmp/again/checkpoint.json" "$tmp/keep/checkpoint.4.json" || { echo "FAIL: resumed from the kept step 3: not step 4's checkpoint"; exit 1; }
echo "resume: 10 steps == 5 + resume + 5, bit for bit; another batch refused, --allow-batch-change from data_seq, --keep 2 ($(grep -c step "$tmp/one.log") steps, final loss $(tail -n 1 "$tmp/one.log" | sed -E 's/.*"loss":([^,]*).*/\1/'))"
