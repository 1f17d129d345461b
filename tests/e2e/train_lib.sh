# Shared by the tests of emitted training programs (test_train, test_train_ckpt, test_kill,
# test_data, test_quickstart): sourced after `build=...; cd` to the repository. A temporary
# directory, mpirun's flags, the pass/fail counters, the small plan they all train, a corpus with
# a tokenizer trained on it, and what a committed checkpoint says.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
model=tests/data/tiny8/config.json
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# weipipe-interleave on cpu-2x2 with the tiny8 model, emitted into DIR and built
emit_tiny8() {   # DIR
    "$build/wpgen" emit -t topologies/cpu-2x2.json -m "$model" --micro-batch-size 2 -s weipipe-interleave --micro-batches 2 \
        -o "$1" >/dev/null && bash tests/make_emitted.sh "$1" >/dev/null 2>&1
}

# corpus_and_tokenizer DIR FIELD: the GPL's paragraphs (a text every Debian system has) as a JSONL
# corpus DIR/corpus.jsonl, one document a line in FIELD, and a BPE tokenizer of 250 tokens
# trained on them, DIR/tokenizer.json, with the tokenizers package where wpgen data takes it from
# (installing it if missing): no network needed where it is installed
corpus_and_tokenizer() {
    local text=/usr/share/common-licenses/GPL-3
    [ -f "$text" ] || text=$(ls /usr/share/common-licenses/* | head -n 1)
    local py=(env PYTHONPATH="$PWD/scripts" python3)
    "${py[@]}" -c 'import tokenize_data; tokenize_data.import_tokenizers()' || { echo "no tokenizers package"; return 1; }
    "${py[@]}" - "$text" "$1" "$2" <<'PY'
import json, sys, tokenize_data
tk = tokenize_data.import_tokenizers()
text = open(sys.argv[1], encoding="utf-8").read()
paras = [p.strip() for p in text.split("\n\n") if p.strip()]
with open(f"{sys.argv[2]}/corpus.jsonl", "w") as f:
    for p in paras:
        f.write(json.dumps({sys.argv[3]: p}) + "\n")
tok = tk.Tokenizer(tk.models.BPE())
tok.pre_tokenizer = tk.pre_tokenizers.Whitespace()
tok.train_from_iterator(paras, tk.trainers.BpeTrainer(vocab_size=250, special_tokens=["<|endoftext|>"], show_progress=False))
tok.save(f"{sys.argv[2]}/tokenizer.json")
PY
}

# what a committed checkpoint says: ckpt_step, ckpt_shards, same_ckpt, ckpt_poke
source tests/ckpt.sh
