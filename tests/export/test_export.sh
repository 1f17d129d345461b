#!/usr/bin/env bash
# wpgen export as a user meets it: a tiny model trained 3 steps by wp-ref, exported in fp32 with a
# small --max-shard-size (so sharded, with its index) and in bf16 (the default), both loaded by
# transformers' LlamaForCausalLM.from_pretrained on the CPU, their logits on a fixed batch
# compared with our C forward of the checkpoint (tests/torch/dump.c; tolerances in
# check_export.py), and so is a tied model's checkpoint from a pipelined plan; the tokenizer's files beside the checkpoint copied; exporting again over an
# export replaces it, and a signal leaves the old export or the new one; the test hook WP_EXPORT_READ_LAYERS reads a layer or two at a time; what is not wpgen's is refused (exit 2, nothing changed, nothing left).
# transformers 4.44.2 (the last that runs on Debian's torch 1.13) is in a venv at BUILD/pyexport,
# installed by `make test`'s set-up step (scripts/test_deps.sh) before any test runs.
# usage: tests/export/test_export.sh BUILD_DIR
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
py=$build/pyexport/bin/python
"$py" -c 'import torch, transformers' 2>/dev/null ||
    { echo "test_export: no torch and transformers in $build/pyexport (make test installs them first: scripts/test_deps.sh)"; exit 1; }
gcc -O2 -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -fopenmp -Iruntime \
    tests/torch/dump.c "$build/libwprt.a" -lopenblas -ljansson -lm -o "$tmp/dump" || { echo "test_export: dump.c did not build"; exit 1; }

ck=$tmp/ck
mkdir -p "$ck"
"$build/wp-ref" -m tiny --synthetic --steps 3 --save "$ck/checkpoint.json" >/dev/null || { echo "wp-ref --save failed"; exit 1; }
printf '{"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 64}\n' >"$ck/tokenizer_config.json"
"$tmp/dump" "$tmp/ours.safetensors" "$ck/checkpoint.json" >/dev/null || { echo "dump of the checkpoint failed"; exit 1; }

# fp32, shards of at most 100 KB: ten files and the index naming every tensor
# (read one layer at a time, WP_EXPORT_READ_LAYERS=1: the path of a large model on a small one)
WP_EXPORT_READ_LAYERS=1 "$build/wpgen" export "$ck/checkpoint.json" -o "$tmp/fp32" --dtype fp32 --max-shard-size 100KB >"$tmp/out" 2>&1 &&
    grep -q "read 1 layer at a time" "$tmp/out" &&
    [ -f "$tmp/fp32/model-00001-of-00010.safetensors" ] && [ -f "$tmp/fp32/model-00010-of-00010.safetensors" ] &&
    [ ! -e "$tmp/fp32/model.safetensors" ] && cmp -s "$ck/tokenizer_config.json" "$tmp/fp32/tokenizer_config.json" &&
    python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); assert len(i["weight_map"]) == 39 and i["metadata"]["total_size"] > 0' \
        "$tmp/fp32/model.safetensors.index.json" && ok || bad "fp32 sharded export: $(cat "$tmp/out")"
(cd tests/export && "../../$py" check_export.py "$tmp/fp32" "$tmp/ours.safetensors") >"$tmp/out" 2>&1 && ok ||
    bad "transformers on the fp32 export: $(tail -3 "$tmp/out")"
tail -1 "$tmp/out"
# bf16 (the default), one file under the default 5GB, read two layers at a time
WP_EXPORT_READ_LAYERS=2 "$build/wpgen" export "$ck" -o "$tmp/bf16" >"$tmp/out" 2>&1 && [ -f "$tmp/bf16/model.safetensors" ] &&
    [ ! -e "$tmp/bf16/model.safetensors.index.json" ] && ok || bad "bf16 export: $(cat "$tmp/out")"
(cd tests/export && "../../$py" check_export.py "$tmp/bf16" "$tmp/ours.safetensors" --bf16 "$tmp/fp32") >"$tmp/out" 2>&1 && ok ||
    bad "transformers on the bf16 export: $(tail -3 "$tmp/out")"
tail -1 "$tmp/out"

# a tied model (tie_word_embeddings) trained 3 steps by a pipelined plan (weipipe-interleave on 4
# ranks: the head a mirror of the embedding, TIE on every rank): its export holds no
# lm_head.weight, as Hugging Face writes a tied model, and transformers ties the head to the
# embedding and gives our logits
python3 -c 'import json,sys; c=json.load(open("tests/data/tiny8/config.json")); c["tie_word_embeddings"]=True; json.dump(c,open(sys.argv[1],"w"))' "$tmp/tied.json"
mpirun=(mpirun --oversubscribe); [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
mkdir -p "$tmp/ckt"
if "$build/wpgen" emit -t topologies/cpu-2x2.json -m "$tmp/tied.json" --micro-batch-size 2 -s weipipe-interleave -o "$tmp/tiedp" >"$tmp/out" 2>&1 &&
    bash tests/make_emitted.sh "$tmp/tiedp" >"$tmp/out" 2>&1 &&
    "${mpirun[@]}" -np 4 "$tmp/tiedp/train" --synthetic --steps 3 --save "$tmp/ckt/checkpoint.json" >"$tmp/out" 2>&1 &&
    "$tmp/dump" "$tmp/tied.safetensors" "$tmp/ckt/checkpoint.json" >"$tmp/out" 2>&1 &&
    "$build/wpgen" export "$tmp/ckt" -o "$tmp/tiedx" --dtype fp32 >"$tmp/out" 2>&1; then
    python3 -c 'import json,struct,sys
f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; names=set(json.loads(f.read(n)))
assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names and json.load(open(sys.argv[2]))["tie_word_embeddings"] is True' \
        "$tmp/tiedx/model.safetensors" "$tmp/tiedx/config.json" && ok || bad "tied export: an lm_head.weight, or not tied"
    (cd tests/export && "../../$py" check_export.py "$tmp/tiedx" "$tmp/tied.safetensors") >"$tmp/out" 2>&1 && ok ||
        bad "transformers on the tied pipelined export: $(tail -3 "$tmp/out")"
    tail -1 "$tmp/out"
else
    bad "the tied pipelined run and its export: $(tail -3 "$tmp/out")"
fi

# again over an export: replaced whole (10 shards become 1), nothing else left beside it
"$build/wpgen" export "$ck" -o "$tmp/fp32" --dtype fp32 >"$tmp/out" 2>&1 && [ -f "$tmp/fp32/model.safetensors" ] &&
    [ ! -e "$tmp/fp32/model-00001-of-00010.safetensors" ] && [ ! -e "$tmp/fp32/model.safetensors.index.json" ] &&
    [ -z "$(ls -d "$tmp"/fp32.tmp-* 2>/dev/null)" ] && ok || bad "export over an export: $(cat "$tmp/out"; ls "$tmp/fp32")"

# expect2 WHAT PATTERN CMD...: exit 2, the pattern on stderr, no DIR.tmp-PID left
expect2() {
    local what=$1 pat=$2; shift 2
    "$@" >"$tmp/out" 2>&1
    local rc=$?
    [ $rc = 2 ] && grep -qF -- "$pat" "$tmp/out" && [ -z "$(ls -d "$tmp"/*.tmp-* 2>/dev/null)" ] && ok ||
        bad "$what: exit $rc, expected 2 and \"$pat\": $(head -2 "$tmp/out")"
}
mkdir -p "$tmp/mine" && echo notes >"$tmp/mine/notes.txt"
expect2 "a folder of the user's" "notes.txt was not written by wpgen export" "$build/wpgen" export "$ck" -o "$tmp/mine"
[ "$(cat "$tmp/mine/notes.txt")" = notes ] && [ "$(ls "$tmp/mine")" = notes.txt ] && ok || bad "the user's folder changed"
echo '{}' >"$tmp/bf16/config.json"
expect2 "an edited export" "config.json was changed after wpgen export wrote it" "$build/wpgen" export "$ck" -o "$tmp/bf16"
echo x >"$tmp/file"
expect2 "-o a file" "exists and is a regular file, not a folder" "$build/wpgen" export "$ck" -o "$tmp/file"
expect2 "-o the checkpoint's folder" "holds the checkpoint" "$build/wpgen" export "$ck" -o "$ck"
expect2 "-o above the checkpoint" "holds the checkpoint" "$build/wpgen" export "$ck" -o "$tmp"
expect2 "a bad size" "--max-shard-size: expected a whole number of bytes" "$build/wpgen" export "$ck" -o "$tmp/x" --max-shard-size 5XB
expect2 "a bad dtype" "--dtype: expected bf16 or fp32" "$build/wpgen" export "$ck" -o "$tmp/x" --dtype fp16
expect2 "no checkpoint" "no checkpoint there" "$build/wpgen" export "$tmp/mine" -o "$tmp/x"
mkdir -p "$tmp/nocfg" && cp "$ck/checkpoint.json" "$tmp/nocfg/"
expect2 "no config.json" "no config.json beside the checkpoint" "$build/wpgen" export "$tmp/nocfg" -o "$tmp/x"
mkdir -p "$tmp/other" && cp "$ck/checkpoint.json" "$tmp/other/" &&
    sed 's/"num_hidden_layers": 4/"num_hidden_layers": 3/' "$ck/config.json" >"$tmp/other/config.json"
expect2 "a checkpoint of another shape" "is not part of this model" "$build/wpgen" export "$tmp/other" -o "$tmp/x"
[ ! -e "$tmp/x" ] && ok || bad "a refused export left $tmp/x"
# SIGTERM (as Ctrl-C) during an export over an earlier one: DIR is the old export or the new one,
# whole, and no DIR.tmp-PID is left, whenever the signal comes (57 shards of a small model)
mkdir -p "$tmp/cks"
"$build/wp-ref" -m small --synthetic --steps 0 --save "$tmp/cks/checkpoint.json" >/dev/null || bad "wp-ref -m small"
"$build/wpgen" export "$tmp/cks" -o "$tmp/sig" >/dev/null || bad "export of the small model"
for delay in 0.05 0.15 0.3; do
    WP_EXPORT_READ_LAYERS=1 "$build/wpgen" export "$tmp/cks" -o "$tmp/sig" --max-shard-size 1KB >/dev/null 2>&1 &
    pid=$!; sleep $delay; kill -TERM $pid 2>/dev/null; wait $pid; rc=$?
    n=$(ls "$tmp/sig" | wc -l)
    if [ -z "$(ls -d "$tmp"/sig.tmp-* 2>/dev/null)" ] && { { [ $rc = 143 ] && [ "$n" = 2 ]; } || { [ $rc = 0 ] && [ "$n" = 59 ]; }; }; then ok
    else bad "SIGTERM after ${delay}s: exit $rc, $n files in DIR: $(ls "$tmp" | grep sig)"; fi
    "$build/wpgen" export "$tmp/cks" -o "$tmp/sig" >/dev/null || bad "export again after the signal"   # back to one file
done
echo "export: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
