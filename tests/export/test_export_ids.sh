#!/usr/bin/env bash
# wpgen export carries the special-token ids (generator/export/special_tokens.c), without torch:
# generation_config.json and config.json get bos_token_id/eos_token_id from the checkpoint's
# config.json when it has them, else from tokenizer_config.json's names looked up in
# tokenizer.json, else from tokenizer.json's special tokens by their usual names; an id outside
# the vocabulary is refused (exit 2, nothing written); with no ids known no generation_config.json
# is made up; one beside the checkpoint is copied as it is.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

ck=$tmp/ck
mkdir -p "$ck"
"$build/wp-ref" -m tests/data/tiny8/config.json --synthetic --steps 1 --save "$ck/checkpoint.json" >/dev/null 2>&1 ||
    { echo "wp-ref --save failed"; exit 1; }
cp "$ck/config.json" "$tmp/config.orig"
n=0
x() { n=$((n + 1)); out=$tmp/out$n; "$wpgen" export "$ck" -o "$out" >"$tmp/stdout" 2>"$tmp/err"; }
# ids OUT KEY...: the ids in OUT/FILE as "bos eos" (compact JSON)
ids() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get("bos_token_id")), json.dumps(d.get("eos_token_id")).replace(" ", ""))' "$1"; }
check() {   # WHAT, EXPECTED "bos eos"
    local g c
    g=$(ids "$out/generation_config.json" 2>/dev/null); c=$(ids "$out/config.json")
    [ "$g" = "$2" ] && [ "$c" = "$2" ] && grep -q " generation_config.json$" "$out/.wpgen-export" && ok ||
        bad "$1: generation_config.json '$g', config.json '$c', expected '$2' ($(cat "$tmp/err" "$tmp/stdout"))"
}

# no tokenizer, no ids in the config: none made up
x && [ ! -e "$out/generation_config.json" ] && ! grep -q token_id "$out/config.json" && grep -q "token ids: bos none, eos none" "$tmp/stdout" && ok ||
    bad "no ids known: $(ls "$out") $(cat "$tmp/err" "$tmp/stdout")"

# tokenizer.json's special tokens by their names (a non-special "<s>" is not one)
cat >"$ck/tokenizer.json" <<'J'
{"version": "1.0", "added_tokens": [
  {"id": 0, "content": "<unk>", "special": true},
  {"id": 3, "content": "<s>", "special": false},
  {"id": 1, "content": "<|begin_of_text|>", "special": true},
  {"id": 2, "content": "</s>", "special": true},
  {"id": 5, "content": "<|a|>", "special": true},
  {"id": 6, "content": "<|b|>", "special": true}], "model": {"type": "BPE", "vocab": {}}}
J
x; check "tokenizer.json's special tokens" "1 2"
grep -q "token ids: bos 1 (tokenizer.json), eos 2 (tokenizer.json)" "$tmp/stdout" && ok || bad "the report: $(cat "$tmp/stdout")"

# tokenizer_config.json's names win over the usual ones
echo '{"bos_token": {"content": "<|a|>"}, "eos_token": "<|b|>"}' >"$ck/tokenizer_config.json"
x; check "tokenizer_config.json's names" "5 6"

# the checkpoint's config.json's keys win over the tokenizer (eos a list, as Llama 3's)
python3 - "$ck/config.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["bos_token_id"] = 7; d["eos_token_id"] = [8, 9]
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
x; check "config.json's keys" "7 [8,9]"

# an id outside the vocabulary (256): refused, nothing written
python3 - "$ck/config.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["eos_token_id"] = 300
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
x; rc=$?
[ $rc = 2 ] && grep -qF "config.json: eos_token_id: expected null or a token id in [0, 255] (vocab_size 256), or a list of 1 to 8 of them, got 300" "$tmp/err" && [ ! -e "$out" ] &&
    [ -z "$(ls "$tmp" | grep tmp-)" ] && ok || bad "eos_token_id 300: exit $rc: $(cat "$tmp/err")"
cp "$tmp/config.orig" "$ck/config.json"
echo '{"bos_token": "<s>", "eos_token": "</s>"}' >"$ck/tokenizer_config.json"
sed -i 's/"id": 2, "content": "<\/s>"/"id": 256, "content": "<\/s>"/' "$ck/tokenizer.json"
x; rc=$?
[ $rc = 2 ] && grep -q 'tokenizer_config.json: eos_token "</s>" is token 256, outside the model.s vocabulary \[0, 255\]' "$tmp/err" &&
    [ ! -e "$out" ] && ok || bad "a tokenizer's eos 256: exit $rc: $(cat "$tmp/err")"

# a generation_config.json beside the checkpoint is the user's: copied as it is
rm "$ck/tokenizer_config.json"
sed -i 's/"id": 256/"id": 2/' "$ck/tokenizer.json"
echo '{"eos_token_id": 2, "temperature": 0.7}' >"$ck/generation_config.json"
x && cmp -s "$ck/generation_config.json" "$out/generation_config.json" && [ "$(ids "$out/config.json")" = "1 2" ] && ok ||
    bad "generation_config.json beside: $(cat "$out/generation_config.json" "$tmp/err")"

echo "export ids: $pass passed, $fail failed"
[ $fail = 0 ]
