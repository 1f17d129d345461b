#!/usr/bin/env bash
# wpgen export's refusals and its folder rules, without torch (test_export.sh loads exports in
# transformers): -o a symbolic link to a folder, with or without a trailing slash, is that folder
# (as for wpgen emit, emit/outdir.c, and wpgen data), a link to a file or to nothing is refused saying it is a
# link; a DIR.tmp-PID left by an export killed outright (SIGKILL) is removed by the next export to
# DIR, said on stderr, but never one whose process runs or that lacks the export's marker;
# --max-shard-size takes a whole number with a unit, at least 1KB; NaN or infinite weights are
# refused naming the tensor and the first bad index (exit 2, nothing written).
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

ck=$tmp/ck
mkdir -p "$ck"
"$build/wp-ref" -m tiny --synthetic --seq 16 --steps 1 --save "$ck/checkpoint.json" >/dev/null 2>&1 || { echo "wp-ref --save failed"; exit 1; }
x() { "$wpgen" export "$ck" "$@" >"$tmp/out" 2>"$tmp/err"; }

# -o LINK and -o LINK/ (a link to a folder): the export goes into the folder, the link stays
mkdir -p "$tmp/real"
ln -s real "$tmp/link"
for o in "$tmp/link/" "$tmp/link"; do
    x -o "$o" && [ -L "$tmp/link" ] && [ -f "$tmp/real/model.safetensors" ] && ok || bad "-o $o: exit $?: $(cat "$tmp/err")"
done
[ -z "$(ls "$tmp" | grep tmp-)" ] && ok || bad "-o LINK left $(ls "$tmp")"
echo mine >"$tmp/file"
ln -s file "$tmp/flink"
ln -s nowhere "$tmp/dangling"
for o in "$tmp/flink/" "$tmp/flink"; do
    x -o "$o"
    [ $? = 2 ] && grep -q "flink is a symbolic link to file, which is a regular file, not a folder" "$tmp/err" &&
        [ "$(cat "$tmp/file")" = mine ] && ok || bad "-o $o (a link to a file): $(cat "$tmp/err")"
done
x -o "$tmp/dangling/"
[ $? = 2 ] && grep -q "dangling is a symbolic link to nowhere, which does not exist" "$tmp/err" && ok ||
    bad "-o a dangling link: $(cat "$tmp/err")"
x -o "$tmp/file"
[ $? = 2 ] && grep -q "exists and is a regular file, not a folder" "$tmp/err" && ok || bad "-o a file: $(cat "$tmp/err")"
# wpgen data reads -o LINK the same way (its checks come before the tokenizer is read)
echo hi >"$tmp/in.txt"; echo "{}" >"$tmp/tok.json"
for o in "$tmp/flink" "$tmp/flink/"; do
    "$wpgen" data --tokenizer "$tmp/tok.json" -o "$o" "$tmp/in.txt" >/dev/null 2>"$tmp/err"
    [ $? = 2 ] && grep -q "flink is a symbolic link to file, which is not a directory" "$tmp/err" && ok || bad "data -o $o: $(cat "$tmp/err")"
done
"$wpgen" data --tokenizer "$tmp/tok.json" -o "$tmp/link" "$tmp/in.txt" >/dev/null 2>"$tmp/err"
! grep -q "not a directory" "$tmp/err" && ok || bad "data -o LINK (to a folder) refused: $(cat "$tmp/err")"

# an export killed outright: its DIR.tmp-PID (with the marker) goes at the next export, said;
# one without the marker, or of a running process, stays
WP_EXPORT_READ_LAYERS=1 "$wpgen" export "$ck" -o "$tmp/out1" --max-shard-size 1KB >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do [ -n "$(ls "$tmp/out1.tmp-$pid" 2>/dev/null)" ] && break; sleep 0.02; done
kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
if [ -d "$tmp/out1.tmp-$pid" ]; then
    [ -f "$tmp/out1.tmp-$pid/.wpgen-export-building" ] && ok || bad "no marker in the killed export's folder"
else   # it finished before the kill: make the leftover it would have left
    mkdir "$tmp/out1.tmp-$pid" && echo x >"$tmp/out1.tmp-$pid/.wpgen-export-building" && echo x >"$tmp/out1.tmp-$pid/model.safetensors"
fi
mkdir "$tmp/out1.tmp-999999999" && echo mine >"$tmp/out1.tmp-999999999/notes"   # not ours: no marker
sleep 30 & live=$!
mkdir "$tmp/out1.tmp-$live" && echo x >"$tmp/out1.tmp-$live/.wpgen-export-building"   # a running process's
x -o "$tmp/out1"
rc=$?
[ $rc = 0 ] && [ ! -e "$tmp/out1.tmp-$pid" ] && grep -q "removed $tmp/out1.tmp-$pid, left by a run that was killed" "$tmp/err" &&
    ok || bad "a killed export's folder: exit $rc: $(cat "$tmp/err"): $(ls "$tmp")"
[ "$(cat "$tmp/out1.tmp-999999999/notes")" = mine ] && [ -f "$tmp/out1.tmp-$live/.wpgen-export-building" ] && ok ||
    bad "removed what it could not prove its own: $(ls "$tmp")"
kill $live; wait $live 2>/dev/null
[ ! -e "$tmp/out1/.wpgen-export-building" ] && ok || bad "the marker stayed in the export"

# --max-shard-size: a whole number with a unit, from 1KB
for v in 0x10 1e-9GB 1.5 999 -5GB; do
    x -o "$tmp/x" --max-shard-size "$v"
    [ $? = 2 ] && grep -q "expected a whole number of bytes from 1000 (1KB) to 1PB" "$tmp/err" && [ ! -e "$tmp/x" ] && ok ||
        bad "--max-shard-size $v: $(cat "$tmp/err")"
done
x -o "$tmp/x" --max-shard-size 2kib && ok || bad "--max-shard-size 2kib: $(cat "$tmp/err")"

# NaN or infinite weights: refused naming the tensor and its first bad element, nothing written
. tests/ckpt.sh
mkdir -p "$tmp/cknan"
cp "$ck/checkpoint.json" "$ck/config.json" $(ckpt_shards "$ck/checkpoint.json") "$tmp/cknan/"
ckpt_poke "$tmp/cknan/checkpoint.json" model.layers.1.mlp.up_proj.weight inf
"$wpgen" export "$tmp/cknan" -o "$tmp/nan" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "tensor model.layers.1.mlp.up_proj.weight\[0, 1\] is inf (first of its elements that is not finite)" "$tmp/err" &&
    [ ! -e "$tmp/nan" ] && [ -z "$(ls -d "$tmp"/nan.tmp-* 2>/dev/null)" ] && ok || bad "inf weights exported: $(cat "$tmp/err")"

echo "export_errors: $pass passed, $fail failed"
[ $fail = 0 ]
