#!/usr/bin/env bash
# The trainers' --data/--val-data specs and what a run records of its data, through wp-ref (the
# emitted trainers parse the same flags and open the same data): a glob over a `wpgen data`
# folder that matches its val-*.bin or its tokenizer.json is refused naming them; --val-data of
# another tokenizer than --data, and --resume on data of another tokenizer, are refused naming
# both (the checkpoint records the tokenizer), while a checkpoint without it still resumes with a
# warning; names holding ',', '[', '*' are taken as they are; --val-data shorter than a step says
# so; a flag given twice is refused by name.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
source tests/ckpt.sh
ref=$build/wp-ref
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

. tests/ref/ref_lib.sh

# Two folders as `wpgen data` writes them (runtime/train/data.h's header words), of two
# tokenizers: train-*.bin, val-*.bin, tokenizer.json.
python3 - "$tmp" <<'PY'
import os, struct, sys
d = sys.argv[1]
def folder(name, hash8, tokname):
    os.makedirs(f"{d}/{name}")
    def shard(file, tokens):
        h = [20240520, 1, len(tokens), 0x4E504757, 1, 256, 2] + [0] * 249
        b = bytearray(struct.pack("<256i", *h))
        b[28:36] = hash8
        b[64:64 + len(tokname) + 1] = tokname + b"\0"
        with open(f"{d}/{name}/{file}", "wb") as f:
            f.write(bytes(b) + struct.pack(f"<{len(tokens)}H", *tokens))
    shard("train-00000.bin", [(7 * i) % 256 for i in range(400)])
    shard("val-00000.bin", [(3 * i) % 256 for i in range(40)])
    with open(f"{d}/{name}/tokenizer.json", "w") as f:
        f.write('{"model": {"type": "BPE"}}')
folder("a", bytes(range(1, 9)), b"bpe-a")
folder("b", bytes(range(11, 19)), b"bpe-b")
with open(f"{d}/odd,[1]*.txt", "wb") as f:   # a name holding a comma, a bracket and a star
    f.write(bytes(range(200)) * 2)
PY
base=(-m tiny --seq 16 --micro-batch-size 1)
ok=("${base[@]}" --steps 2)

# M7: a glob over the folder matches its held-out shards and its tokenizer.json
expect 2 "$tmp/a/val-00000.bin: a held-out shard (val-*.bin, the validation split \`wpgen data\` writes) in --data" \
    -- "${ok[@]}" --data "$tmp/a/*"
expect 2 "$tmp/a/val-00000.bin: a held-out shard" -- "${ok[@]}" --data "$tmp/a/*.bin"
expect 2 "--val-data $tmp/a/*: mixes token shards ($tmp/a/train-00000.bin and others) with files read as bytes, one token per byte ($tmp/a/tokenizer.json)" \
    -- "${ok[@]}" --data "$tmp/a" --val-data "$tmp/a/*"
expect 2 "mixes token shards ($tmp/a/train-00000.bin) with files read as bytes" \
    -- "${ok[@]}" --data "$tmp/a/train-00000.bin,$tmp/a/tokenizer.json"
expect 0 "" -- "${ok[@]}" --data "$tmp/a" --val-data "$tmp/a/val-*.bin"

# M8: --val-data of another tokenizer
expect 2 "--val-data $tmp/b/val-*.bin is tokenized by tokenizer bpe-b sha256:0b0c0d0e0f101112, --data $tmp/a by tokenizer bpe-a sha256:0102030405060708" \
    -- "${ok[@]}" --data "$tmp/a" --val-data "$tmp/b/val-*.bin"
expect 2 "--val-data $tmp/odd,[1]*.txt is tokenized by bytes (one token per byte), --data $tmp/a by tokenizer bpe-a" \
    -- "${ok[@]}" --data "$tmp/a" --val-data "$tmp/odd,[1]*.txt"

# M9: the checkpoint records the tokenizer; a resume on another one's data is refused
mkdir -p "$tmp/ck"
expect 0 "" -- "${ok[@]}" --data "$tmp/a" --save "$tmp/ck/checkpoint.json"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["state"]; assert s["tokenizer"]=="sha256:0102030405060708" and s["tokenizer_name"]=="bpe-a", s' \
    "$tmp/ck/checkpoint.json" || fail "the checkpoint's state records no tokenizer: $(grep -m1 -A12 state "$tmp/ck/checkpoint.json" | tr -d '\n')"
expect 2 "--resume $tmp/ck/checkpoint.json: its run read data tokenized by tokenizer bpe-a sha256:0102030405060708, --data $tmp/b is tokenized by tokenizer bpe-b sha256:0b0c0d0e0f101112" \
    -- "${base[@]}" --steps 4 --data "$tmp/b" --resume "$tmp/ck/checkpoint.json"
expect 2 "is tokenized by bytes (one token per byte)" -- "${base[@]}" --steps 4 --data "$tmp/odd,[1]*.txt" --resume "$tmp/ck/checkpoint.json"
expect 0 "" -- "${base[@]}" --steps 4 --data "$tmp/a" --resume "$tmp/ck/checkpoint.json"
# a checkpoint from before checkpoints recorded the tokenizer resumes, saying it cannot check
ckpt_drop_state "$tmp/ck/checkpoint.json" tokenizer tokenizer_name
expect 0 "" -- "${base[@]}" --steps 6 --data "$tmp/b" --resume "$tmp/ck/checkpoint.json"
grep -q "wp-ref: warning: --resume $tmp/ck/checkpoint.json: the checkpoint records no tokenizer (written before checkpoints did): --data's, tokenizer bpe-b sha256:0b0c0d0e0f101112, cannot be checked" \
    "$tmp/err" || fail "an old checkpoint's resume: no warning: $(head -n 2 "$tmp/err")"

# names holding , [ * are taken as they are, where they exist
expect 0 "" -- "${ok[@]}" --data "$tmp/odd,[1]*.txt"
grep -q "bytes of $tmp/odd,\[1\]\*.txt (400 tokens" "$tmp/out" || fail "--data 'odd,[1]*.txt': $(grep -m1 data "$tmp/out")"

# --val-data shorter than one step: what the validation read, and what the data hold
expect 0 "" -- "${ok[@]}" --micro-batches 8 --data "$tmp/a" --val-data "$tmp/a/val-00000.bin"
grep -q "val       2/2 | val loss .* | 8 sequences of --val-data, which holds 2 (read again from its start) |" "$tmp/out" ||
    fail "--val-data of 2 sequences under a step of 8: $(grep -m1 '^val' "$tmp/out")"

# a flag given twice
expect 2 "--data given twice ($tmp/a, then $tmp/b): give each flag once" -- "${ok[@]}" --data "$tmp/a" --data "$tmp/b"
expect 2 "--val-data given twice" -- "${ok[@]}" --data "$tmp/a" --val-data "$tmp/a/val-*.bin" --val-data="$tmp/b/val-*.bin"
expect 2 "--lr given twice (1e-3, then 2e-3)" -- "${ok[@]}" --synthetic --lr 1e-3 --lr=2e-3
expect 2 "--synthetic given twice" -- "${ok[@]}" --synthetic --synthetic
expect 2 "--model given twice (tiny, then tiny)" -- "${ok[@]}" --model tiny --synthetic

n=$((n + 5))
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
