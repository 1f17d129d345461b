#!/usr/bin/env bash
# `wpgen data` on hostile input (issue 38's M1-M6 and its low ones): every bad input exit 2 with
# one line naming the file and line (invalid UTF-8 in JSONL and text, a lone surrogate escape, a
# tokenizer whose regex panics in its Rust code), no traceback, nothing written; a sparse
# vocabulary's header says largest id + 1; SIGTERM and SIGHUP remove DIR.tmp-PID, and a SIGKILLed
# run's is removed by the next run while folders it cannot prove its own are kept; one large
# document tokenized in bounded memory with the tokens of the whole (pieces cut before a space);
# .JSONL read as JSONL; --name checked, no control character echoed; the reader's fuzz harness
# (tests/fuzz/fuzz_data.py) over its seeds and a few hundred mutations, seeded. Seconds.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
W=("$build/wpgen" data)
py=(env PYTHONPATH="$PWD/scripts" python3)

# two tokenizers trained here: a small BPE on words, and a byte-level one (as GPT-2's); a copy of
# the first with a hostile pre-tokenizer regex, one with a sparse vocabulary (an id of 70000)
"${py[@]}" - "$tmp" <<'PY' || { echo "FAIL: tokenizers"; echo "0 passed, 1 failed"; exit 1; }
import json, random, sys, tokenize_data
tk = tokenize_data.import_tokenizers()
d = sys.argv[1]
random.seed(2)
words = ["hello", "world", "this", "is", "a", "test", "of", "the", "quick", "brown", "fox", "don't", "123", "!!", "café"]
seps = [" ", " ", " ", "  ", "\n", "\n\n", " \n", "\t", ". "]
text = "".join(random.choice(words) + random.choice(seps) for _ in range(120000))   # 700 KB
open(f"{d}/mix.txt", "w").write(text)
for name, pre in [("words", tk.pre_tokenizers.Whitespace()), ("bytes", tk.pre_tokenizers.ByteLevel(add_prefix_space=False))]:
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = pre
    tok.train_from_iterator([text[:100000]], tk.trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
        show_progress=False, initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet() if name == "bytes" else []))
    tok.save(f"{d}/{name}.json")
j = json.load(open(f"{d}/words.json"))
j["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(\\w+\\s?)*$"}, "behavior": "Isolated", "invert": False}
json.dump(j, open(f"{d}/hostile.json", "w"))
j = json.load(open(f"{d}/words.json"))
j["model"]["vocab"]["z"] = 70000
json.dump(j, open(f"{d}/sparse.json", "w"))
PY
T=$tmp/words.json

refused() {   # WHAT EXPECTED-TEXT ARGS...: exit 2, the text, no traceback or panic, nothing left
    local what=$1 want=$2; shift 2
    rm -rf "$tmp/out"
    "${W[@]}" --tokenizer "$T" -o "$tmp/out" "$@" >"$tmp/log" 2>&1
    local rc=$?
    [ $rc = 2 ] && grep -qF -- "$want" "$tmp/log" && ! grep -qE "Traceback|panicked|backtrace" "$tmp/log" &&
        [ "$(wc -l <"$tmp/log")" = 1 ] && [ ! -e "$tmp/out" ] && ! ls -d "$tmp"/out.tmp-* >/dev/null 2>&1 && ok ||
        bad "$what: exit $rc: $(head -c 400 "$tmp/log")"
}
# M1: invalid UTF-8, in JSONL (file, line, byte) and in a text file (its line)
printf '{"text":"fine"}\n{"text":"ab\xff"}\n' >"$tmp/bad.jsonl"
refused "invalid UTF-8 in JSONL" "bad.jsonl:2: not UTF-8 (byte 12 of the line is 0xff)" "$tmp/bad.jsonl"
printf 'one\ntwo\nthr\xc3e\n' >"$tmp/bad.txt"
refused "invalid UTF-8 in text" "bad.txt:3: not UTF-8 (byte 12 of the file is 0xc3)" "$tmp/bad.txt"
# M2: a lone surrogate escape, naming the field
printf '{"text":"a\\ud800b"}\n' >"$tmp/sur.jsonl"
refused "a lone surrogate" 'sur.jsonl:1: field "text": a lone surrogate \ud800 at character 2' "$tmp/sur.jsonl"
printf '%s\n' "$(python3 -c 'print("[" * 100000)')" >"$tmp/deep.jsonl"
refused "JSON nested too deeply" "deep.jsonl:1: not a JSON object" "$tmp/deep.jsonl"
# M4: a pre-tokenizer regex over Onig's retry limit: the document named, the panic's own output kept off
printf '{"text":"hello"}\n{"text":"aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}\n' >"$tmp/slow.jsonl"
T=$tmp/hostile.json refused "a hostile tokenizer" "slow.jsonl:2: the tokenizer $tmp/hostile.json fails on this document (Onig" \
    "$tmp/slow.jsonl"
# M3: a sparse vocabulary: the header says largest id + 1 and the width holds it (uint32 by
# default); --width uint16 is refused
printf '{"text":"hello z world"}\n' >"$tmp/z.jsonl"
"${W[@]}" --tokenizer "$tmp/sparse.json" -o "$tmp/sp" "$tmp/z.jsonl" >"$tmp/log" 2>&1 &&
    python3 - "$tmp/sp/train-00000.bin" <<'PY' && grep -q "vocabulary 70001; its largest id + 1, of" "$tmp/log" && ok || bad "sparse vocabulary: $(cat "$tmp/log")"
import struct, sys
b = open(sys.argv[1], "rb").read()
h = struct.unpack("<256i", b[:1024])
assert h[0] == 20240801 and h[5] == 70001 and h[6] == 4, h[:7]
assert 70000 in struct.unpack(f"<{h[2]}I", b[1024:]), "id 70000 written"
PY
T=$tmp/sparse.json refused "sparse vocabulary --width uint16" "--width uint16: the largest token id of $tmp/sparse.json is 70000, more than 65535" \
    --width uint16 "$tmp/z.jsonl"
# low: --name not UTF-8, with ESC or a newline, too long: refused, shown escaped
refused "--name with ESC" '--name a\x1b[31mb: a control character at character 2' --name $'a\e[31mb' "$tmp/z.jsonl"
grep -q $'\e' "$tmp/log" && bad "ESC echoed" || ok
refused "--name not UTF-8" '--name \xff: not UTF-8 text' --name $'\xff' "$tmp/z.jsonl"
refused "--name too long" "--name: 400 bytes in UTF-8, expected 1 to 255" --name "$(printf 'é%.0s' $(seq 200))" "$tmp/z.jsonl"
# the default name, the tokenizer's folder's, holding ESC: '?' in the header and the summary
mkdir "$tmp/we"$'\e'"ird" && cp "$T" "$tmp/we"$'\e'"ird/tokenizer.json"
"${W[@]}" --tokenizer "$tmp/we"$'\e'"ird/tokenizer.json" -o "$tmp/esc" "$tmp/z.jsonl" >"$tmp/log" 2>&1 &&
    grep -q "tokenizer we?ird " "$tmp/log" && ! grep -q $'\e' "$tmp/log" &&
    [ "$(head -c 70 "$tmp/esc/train-00000.bin" | tail -c 6)" = "we?ird" ] && ok || bad "a name with ESC: $(cat -v "$tmp/log")"
# low: .JSONL in any case is JSONL
printf '{"text":"hello"}\n{"text":"world"}\n' >"$tmp/UP.JSONL"
"${W[@]}" --tokenizer "$T" -o "$tmp/up" "$tmp/UP.JSONL" >"$tmp/log" 2>&1 && grep -q "^wpgen data: 2 documents" "$tmp/log" && ok ||
    bad ".JSONL: $(cat "$tmp/log")"

# M6: one 8 MB document in bounded memory (60 MB measured; a 16 MB one the same): under 200 MB
# resident, where holding it whole took about 120 bytes a byte (1 GB); its tokens those of the
# whole document, here under the byte-level tokenizer for 700 KB (about 10 pieces)
python3 -c 'import sys; t = open(sys.argv[1]).read(); open(sys.argv[2], "w").write(t * 12)' "$tmp/mix.txt" "$tmp/big.txt"
python3 - "$build/wpgen" "$T" "$tmp/bigout" "$tmp/big.txt" <<'PY' && ok || bad "memory of one large document"
import resource, subprocess, sys
r = subprocess.run([sys.argv[1], "data", "--tokenizer", sys.argv[2], "-o", sys.argv[3], sys.argv[4]], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"data: one 8 MB document, peak {peak:.0f} MB resident")
assert r.returncode == 0 and peak < 200, (r.returncode, r.stderr[-300:], peak)
PY
"${W[@]}" --tokenizer "$tmp/bytes.json" -o "$tmp/mixout" "$tmp/mix.txt" >"$tmp/log" 2>&1 &&
"${py[@]}" - "$tmp/bytes.json" "$tmp/mix.txt" "$tmp/mixout/train-00000.bin" <<'PY' && ok || bad "pieces: not the whole document's tokens"
import struct, sys, tokenize_data
tk = tokenize_data.import_tokenizers()
ids = tk.Tokenizer.from_file(sys.argv[1]).encode(open(sys.argv[2]).read(), add_special_tokens=False).ids
b = open(sys.argv[3], "rb").read()
h = struct.unpack("<256i", b[:1024])
got = struct.unpack(f"<{h[2]}H", b[1024:])
assert len(open(sys.argv[2]).read()) > 4 * tokenize_data.PIECE_CHARS
assert list(got) == [0] + ids, (len(got), len(ids))
PY

# M5: SIGTERM and SIGHUP mid-run remove DIR.tmp-PID (killed by the signal, as sent); a SIGKILLed
# run's is removed by the next run, which keeps a DIR.tmp-PID without the marker, one holding a
# file of the user's, and one of a live process
midway() {   # SIGNAL: wpgen data on big.txt, stopped once it has begun to write (so surely mid-way), signalled
    rm -rf "$tmp/k" "$tmp"/k.tmp-*
    "${W[@]}" --tokenizer "$T" -o "$tmp/k" "$tmp/big.txt" >"$tmp/klog" 2>&1 &
    local pid=$! i
    for i in $(seq 1000); do ls "$tmp"/k.tmp-*/train-00000.bin >/dev/null 2>&1 && break; sleep 0.01; done
    kill -STOP $pid
    ls "$tmp"/k.tmp-*/train-00000.bin >/dev/null 2>&1 || bad "wpgen data on big.txt: no shard in k.tmp-PID before the signal"
    kill -"$1" $pid
    kill -CONT $pid 2>/dev/null
    wait $pid 2>/dev/null
}
midway TERM; rc=$?
[ $rc = 143 ] && grep -q "killed by SIGTERM; nothing was written" "$tmp/klog" && ! ls -d "$tmp"/k.tmp-* >/dev/null 2>&1 && ok ||
    bad "SIGTERM: exit $rc, $(cat "$tmp/klog"; ls -d "$tmp"/k.tmp-* 2>&1)"
midway HUP; rc=$?
[ $rc = 129 ] && ! ls -d "$tmp"/k.tmp-* >/dev/null 2>&1 && ok || bad "SIGHUP: exit $rc, $(ls -d "$tmp"/k.tmp-* 2>&1)"
midway KILL
left=$(ls -d "$tmp"/k.tmp-* 2>/dev/null)
[ -n "$left" ] && [ -f "$left/.wpgen-data-tmp" ] && ok || bad "SIGKILL left no marked DIR.tmp-PID: '$left'"
sh -c 'exit 0' & dead=$!; wait $dead
mkdir "$tmp/k.tmp-$dead"; echo "mine" >"$tmp/k.tmp-$dead/notes.txt"                 # no marker: not ours
cp -r "$left" "$tmp/k.tmp-1"                                                          # pid 1 lives
mkdir "$tmp/k.tmp-$((dead + 1))"; sed "s/\"pid\": [0-9]*/\"pid\": $((dead + 1))/" "$left/.wpgen-data-tmp" \
    >"$tmp/k.tmp-$((dead + 1))/.wpgen-data-tmp"; echo mine >"$tmp/k.tmp-$((dead + 1))/notes.txt"   # a user's file in it
printf '{"text":"hello"}\n' >"$tmp/small.jsonl"
"${W[@]}" --tokenizer "$T" -o "$tmp/k" "$tmp/small.jsonl" >"$tmp/log" 2>&1 && [ ! -e "$left" ] &&
    grep -q "removed $left, left by an earlier run" "$tmp/log" && [ -f "$tmp/k.tmp-$dead/notes.txt" ] &&
    [ -d "$tmp/k.tmp-1" ] && [ -f "$tmp/k.tmp-$((dead + 1))/notes.txt" ] && [ ! -e "$tmp/k/.wpgen-data-tmp" ] && ok ||
    bad "a stale DIR.tmp-PID: $(cat "$tmp/log"; ls -d "$tmp"/k.tmp-*)"

# the reader's fuzz harness: its seeds, its regression cases and 400 seeded mutations
WPGEN_FUZZ_PLAIN=1 timeout 120 python3 tests/fuzz/fuzz_data.py -seed=1 -runs=400 tests/fuzz/corpus/data tests/fuzz/seeds/data \
    >"$tmp/log" 2>&1 && grep -q "number_of_executed_units: 400" "$tmp/log" && ok || bad "fuzz_data: $(tail -5 "$tmp/log")"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
