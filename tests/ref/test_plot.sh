#!/usr/bin/env bash
# scripts/plot.py draws real logs: two wp-ref runs (the second with val_loss added to some of its
# steps, as a validating run logs it) into a PNG of the size asked, tagged as the script's; a log
# that is not JSON lines (or not UTF-8, or a boolean step) and a -o that is not the script's PNG
# (a user's file, a FIFO, a directory) are refused (exit 2, the file named, nothing written); an existing plot is replaced. Skips, saying so, when matplotlib is
# neither importable nor installable (exit 3 of the script).
set -uo pipefail
build=${1:-build}
ref=$build/wp-ref
. tests/check.sh
plot=(python3 scripts/plot.py)

"$ref" -m tiny --synthetic --seq 16 --steps 12 --log "$tmp/a.jsonl" >/dev/null 2>&1 || bad "wp-ref a"
"$ref" -m tiny --synthetic --seq 16 --steps 12 --lr 3e-3 --schedule wsd --log "$tmp/b.jsonl" >/dev/null 2>&1 || bad "wp-ref b"
python3 - "$tmp/b.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[1], "w") as f:
    for r in rows:
        if r["step"] % 4 == 0: r["val_loss"] = r["loss"] + 0.1
        f.write(json.dumps(r) + "\n")
PY

# bad input refused before matplotlib is needed (so checked even where it is missing): a log that
# is not UTF-8, a step that is a JSON boolean (exit 2, file and line named); an -o that is a FIFO
# (refused, not opened: opening it would wait for a writer) or a directory
{ head -2 "$tmp/a.jsonl"; printf '{"step": 3, "loss": 1.0, "note": "ab\xff"}\n'; } >"$tmp/latin.jsonl"
timeout 20 "${plot[@]}" --log "$tmp/latin.jsonl" -o "$tmp/x.png" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "latin.jsonl: line 3: not UTF-8" "$tmp/err" && ! grep -q Traceback "$tmp/err" && ok || bad "non-UTF-8 log: $(tail -2 "$tmp/err")"
{ head -2 "$tmp/a.jsonl"; echo '{"step": true, "loss": 1.0}'; } >"$tmp/bool.jsonl"
timeout 20 "${plot[@]}" --log "$tmp/bool.jsonl" -o "$tmp/x.png" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q 'bool.jsonl: line 3: expected an object with an integer "step".*got true' "$tmp/err" && ok || bad "\"step\": true: $(tail -2 "$tmp/err")"
mkfifo "$tmp/fifo.png"
timeout 20 "${plot[@]}" --log "$tmp/a.jsonl" -o "$tmp/fifo.png" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "fifo.png: exists and is not a regular file" "$tmp/err" && [ -p "$tmp/fifo.png" ] && ok || bad "-o FIFO: $(tail -2 "$tmp/err")"
timeout 20 "${plot[@]}" --log "$tmp/a.jsonl" -o "$tmp" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "exists and is a directory" "$tmp/err" && ok || bad "-o DIR: $(tail -2 "$tmp/err")"

"${plot[@]}" --log "$tmp/a.jsonl" --log "$tmp/b.jsonl" -o "$tmp/curves.png" --title test >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 3 ]; then echo "plot: SKIP: $(tail -1 "$tmp/err")"; exit 0; fi
[ $rc = 0 ] && grep -q "a.jsonl (12 steps), b.jsonl (12 steps)" "$tmp/out" && ok || bad "plot: exit $rc: $(tail -2 "$tmp/err")"
# a PNG: its signature, 900 x 1000 pixels (9 x 10 inches at 100 dpi), the script's tag
python3 - "$tmp/curves.png" <<'PY' && ok || bad "not the PNG expected"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", b[:16]
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (900, 1000), (w, h)
assert b"wpgen scripts/plot.py" in b and len(b) > 20000, len(b)
PY
# the val_loss curve is drawn: the same plot without it differs
mkdir -p "$tmp/noval"
sed 's/, "val_loss": [^,}]*//' "$tmp/b.jsonl" >"$tmp/noval/b.jsonl"
grep -q val_loss "$tmp/noval/b.jsonl" && bad "val_loss not removed"
"${plot[@]}" --log "$tmp/noval/b.jsonl" -o "$tmp/noval.png" >/dev/null 2>&1 && "${plot[@]}" --log "$tmp/b.jsonl" -o "$tmp/val.png" >/dev/null 2>&1 &&
    ! cmp -s "$tmp/noval.png" "$tmp/val.png" && ok || bad "val_loss not drawn"
# replacing its own plot: allowed
"${plot[@]}" --log "$tmp/a.jsonl" -o "$tmp/curves.png" >/dev/null 2>&1 && ok || bad "replacing its own PNG"
# refusals: a file of the user's, a log as the output, a broken log, a missing one
echo "my notes" >"$tmp/notes.png"
"${plot[@]}" --log "$tmp/a.jsonl" -o "$tmp/notes.png" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "notes.png: exists and is not a plot this script wrote" "$tmp/err" && [ "$(cat "$tmp/notes.png")" = "my notes" ] &&
    ok || bad "-o over a user's file: $(cat "$tmp/err")"
"${plot[@]}" --log "$tmp/a.jsonl" -o "$tmp/a.jsonl" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "is --log" "$tmp/err" && ok || bad "-o naming the log: $(cat "$tmp/err")"
{ head -3 "$tmp/a.jsonl"; echo '{"step": 4, "loss": '; } >"$tmp/broken.jsonl"
"${plot[@]}" --log "$tmp/broken.jsonl" -o "$tmp/x.png" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "broken.jsonl: line 4: not JSON" "$tmp/err" && [ ! -e "$tmp/x.png" ] && ok || bad "broken log: $(cat "$tmp/err")"
"${plot[@]}" --log "$tmp/none.jsonl" -o "$tmp/x.png" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "none.jsonl: No such file" "$tmp/err" && ok || bad "missing log: $(cat "$tmp/err")"
[ -z "$(ls "$tmp" | grep '\.tmp-')" ] && ok || bad "temporaries left: $(ls "$tmp")"

echo "plot: $pass passed, $fail failed"
[ $fail = 0 ]
