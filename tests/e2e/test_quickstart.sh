#!/usr/bin/env bash
# The README's quick start, as written: its ```sh blocks (the section "Quick start") run one after
# the other in a fresh folder that holds what the README says you bring (my-tokenizer/, a BPE
# tokenizer trained here; my-corpus/*.txt, the GPL's paragraphs as text files) and links to this
# checkout's build/, topologies/, tests/ and scripts/. Every command must succeed (bash -e), and
# what each step promises must be there: the plan compared with a budget, the program emitted,
# shards with a held-out split, a run whose loss and held-out loss went down and whose checkpoint
# was saved, the evaluation's loss, a folder transformers loads (with the tokenizer and the
# special-token ids), the plot; then the cluster's sim, whose budget line the README quotes, and
# its CUDA program emitted. A README edit that breaks a command fails here.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
top=$PWD

qs=$tmp/qs
mkdir -p "$qs/my-tokenizer" "$qs/my-corpus"
for d in topologies tests scripts; do ln -s "$top/$d" "$qs/$d"; done
ln -s "$(cd "$build" && pwd)" "$qs/build"
corpus_and_tokenizer "$tmp" text >"$tmp/tok.out" 2>&1 || { echo "FAIL: tokenizer: $(tail -2 "$tmp/tok.out")"; echo "0 passed, 1 failed"; exit 1; }
cp "$tmp/tokenizer.json" "$qs/my-tokenizer/"
# the corpus as 24 text files, one document each
python3 - "$tmp/corpus.jsonl" "$qs/my-corpus" <<'PY'
import json, sys
paras = [json.loads(l)["text"] for l in open(sys.argv[1])]
for i in range(24):
    open(f"{sys.argv[2]}/doc{i:02d}.txt", "w").write("\n\n".join(paras[i::24]) + "\n")
PY

# the blocks of the section, in order (a command may go on over lines ending in \)
python3 - README.md "$tmp/block" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
sec = text[text.index("\n## Quick start"):]
sec = sec[:sec.index("\n## ", 1)]
blocks = re.findall(r"```sh\n(.*?)```", sec, re.S)
assert len(blocks) == 2, len(blocks)
for i, b in enumerate(blocks):
    open(f"{sys.argv[2]}{i}.sh", "w").write("set -ex\n" + b)
PY
[ -f "$tmp/block0.sh" ] && ok || { bad "README: no quick start blocks"; echo "$pass passed, $fail failed"; exit 1; }

(cd "$qs" && bash "$tmp/block0.sh") >"$tmp/qs.out" 2>&1
rc=$?
[ $rc = 0 ] && ok || bad "the laptop block: exit $rc: $(grep -v '^step ' "$tmp/qs.out" | tail -8)"
o=$qs/out
grep -q "^budget: 10000000 tokens" "$tmp/qs.out" && grep -q "<- fastest" "$tmp/qs.out" && ok || bad "1. compare --tokens 10M"
[ -x "$o/run/run.sh" ] && [ -f "$o/run/job.sbatch" ] && [ -x "$o/run/train" ] && ok || bad "2. emit -s auto: $(ls "$o/run" 2>&1 | head -3)"
ls "$o/shards"/train-*.bin >/dev/null 2>&1 && ls "$o/shards"/val-*.bin >/dev/null 2>&1 && ok || bad "3. data: $(ls "$o/shards" 2>&1)"
python3 - "$o/train.jsonl" <<'PY' && ok || bad "4. train: the log $(tail -c 300 "$o/train.jsonl" 2>&1)"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "loss" in r]
val = [r["val_loss"] for r in rows if "val_loss" in r]
assert steps[-1]["step"] == 200, steps[-1]
assert sum(r["loss"] for r in steps[-20:]) < 0.8 * sum(r["loss"] for r in steps[:20]), "loss did not go down"
assert len(val) == 4 and val[-1] < val[0], val
PY
[ -f "$o/ckpt/checkpoint.json" ] && grep -q "checkpoint of step 200" "$tmp/qs.out" && ok || bad "4. the checkpoint"
grep -Eq "loss [0-9.]+.*perplexity [0-9.]+" "$tmp/qs.out" && ok || bad "5. eval: $(grep -i perplex "$tmp/qs.out")"
[ -f "$o/hf/model.safetensors" ] && [ -f "$o/hf/tokenizer.json" ] && [ -f "$o/hf/config.json" ] && [ -f "$o/hf/generation_config.json" ] &&
    ok || bad "6. export: $(ls "$o/hf" 2>&1)"
head -c 8 "$o/loss.png" 2>/dev/null | grep -q PNG && ok || bad "7. plot: $(tail -3 "$tmp/qs.out")"

(cd "$qs" && bash "$tmp/block1.sh") >"$tmp/big.out" 2>&1
rc=$?
[ $rc = 0 ] && [ -f "$o/big/job.sbatch" ] && grep -q "backend.*cuda\|cuda" "$o/big/Makefile" && ok || bad "the cluster block: exit $rc: $(tail -5 "$tmp/big.out")"
# the budget the README quotes is the one sim prints
quoted=$(python3 -c 'import re,sys; t=" ".join(open("README.md").read().split()); print(re.search(r"`(100B tokens = [^`]*?) \.\.\.", t).group(1))')
budget=$(grep "^budget " "$tmp/big.out" | tr -s ' ')
[ -n "$quoted" ] && [[ "$budget" == *"$quoted"* ]] && ok || bad "README quotes '$quoted', sim prints '$budget'"

echo "quick start: $pass passed, $fail failed"
[ "$fail" = 0 ]
