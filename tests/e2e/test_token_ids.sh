#!/usr/bin/env bash
# The special-token ids of a model's config.json (bos_token_id, eos_token_id as an id or a list,
# pad_token_id) survive training: the config.json a checkpoint writes keeps them as they were
# read, from wp-ref and from an emitted program (through the plan: templates/plan_desc.c.tpl), so
# that wpgen export and transformers' generate() find them; an id outside the vocabulary, or a
# list too long, is refused by name (exit 2) by wpgen and wp-ref alike.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
export OMP_NUM_THREADS=1

# ids CONFIG: "bos eos pad" as compact JSON (null where absent)
ids() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(json.dumps(d.get(k)).replace(" ", "") for k in ("bos_token_id", "eos_token_id", "pad_token_id")))' "$1"; }
# with_ids OUT BOS EOS PAD: tiny8's config.json with those values (JSON)
with_ids() {
    mkdir -p "$(dirname "$1")"
    python3 - "$@" <<'PY'
import json, sys
c = json.load(open("tests/data/tiny8/config.json"))
for k, v in zip(("bos_token_id", "eos_token_id", "pad_token_id"), sys.argv[2:]): c[k] = json.loads(v)
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
}

with_ids "$tmp/m/config.json" 1 '[2, 3]' 0
mkdir -p "$tmp/ref" "$tmp/ck"
"$build/wp-ref" -m "$tmp/m/config.json" --synthetic --steps 1 --save "$tmp/ref/checkpoint.json" >"$tmp/out" 2>&1
got=$(ids "$tmp/ref/config.json" 2>&1)
[ "$got" = "1 [2,3] 0" ] && ok || bad "wp-ref's config.json: '$got' ($(tail -2 "$tmp/out"))"

with_ids "$tmp/m2/config.json" 5 7 null
"$wpgen" emit -t topologies/cpu-1x1.json -m "$tmp/m2/config.json" -s 1f1b -o "$tmp/run" >/dev/null 2>"$tmp/err" &&
    "$tmp/run/run.sh" --synthetic --steps 1 --save "$tmp/ck/checkpoint.json" >"$tmp/out" 2>&1
got=$(ids "$tmp/ck/config.json" 2>&1)
[ "$got" = "5 7 null" ] && ok || bad "train's config.json: '$got' ($(cat "$tmp/err"; tail -2 "$tmp/out"))"
# and it reads back as the same model with the same ids: resumed from, saved again
"$build/wp-ref" -m "$tmp/ck" --synthetic --steps 2 --micro-batches 4 --resume "$tmp/ck/checkpoint.json" --save "$tmp/ck/checkpoint.json" >"$tmp/out" 2>&1
rc=$?
got=$(ids "$tmp/ck/config.json" 2>&1)
[ $rc = 0 ] && grep -q "checkpoint of step 2" "$tmp/out" && [ "$got" = "5 7 null" ] && ok || bad "resumed and saved again: '$got' ($(tail -2 "$tmp/out"))"

# refused by name, by wpgen and wp-ref (tiny8's vocabulary: 256)
with_ids "$tmp/b1/config.json" 1 300 null
expect 2 "$tmp/b1/config.json: eos_token_id: expected null or a token id in [0, 255] (vocab_size 256), or a list of 1 to 8 of them, got 300" \
    -- plan -t topologies/cpu-1x1.json -m "$tmp/b1/config.json" -s 1f1b
with_ids "$tmp/b2/config.json" -1 2 null
"$build/wp-ref" -m "$tmp/b2/config.json" --synthetic --steps 1 >"$tmp/out" 2>&1
[ $? = 2 ] && grep -qF "bos_token_id: expected null or a token id in [0, 255] (vocab_size 256), got -1" "$tmp/out" && ok ||
    bad "wp-ref, bos_token_id -1: $(tail -2 "$tmp/out")"
with_ids "$tmp/b3/config.json" 1 '[1,2,3,4,5,6,7,8,9]' null
expect 2 "eos_token_id: expected null or a token id in [0, 255] (vocab_size 256), or a list of 1 to 8 of them, got an array" \
    -- plan -t topologies/cpu-1x1.json -m "$tmp/b3/config.json" -s 1f1b
with_ids "$tmp/b4/config.json" '[1]' 2 null
expect 2 "bos_token_id: expected null or a token id in [0, 255] (vocab_size 256), got an array" \
    -- plan -t topologies/cpu-1x1.json -m "$tmp/b4/config.json" -s 1f1b

echo "token ids: $pass passed, $fail failed"
[ "$fail" = 0 ]
