#!/usr/bin/env bash
# An emitted folder is on disk when wpgen emit returns (common/durable.h): every file and folder of
# DIR.tmp-PID is fsynced before the rename that makes it DIR, and DIR's parent after it. Watched
# with strace (-y names each descriptor's file); without strace there is nothing to watch.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
# strace is a test dependency (scripts/test_deps.sh installs it): missing, this fails; a machine
# that forbids tracing (ptrace) is the one case it cannot check, and says so
command -v strace >/dev/null || { echo "FAIL: strace is missing (scripts/test_deps.sh installs it)"; echo "0 passed, 1 failed"; exit 1; }
if ! strace -o /dev/null true 2>/dev/null; then
    echo "emit durable: skipped (this machine forbids ptrace, so strace cannot trace)"; exit 0
fi
out=$tmp/out
strace -f -y -o "$tmp/trace" -e trace=fsync,rename "$wpgen" emit -t topologies/cpu-4x2.json -m tiny -o "$out" >/dev/null 2>"$tmp/err" \
    && ok || bad "emit: $(head -3 "$tmp/err")"
# the line of the rename DIR.tmp-PID -> DIR, and what was fsynced before and after it
at=$(grep -n "rename(\"$out\.tmp-[0-9]*\", \"$out\")" "$tmp/trace" | head -1 | cut -d: -f1)
[ -n "$at" ] && ok || bad "no rename of $out.tmp-PID to $out: $(grep rename "$tmp/trace" | head -3)"
at=${at:-1}
head -n "$at" "$tmp/trace" | sed -n 's/.*fsync([0-9]*<\([^>]*\)>.*/\1/p' | sed "s|^$out\.tmp-[0-9]*|$out|" | sort -u >"$tmp/synced"
missing=0
while IFS= read -r p; do
    grep -qxF -- "$p" "$tmp/synced" || { missing=$((missing + 1)); [ $missing -le 3 ] && echo "not fsynced before the rename: $p"; }
done < <(find "$out" \( -type f -o -type d \))
[ $missing = 0 ] && ok || bad "$missing of $(find "$out" | wc -l) files and folders not fsynced before the rename"
tail -n +"$at" "$tmp/trace" | grep -q "fsync([0-9]*<$tmp>)" && ok || bad "$tmp (the parent) not fsynced after the rename"
echo "emit durable: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
