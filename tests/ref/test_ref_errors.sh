#!/usr/bin/env bash
# wp-ref's bad inputs: exit 2 with one clear line for bad flags, models, data and checkpoints;
# exit 1 and the last checkpoint kept when the loss turns NaN.
set -uo pipefail
build=${1:-build}
source tests/ckpt.sh
ref=$build/wp-ref
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0; n=0

. tests/ref/ref_lib.sh

shape=(-m tiny --seq 16 --micro-batch-size 1)   # without --steps: a flag is given once
ok=("${shape[@]}" --steps 2)
expect 2 "no model" -- --synthetic
expect 2 "unknown flag --bogus" -- "${ok[@]}" --synthetic --bogus
expect 2 "--steps: expected an integer" -- "${shape[@]}" --synthetic --steps abc
expect 2 "--steps: expected an integer" -- "${shape[@]}" --synthetic --steps 12x
expect 2 "--lr: expected a number" -- "${ok[@]}" --synthetic --lr -1
expect 2 "--lr: expected a number" -- "${ok[@]}" --synthetic --lr nan
expect 2 "--micro-batches: expected an integer" -- "${ok[@]}" --synthetic --micro-batches 0
expect 2 "--seq: missing value" -- --synthetic -m tiny --seq
expect 2 "--synthetic takes no value" -- "${ok[@]}" --synthetic=1
expect 2 "exactly one of --data SPEC and --synthetic" -- "${ok[@]}"
expect 2 "exactly one of --data SPEC and --synthetic" -- "${ok[@]}" --synthetic --data /etc/hostname
expect 2 "--init and --resume exclude each other" -- "${ok[@]}" --synthetic --init a --resume b
expect 2 "--save-every needs --save" -- "${ok[@]}" --synthetic --save-every 2
expect 2 "directory $tmp/nodir" -- "${ok[@]}" --synthetic --save "$tmp/nodir/x.json"
expect 2 'unknown model huge' -- -m huge --synthetic

# Model shapes from config.json.
echo '{"hidden_size": "64", "num_hidden_layers": 2}' >"$tmp/bad.json"
expect 2 "bad.json: hidden_size: expected an integer in [1, 1048576], got \"64\"" -- -m "$tmp/bad.json" --synthetic
echo '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 5, "intermediate_size": 128, "vocab_size": 256}' >"$tmp/heads.json"
expect 2 "num_attention_heads (5) does not divide hidden_size (64)" -- -m "$tmp/heads.json" --synthetic
echo '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 128, "vocab_size": 256}' >"$tmp/kv.json"
expect 2 "num_key_value_heads (3) does not divide num_attention_heads (4)" -- -m "$tmp/kv.json" --synthetic
# Keys that would change the model: refused by name unless at the value the runtime implements
base='"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 256'
for kv in '"model_type": "gpt2"|model_type: expected "llama"' '"hidden_act": "gelu"|hidden_act: expected "silu"' \
          '"attention_bias": true|attention_bias: expected false' '"mlp_bias": true|mlp_bias: expected false' \
          '"rope_scaling": {"rope_type": "yarn", "factor": 4.0}|rope_scaling.rope_type: expected "llama3"' \
          '"rope_scaling": {"type": "linear", "factor": 2.0}|rope_scaling.type: expected "llama3"' \
          '"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "beta_fast": 32}|rope_scaling.beta_fast: not a key wpgen knows' \
          '"sliding_window": 4096|sliding_window: expected null' '"use_sliding_window": true|use_sliding_window: expected false' \
          '"num_local_experts": 8|num_local_experts: not a key wpgen knows' \
          '"attention_dropout": 0.1|attention_dropout: expected 0' '"architectures": ["GPT2LMHeadModel"]|architectures: expected' \
          '"partial_rotary_factor": 0.5|partial_rotary_factor: not a key wpgen knows' \
          '"rms_norm_eps": 1e-50|rms_norm_eps: expected a number in [1e-12, 1], got 1e-50' \
          '"rope_theta": 1e300|rope_theta: expected a number in [1, 1e+12]' \
          '"hidden_size": 64|duplicate object key'; do
    echo "{$base, ${kv%%|*}}" >"$tmp/key.json"
    expect 2 "${kv#*|}" -- -m "$tmp/key.json" --synthetic
done
# ... and accepted at that value, with the keys that do not change what is trained
echo "{$base, \"model_type\": \"llama\", \"hidden_act\": \"silu\", \"attention_bias\": false, \"attention_dropout\": 0.0,
  \"rope_scaling\": null, \"bos_token_id\": 1, \"eos_token_id\": [2, 3], \"initializer_range\": 0.02, \"use_cache\": true,
  \"pretraining_tp\": 1, \"transformers_version\": \"4.44.0\"}" >"$tmp/ok.json"
n=$((n + 1)); "$ref" -m "$tmp/ok.json" --synthetic --steps 1 --seq 16 >"$tmp/out" 2>&1 || { echo "FAIL: a plain LLaMA config refused: $(head -2 "$tmp/out")"; fails=$((fails + 1)); }
# -m DIR reads DIR/config.json, as transformers does
mkdir -p "$tmp/model"; cp "$tmp/ok.json" "$tmp/model/config.json"
n=$((n + 1)); "$ref" -m "$tmp/model" --synthetic --steps 1 --seq 16 >"$tmp/out" 2>&1 || { echo "FAIL: -m DIR: $(head -2 "$tmp/out")"; fails=$((fails + 1)); }
mkdir -p "$tmp/empty-model"; expect 2 "a folder without a config.json" -- -m "$tmp/empty-model" --synthetic
echo '{"hidden_size": 64,' >"$tmp/broken.json"
expect 2 "broken.json:" -- -m "$tmp/broken.json" --synthetic
expect 2 "nothere.json" -- -m "$tmp/nothere.json" --synthetic

# Data.
expect 2 "$tmp/missing.txt: cannot open the data: No such file" -- "${ok[@]}" --data "$tmp/missing.txt"
printf 'short' >"$tmp/short.txt"
expect 2 "short.txt: 5 tokens, shorter than one sequence of 16+1 tokens" -- "${ok[@]}" --data "$tmp/short.txt"
python3 - "$tmp" <<'PY'
import struct, sys
d = sys.argv[1]
def shard(name, magic, tokens):
    with open(f"{d}/{name}", "wb") as f:
        f.write(struct.pack("<256i", magic, 1, len(tokens), *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
shard("vocab.bin", 20240520, [1] * 50 + [300] + [2] * 50)
shard("magic.bin", 1234, [1] * 100)
# hostile shards: a count past the file's end, a version llm.c never wrote, uint32 tokens under
# a uint16 header, wpgen's fields saying another width or a vocabulary larger than the model's
def raw(name, header, body):
    with open(f"{d}/{name}", "wb") as f:
        f.write(struct.pack("<256i", *(header + [0] * (256 - len(header)))))
        f.write(body)
raw("lying.bin", [20240801, 7, 1000], struct.pack("<100I", *([1] * 100)))
raw("version.bin", [20240801, 1, 100], struct.pack("<100I", *([1] * 100)))
raw("wide.bin", [20240520, 1, 100], struct.pack("<100I", *([1] * 100)))
ext = [0x4e504757, 1]   # data.h: WP_SHARD_EXT_MAGIC, version 1, then vocabulary and width
raw("extwidth.bin", [20240801, 7, 100] + ext + [256, 2], struct.pack("<100I", *([1] * 100)))
raw("bigvocab.bin", [20240801, 7, 100] + ext + [50257, 4], struct.pack("<100I", *([1] * 100)))
PY
expect 2 "vocab.bin: token 300 at position 50 is not below the vocabulary size 256" -- "${ok[@]}" --data "$tmp/vocab.bin"
expect 2 "magic.bin: not a token shard: bad magic 1234" -- "${ok[@]}" --data "$tmp/magic.bin"
expect 2 "lying.bin: the header says 1000 tokens but the file holds 100 (400 bytes of 4-byte tokens: truncated?)" -- "${ok[@]}" --data "$tmp/lying.bin"
expect 2 "version.bin: token shard version 1 is not supported (magic 20240801 is version 7: uint32 tokens)" -- "${ok[@]}" --data "$tmp/version.bin"
expect 2 "wide.bin: the header says 100 tokens but the file holds 200 (400 bytes of 2-byte tokens: the size is that of other-width tokens" -- "${ok[@]}" --data "$tmp/wide.bin"
expect 2 "extwidth.bin: the header says 2-byte tokens but its magic 20240801 is uint32 tokens" -- "${ok[@]}" --data "$tmp/extwidth.bin"
expect 2 "bigvocab.bin: the tokenizer's vocabulary (50257) exceeds the model's (vocab_size 256)" -- "${ok[@]}" --data "$tmp/bigvocab.bin"
# lists, globs and directories: each refused naming what was given
expect 2 "an empty name in the list" -- "${ok[@]}" --data "$tmp/vocab.bin,,$tmp/magic.bin"
expect 2 "--data: expected a file, a comma list, a glob or a directory, got an empty name" -- "${ok[@]}" --data ""
expect 2 "$tmp/none-*.bin: the pattern matches no file" -- "${ok[@]}" --data "$tmp/none-*.bin"
expect 2 "magic.bin: not a token shard" -- "${ok[@]}" --data "$tmp/m*.bin"

# Checkpoints: missing, another shape, a weights-only file for --resume.
expect 2 "$tmp/none.safetensors: No such file" -- "${ok[@]}" --synthetic --resume "$tmp/none.safetensors"
mkdir -p "$tmp/ck"
"$ref" "${ok[@]}" --synthetic --save "$tmp/ck/m.json" >/dev/null 2>&1 || { echo "FAIL: could not save"; fails=$((fails + 1)); }
echo '{"hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 176, "vocab_size": 256}' >"$tmp/narrow.json"
expect 2 "model.embed_tokens.weight: shape [256, 64] in the checkpoint, [256, 32] in the model" -- \
    -m "$tmp/narrow.json" --seq 16 --synthetic --init "$tmp/ck/m.json"
# a shape of another rank (3-D) reported as the manifest writes it, not cut to 2-D
python3 - "$tmp/ck/m.json" "$tmp/ck/m3.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["tensors"]["model.embed_tokens.weight"] = [256, 64, 1]
json.dump(m, open(sys.argv[2], "w"))
PY
expect 2 "model.embed_tokens.weight: shape [256, 64, 1] in the checkpoint, [256, 64] in the model" -- \
    "${ok[@]}" --synthetic --init "$tmp/ck/m3.json"
rm -f "$tmp/ck/"m.shard.*.safetensors
expect 2 "$tmp/ck/m.shard.2.0." -- "${ok[@]}" --synthetic --resume "$tmp/ck/m.json"

# NaN: a checkpoint whose final norm holds a NaN. The run stops at once with exit 1 and leaves
# the checkpoint it resumed from (and would have overwritten) as it was.
"$ref" "${ok[@]}" --synthetic --save "$tmp/ck/n.json" >/dev/null 2>&1
ckpt_poke "$tmp/ck/n.json" model.norm.weight nan
cp "$tmp/ck/n.json" "$tmp/n.before"
expect 1 "step 3: the loss is NaN: stopping (the checkpoint $tmp/ck/n.json is untouched)" -- \
    -m tiny --seq 16 --micro-batch-size 1 --steps 6 --synthetic --resume "$tmp/ck/n.json" \
    --save "$tmp/ck/n.json" --save-every 1
cmp -s "$tmp/ck/n.json" "$tmp/n.before" || { echo "FAIL: the checkpoint changed after NaN"; fails=$((fails + 1)); }
# --init refuses them before the run: the tensor and its first bad element named (exit 2)
expect 2 "n.json: tensor model.norm.weight[1] is nan (first of its elements that is not finite): expected finite weights" -- \
    "${ok[@]}" --synthetic --init "$tmp/ck/n.json"

# Host memory: a run needing more than the machine has available is refused before it allocates,
# both figures and the override said (WP_MEM_AVAILABLE, a test hook, is a small machine; the
# 70B-sized model is more than any test machine, under a ulimit in case the check is missing)
WP_MEM_AVAILABLE=100000 expect 2 "and 100.0 kB are available (WP_MEM_AVAILABLE, a test hook): refusing to start (WP_SKIP_MEM_CHECK=1 starts it anyway)" -- \
    -m tiny --seq 16 --micro-batch-size 1 --steps 1 --synthetic
# (the workspace's attention part grows with the threads: not compared)
grep -q "this run needs .* of memory (weights, gradients and AdamW's moments 3.5 MB, activations 177.8 kB, workspace" "$tmp/err" ||
    { echo "FAIL: the memory refusal's figures: $(cat "$tmp/err")"; fails=$((fails + 1)); }
WP_MEM_AVAILABLE=100000 WP_SKIP_MEM_CHECK=1 expect 0 "" -- "${ok[@]}" --synthetic
echo '{"hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672, "vocab_size": 128256}' >"$tmp/70b.json"
(ulimit -v 8000000; "$ref" -m "$tmp/70b.json" --seq 16 --synthetic --steps 1 >/dev/null 2>"$tmp/err"; echo $? >"$tmp/rc")
n=$((n + 1))
if [ "$(cat "$tmp/rc")" != 2 ] || ! grep -q "this run needs 11[0-9][0-9].[0-9]* GB of memory (weights, gradients and AdamW.s moments 1128.86 GB" "$tmp/err"; then
    echo "FAIL: a 70B model on this machine: exit $(cat "$tmp/rc"): $(head -2 "$tmp/err")"; fails=$((fails + 1))
fi

# Out of range: --steps is counted in an int (2^31 + 2 used to wrap and change the schedule).
expect 2 "--steps: expected an integer in [0, 2147483647], got \"2147483650\"" -- "${shape[@]}" --synthetic --stop-at 1 --steps 2147483650
expect 2 "--save-every: expected an integer in [1, 2147483647]" -- "${ok[@]}" --synthetic --save "$tmp/x.json" --save-every 4294967296
# Sizes no real model has: refused naming the field, not wrapped into "0 B" (exit 2).
echo '{"hidden_size": 1073741824, "num_hidden_layers": 2, "num_attention_heads": 16, "intermediate_size": 64, "vocab_size": 256}' >"$tmp/huge.json"
expect 2 "huge.json: hidden_size: expected an integer in [1, 1048576], got 1073741824" -- -m "$tmp/huge.json" --synthetic
echo '{"hidden_size": 1048576, "num_hidden_layers": 65536, "num_attention_heads": 16, "intermediate_size": 4194304, "vocab_size": 256}' >"$tmp/wide.json"
expect 2 "wide.json: the model has more than 2^44 parameters" -- -m "$tmp/wide.json" --synthetic
# --data that is not a regular file: refused at once, not waited on (a named pipe used to hang).
mkfifo "$tmp/fifo"
n=$((n + 1))
timeout 20 "$ref" "${ok[@]}" --data "$tmp/fifo" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "fifo: not a regular file (a named pipe)" "$tmp/err"; then
    echo "FAIL: --data FIFO: exit $rc (want 2): $(head -n 1 "$tmp/err")"; fails=$((fails + 1))
fi
expect 2 "$tmp: a directory without token shards (train-*.bin)" -- "${ok[@]}" --data "$tmp"
# --save replaces only what wpgen wrote: not a device, a directory, a file of the user's, or the
# config.json of the model being trained (-m DIR/config.json --save DIR/checkpoint.json).
# (a FIFO stands for a device: a build with this bug must not replace a real /dev/null)
expect 2 "--save $tmp/fifo exists and is not a regular file" -- "${ok[@]}" --synthetic --save "$tmp/fifo"
[ -p "$tmp/fifo" ] || { echo "FAIL: --save replaced a named pipe"; fails=$((fails + 1)); }
expect 2 "--save $tmp/ck is a directory, not a checkpoint file" -- "${ok[@]}" --synthetic --save "$tmp/ck"
echo "my notes" >"$tmp/notes.txt"
expect 2 "--save $tmp/notes.txt exists and is not a checkpoint manifest written by wpgen" -- "${ok[@]}" --synthetic --save "$tmp/notes.txt"
grep -qx "my notes" "$tmp/notes.txt" || { echo "FAIL: --save overwrote a file of the user's"; fails=$((fails + 1)); }
mkdir -p "$tmp/hf"
echo '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 176, "vocab_size": 256, "transformers_version": "4.40.0"}' >"$tmp/hf/config.json"
cp "$tmp/hf/config.json" "$tmp/hf.before"
expect 2 "--save $tmp/hf/checkpoint.json: $tmp/hf/config.json exists and was not written by wpgen" -- \
    -m "$tmp/hf/config.json" --seq 16 --steps 1 --synthetic --save "$tmp/hf/checkpoint.json"
cmp -s "$tmp/hf/config.json" "$tmp/hf.before" || { echo "FAIL: --save overwrote the model's config.json"; fails=$((fails + 1)); }

# A checkpoint whose optimizer state AdamW cannot have left (a NaN first moment, a negative second
# moment) is refused at --resume, not turned into NaN weights a step later.
mkdir -p "$tmp/mom"
"$ref" "${ok[@]}" --synthetic --save "$tmp/mom/checkpoint.json" >/dev/null 2>&1
for case in "exp_avg nan" "exp_avg_sq -1"; do
    set -- $case
    rm -rf "$tmp/mom2"; cp -r "$tmp/mom" "$tmp/mom2"
    ckpt_poke "$tmp/mom2/checkpoint.json" "model.norm.weight.$1" "$2"
    expect 2 "an $1 (AdamW's" -- "${shape[@]}" --synthetic --steps 3 --resume "$tmp/mom2/checkpoint.json"
done

# A shard checked at load against its manifest and its name: a byte changed after the save (its
# content no longer hashes to its name's hash), another save's shard under the name (another
# training state), its slices metadata edited (another offset): each refused naming the shard.
shard1() { ls "$1"/checkpoint.shard.*.safetensors | head -n 1; }
rm -rf "$tmp/bits"; cp -r "$tmp/mom" "$tmp/bits"
python3 - "$(shard1 "$tmp/bits")" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[-3] ^= 1; open(sys.argv[1], "wb").write(b)
PY
expect 2 "$(basename "$(shard1 "$tmp/bits")"): its content hashes to" -- "${shape[@]}" --synthetic --steps 3 --resume "$tmp/bits/checkpoint.json"
mkdir -p "$tmp/other"
"$ref" "${ok[@]}" --synthetic --seed 99 --save "$tmp/other/checkpoint.json" >/dev/null 2>&1
rm -rf "$tmp/swap"; cp -r "$tmp/mom" "$tmp/swap"; cp "$(shard1 "$tmp/other")" "$(shard1 "$tmp/swap")"
expect 2 "safetensors: its training state is not the manifest $tmp/swap/checkpoint.json's: a shard of another save" \
    -- "${shape[@]}" --synthetic --steps 3 --resume "$tmp/swap/checkpoint.json"
rm -rf "$tmp/meta"; cp -r "$tmp/mom" "$tmp/meta"
python3 - "$(shard1 "$tmp/meta")" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
sl = json.loads(head["__metadata__"]["slices"])
sl["model.norm.weight"]["offset"] = 3
head["__metadata__"]["slices"] = json.dumps(sl)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b[8 + n:])
PY
expect 2 "slices.model.norm.weight: the shard says offset 3, the manifest $tmp/meta/checkpoint.json 0: a shard of another save" \
    -- "${shape[@]}" --synthetic --steps 3 --resume "$tmp/meta/checkpoint.json"

# --help succeeds.
n=$((n + 1))
# (into a file: grep -q stops reading at the match, and under pipefail the rest of the text would
# meet a closed pipe)
{ "$ref" --help >"$tmp/help" && grep -q "usage: wp-ref" "$tmp/help"; } || { echo "FAIL: --help"; fails=$((fails + 1)); }

echo "ref errors: $((n - fails)) of $n cases as expected"
[ "$fails" -eq 0 ]
