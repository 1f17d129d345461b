#!/usr/bin/env bash
# From a text corpus to a trained model, without the network: a BPE tokenizer trained here with
# the tokenizers package on the GPL text (its paragraphs the documents of a JSONL corpus),
# `wpgen data` writing it into several uint32 shards and a validation split (headers as llm.c
# reads them, with the tokenizer's name, hash, vocabulary and width), the emitted tiny8 plan
# (weipipe-interleave on 4 ranks) and wp-ref training 200 steps on the shards with the same
# losses and held-out losses (--val-data every 50 steps), both going down, validation leaving the
# trained weights as they were, an epoch line, runs stopped at step 100 and resumed ending where
# the uninterrupted ones do: bit for bit under the same plan, and from zb1 on 4 ranks under 1f1b
# on 2 (both sum each chunk's gradient over the micro-batches in the same order, and the shuffled
# order of the data is a function of (seed, q) alone); from weipipe under 1f1b on 2 ranks up to
# the order of the sums (1e-6); and `wpgen data` replacing only what it wrote, refusing bad input,
# and saying what to do where the tokenizers package cannot be installed; wp-ref --eval of the
# emitted run's checkpoint giving the held-out loss it logged.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh

# the GPL's paragraphs as a JSONL corpus (field "body") and a BPE tokenizer trained on them
corpus_and_tokenizer "$tmp" body || { echo "FAIL: tokenizer"; echo "0 passed, 1 failed"; exit 1; }

# uint32 shards of 4096 tokens and a tenth of the documents held out
data=$tmp/shards
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$data" --val-fraction 0.1 --shard-tokens 4096 --width uint32 \
    --text-field body "$tmp/corpus.jsonl" >"$tmp/out" 2>&1 && ok || bad "wpgen data: $(tail -2 "$tmp/out")"
python3 - "$data" "$tmp/tokenizer.json" <<'PY' && ok || bad "the shards' headers"
import glob, hashlib, os, struct, sys
d, tj = sys.argv[1], sys.argv[2]
train, val = sorted(glob.glob(f"{d}/train-*.bin")), sorted(glob.glob(f"{d}/val-*.bin"))
assert len(train) >= 3 and len(val) >= 1, (train, val)
digest = hashlib.sha256(open(tj, "rb").read()).digest()
assert open(f"{d}/tokenizer.json", "rb").read() == open(tj, "rb").read(), "tokenizer.json copied"
for p in train + val:
    b = open(p, "rb").read()
    h = struct.unpack("<256i", b[:1024])
    assert h[0] == 20240801 and h[1] == 7, (p, h[:3])              # llm.c's uint32 shard
    assert len(b) == 1024 + 4 * h[2], (p, len(b), h[2])             # as llm.c's reader checks it
    assert h[3] == 0x4E504757 and h[4] == 1 and h[5] == 250 and h[6] == 4, (p, h[3:7])
    assert b[28:36] == digest[:8] and h[9] == 0, p                   # tokenizer hash, end of text id
    name = os.path.basename(os.path.dirname(os.path.realpath(tj))).encode()   # the tokenizer's folder
    assert b[64:64 + len(name) + 1] == name + b"\0", b[64:80]
    toks = struct.unpack(f"<{h[2]}I", b[1024:])
    assert max(toks) < 250 and toks.count(0) >= 1, p
PY
# the default width for this vocabulary is uint16: llm.c's version-1 shards
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$tmp/u16" --text-field body "$tmp/corpus.jsonl" >/dev/null 2>&1 &&
    python3 -c 'import struct,sys; h=struct.unpack("<7i", open(sys.argv[1],"rb").read(28)); assert h[:2]==(20240520,1) and h[6]==2, h' \
    "$tmp/u16/train-00000.bin" && ok || bad "--width auto: not uint16"

# training on the shards, 200 steps: the emitted plan (4 ranks) and wp-ref, the same losses, going down
common=(--data "$data" --lr 3e-3 --warmup 5 --seed 4 --steps 200)
ref=("$build/wp-ref" -m "$model" --micro-batch-size 2 --micro-batches 8)
d=$tmp/plan
mkdir -p "$tmp/a" "$tmp/b"
emit_tiny8 "$d" || { bad "emit or build"; echo "$pass passed, $fail failed"; exit 1; }
train=("${mpirun[@]}" -np 4 "$d/train")
val=(--val-data "$data/val-*.bin" --val-every 50)
mkdir -p "$tmp/vm"
"${train[@]}" "${common[@]}" "${val[@]}" --log "$tmp/train.jsonl" --save "$tmp/vm/checkpoint.json" >"$tmp/train.out" 2>&1 ||
    bad "train on the shards: $(tail -3 "$tmp/train.out")"
"${ref[@]}" "${common[@]}" "${val[@]}" --log "$tmp/ref.jsonl" >"$tmp/ref.out" 2>&1 || bad "wp-ref on the shards: $(tail -3 "$tmp/ref.out")"
grep -q "4 shards of $data (.* tokens, uint32, tokenizer tmp.* sequences an epoch, shuffled each epoch by the seed)" \
    "$tmp/train.out" && ok || bad "start-up line: $(grep -m1 shards "$tmp/train.out")"
grep -q "train: epoch 1 of the data (2[0-9][0-9] sequences) ended in step 1[0-9]; epoch 2 reads them in a new order" \
    "$tmp/train.out" && ok || bad "no epoch line: $(grep -c epoch "$tmp/train.out")"
python3 - "$tmp/train.jsonl" "$tmp/ref.jsonl" <<'PY' && ok || bad "losses"
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
# every step's loss within 1e-5 of wp-ref's (they sum in other orders: 1.3e-7 at worst over the
# 200 steps, measured)
assert len(a) == len(b) == 200, (len(a), len(b))
assert all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b)), [(x, y) for x, y in zip(a, b) if x != y][:3]
first, last = sum(a[:5]) / 5, sum(a[-5:]) / 5
print(f"data: loss {first:.3f} -> {last:.3f} over 200 steps")
assert first > 5.0 and last < first - 0.5, (first, last)
# the held-out loss at steps 50, 100, 150, 200: the same in both, lower each time
va = [(json.loads(l)["step"], json.loads(l)["val_loss"]) for l in open(sys.argv[1]) if "val_loss" in l]
vb = [(json.loads(l)["step"], json.loads(l)["val_loss"]) for l in open(sys.argv[2]) if "val_loss" in l]
assert [s for s, _ in va] == [50, 100, 150, 200] and [s for s, _ in vb] == [50, 100, 150, 200], (va, vb)
assert all(abs(x[1] - y[1]) <= 1e-5 * y[1] for x, y in zip(va, vb)), (va, vb)
print("data: val loss " + " ".join(f"{s}:{v:.3f}" for s, v in va))
assert all(y[1] < x[1] for x, y in zip(va, va[1:])) and va[-1][1] < va[0][1] - 0.5, va
PY
grep -q "val     200/200 | val loss .* | 16 sequences of --val-data" "$tmp/train.out" && ok || bad "no val line: $(grep -m1 val "$tmp/train.out")"
# the emitted run's checkpoint (weipipe-interleave, 4 ranks, 8 micro-batches in all) evaluated by
# wp-ref --eval with no training flag: the held-out loss the run logged at its last step (the plan
# sums in another order: 1e-5, as the losses above)
"$build/wp-ref" --eval "$tmp/vm/checkpoint.json" --data "$data/val-*.bin" >"$tmp/eval" 2>&1 &&
    python3 - "$tmp/train.jsonl" "$tmp/eval" <<'PY' && ok || bad "wp-ref --eval of the emitted run's checkpoint: $(tail -2 "$tmp/eval")"
import json, re, sys
want = [json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "val_loss" in l][-1]
got = float(re.search(r"^eval  step 200 \| val loss ([0-9.]+) \|", open(sys.argv[2]).read(), re.M).group(1))
assert abs(got - want) <= 1e-5 * want, (got, want)
PY
# stopped at step 100 and resumed: under the same plan, the uninterrupted run's weights bit for bit;
# under 1f1b on 2 ranks, the same up to the order of the sums (weipipe sums a chunk's gradient
# across the ranks in another order than 1f1b's: 2e-7 here, where any other order of the data
# moves the weights by more than 1e-3: --no-shuffle below)
mkdir -p "$tmp/c" "$tmp/e"
"${train[@]}" "${common[@]}" --save "$tmp/a/checkpoint.json" >"$tmp/out" 2>&1 || bad "straight: $(tail -2 "$tmp/out")"
"${train[@]}" "${common[@]}" --stop-at 100 --save "$tmp/b/checkpoint.json" >"$tmp/out" 2>&1 || bad "train --stop-at 100: $(tail -2 "$tmp/out")"
cp -r "$tmp/b/." "$tmp/e/"
"${train[@]}" "${common[@]}" --resume "$tmp/b/checkpoint.json" --save "$tmp/b/checkpoint.json" >"$tmp/out" 2>&1 ||
    bad "resume: $(tail -2 "$tmp/out")"
"$build/tools/ckpt_compare" "$tmp/b/checkpoint.json" "$tmp/a/checkpoint.json" 0 >"$tmp/cmp" 2>&1 && ok ||
    bad "resumed: not the uninterrupted run's weights: $(tail -1 "$tmp/cmp")"
# validating (whole steps of the plan on the held-out data, their updates dropped) changed nothing
cmp -s "$tmp/vm/checkpoint.json" "$tmp/a/checkpoint.json" && ok || bad "a run with --val-data trained other weights"
# wp-ref resumes a shuffled run where it was: the order is the checkpoint's seed's, whatever --seed
# says (40 steps, its own runs; a flag is given once)
short=(--data "$data" --lr 3e-3 --warmup 5 --steps 40)
mkdir -p "$tmp/r" "$tmp/r2"
"${ref[@]}" "${short[@]}" --seed 4 --save "$tmp/r/checkpoint.json" >/dev/null 2>&1 &&
"${ref[@]}" "${short[@]}" --seed 4 --stop-at 20 --save "$tmp/r2/checkpoint.json" >/dev/null 2>&1 &&
"${ref[@]}" "${short[@]}" --seed 9 --resume "$tmp/r2/checkpoint.json" --save "$tmp/r2/checkpoint.json" >"$tmp/out" 2>&1 &&
    grep -q "seed 9 ignored" "$tmp/out" && cmp -s "$tmp/r/checkpoint.json" "$tmp/r2/checkpoint.json" && ok ||
    bad "wp-ref resumed: not the uninterrupted run's weights ($(head -1 "$tmp/out"))"
# the checkpoint records the data's order: a resume in the other order is refused, naming the flag
"${ref[@]}" --data "$data" --lr 3e-3 --warmup 5 --steps 41 --no-shuffle --resume "$tmp/r2/checkpoint.json" >"$tmp/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "read its data shuffled per epoch (the default): resume without --no-shuffle" "$tmp/out" && ok ||
    bad "a resume with --no-shuffle of a shuffled run: exit $rc: $(head -2 "$tmp/out")"
# a resume at its step still gives the held-out loss of its weights
"${ref[@]}" "${short[@]}" --resume "$tmp/r/checkpoint.json" "${val[@]}" >"$tmp/out" 2>&1 &&
    grep -q "val      40/40 | val loss" "$tmp/out" && ok || bad "evaluating a checkpoint: $(tail -1 "$tmp/out")"
emit() {   # DIR TOPOLOGY STRATEGY MICRO-BATCHES: the tiny8 plan on the same global batch, built
    "$build/wpgen" emit -t "$2" -m "$model" --micro-batch-size 2 -s "$3" --micro-batches "$4" -o "$1" >"$tmp/out" 2>&1 &&
        bash tests/make_emitted.sh "$1" >/dev/null 2>&1 || bad "emit $3 on $2: $(tail -2 "$tmp/out")"
}
sed 's/"devices": 4/"devices": 2/; s/"cpu-1x4"/"cpu-1x2"/' topologies/cpu-1x4.json >"$tmp/cpu-1x2.json"
emit "$tmp/f2" "$tmp/cpu-1x2.json" 1f1b 4
f1b=("${mpirun[@]}" -np 2 "$tmp/f2/train")
"${f1b[@]}" "${common[@]}" --resume "$tmp/e/checkpoint.json" --save "$tmp/e/checkpoint.json" >"$tmp/out" 2>&1 ||
    bad "resume under 1f1b: $(tail -2 "$tmp/out")"
"$build/tools/ckpt_compare" "$tmp/e/checkpoint.json" "$tmp/a/checkpoint.json" 1e-6 >"$tmp/cmp" 2>&1 && ok ||
    bad "resumed under another plan: not the uninterrupted run's weights: $(tail -1 "$tmp/cmp")"
# zb1 on 4 ranks stopped at step 100 and resumed under 1f1b on 2 ranks (4 micro-batches each):
# the uninterrupted zb1 run's weights bit for bit. Both add each chunk's gradient over the 8
# micro-batches in the same order, micro-batch 0 first, and the fp32 CPU kernels do not depend on
# the stage count (weipipe, tawpipe, fsdp and replicas sum across ranks in other orders)
emit "$tmp/zb" topologies/cpu-1x4.json zb1 2
mkdir -p "$tmp/z" "$tmp/z2"
zb=("${mpirun[@]}" -np 4 "$tmp/zb/train")
"${zb[@]}" "${common[@]}" --save "$tmp/z/checkpoint.json" >"$tmp/out" 2>&1 || bad "zb1: $(tail -2 "$tmp/out")"
"${zb[@]}" "${common[@]}" --stop-at 100 --save "$tmp/z2/checkpoint.json" >"$tmp/out" 2>&1 || bad "zb1 --stop-at 100: $(tail -2 "$tmp/out")"
"${f1b[@]}" "${common[@]}" --resume "$tmp/z2/checkpoint.json" --save "$tmp/z2/checkpoint.json" \
    >"$tmp/out" 2>&1 && grep -q "resuming from .* at step 100" "$tmp/out" || bad "zb1 resumed under 1f1b on 2 ranks: $(tail -2 "$tmp/out")"
"$build/tools/ckpt_compare" "$tmp/z2/checkpoint.json" "$tmp/z/checkpoint.json" 0 >"$tmp/cmp" 2>&1 && ok ||
    bad "zb1 resumed under 1f1b on 2 ranks: not the uninterrupted run's weights: $(tail -1 "$tmp/cmp")"
# --no-shuffle: the data in file order, another run (to step 100, against the step-100 checkpoint
# the stopped run kept)
"${train[@]}" "${common[@]}" --no-shuffle --stop-at 100 --save "$tmp/c/checkpoint.json" >"$tmp/out" 2>&1 &&
    grep -q "in order)" "$tmp/out" && [ -f "$tmp/b/checkpoint.100.json" ] &&
    ! "$build/tools/ckpt_compare" "$tmp/c/checkpoint.json" "$tmp/b/checkpoint.100.json" 1e-3 >/dev/null 2>&1 && ok ||
    bad "--no-shuffle: not another run: $(grep -m1 shards "$tmp/out")"

# wpgen data replaces only what it wrote
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$data" --shard-tokens 8192 --width uint32 --text-field body \
    "$tmp/corpus.jsonl" >"$tmp/out" 2>&1 && [ ! -e "$data/val-00000.bin" ] && [ ! -e "$data/train-00003.bin" ] && ok ||
    bad "wpgen data again into its own folder: $(tail -2 "$tmp/out")"
echo "mine" >"$data/notes.txt"
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$data" --text-field body "$tmp/corpus.jsonl" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "notes.txt is not a file wpgen data wrote" "$tmp/out" && grep -qx mine "$data/notes.txt" && ok ||
    bad "a file of the user's in -o: exit $rc: $(tail -1 "$tmp/out")"
rm "$data/notes.txt"
printf 'x' >>"$data/train-00000.bin"
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$data" --text-field body "$tmp/corpus.jsonl" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "train-00000.bin changed since wpgen data wrote it" "$tmp/out" && ok || bad "an edited shard: exit $rc: $(tail -1 "$tmp/out")"
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$tmp" --text-field body "$tmp/corpus.jsonl" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "holds --tokenizer" "$tmp/out" && [ -f "$tmp/corpus.jsonl" ] && ok || bad "-o holding an input: exit $rc: $(tail -1 "$tmp/out")"
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$tmp/v" --val-fraction 0.9 "$tmp/corpus.jsonl" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--val-fraction: expected a number in \[0, 0.5\], got 0.9" "$tmp/out" && [ ! -e "$tmp/v" ] && ok ||
    bad "--val-fraction 0.9: exit $rc: $(tail -1 "$tmp/out")"
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$tmp/v" "$tmp/corpus.jsonl" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'corpus.jsonl:1: expected an object with a string field "text"' "$tmp/out" && [ ! -e "$tmp/v" ] && ok ||
    bad "a JSONL without the field: exit $rc: $(tail -1 "$tmp/out")"
"$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$tmp/v" --eot "<s>" --text-field body "$tmp/corpus.jsonl" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--eot <s>: not a token of" "$tmp/out" && ok || bad "--eot not a token: exit $rc: $(tail -1 "$tmp/out")"
# no tokenizers package and no way to install it (a Python without its site packages, no index):
# one line saying where it tried and what to do, exit 1, nothing written
printf '#!/bin/sh\nexec python3 -S "$@"\n' >"$tmp/python-bare"
chmod +x "$tmp/python-bare"
WPGEN_PYTHON="$tmp/python-bare" XDG_CACHE_HOME="$tmp/cache" PIP_NO_INDEX=1 PIP_FIND_LINKS="$tmp/none" \
    "$build/wpgen" data --tokenizer "$tmp/tokenizer.json" -o "$tmp/v" --text-field body "$tmp/corpus.jsonl" >"$tmp/out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "installing it from PyPI into $tmp/cache/wpgen/python" "$tmp/out" &&
    grep -q "could not install tokenizers from PyPI into $tmp/cache/wpgen/python (.*): install it with" "$tmp/out" &&
    [ ! -e "$tmp/v" ] && ok || bad "tokenizers not to be had: exit $rc: $(tail -1 "$tmp/out")"
ls -d "$tmp"/*.tmp-* >/dev/null 2>&1 && bad "a temporary folder left: $(ls -d "$tmp"/*.tmp-*)" || ok
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
