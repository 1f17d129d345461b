#!/usr/bin/env bash
# Ctrl-C (SIGINT) or SIGTERM while wpgen writes leaves nothing half-written: emit's directory is
# whole or not there (its DIR.tmp-PID removed), sim's --trace and --svg whole or not there (no
# FILE.tmp-PID left); wpgen ends by the signal. The emit is signalled once it has started writing
# (its DIR.tmp-PID holds a rank's file), so the signal lands mid-way.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
wpgen=$build/wpgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0; interrupted=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
plan="-t topologies/h100-16x8-ib400.json -m llama-h1024 -s weipipe-interleave --micro-batches 16"
# a background job of a script starts with SIGINT ignored: run wpgen with it as a terminal gives
# it (a simple command, so that $! is wpgen itself once python has exec'd it)
run=(python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])')
for sig in INT TERM; do
    out=$tmp/e-$sig
    WPGEN_PROGRESS=0 "${run[@]}" "$wpgen" emit $plan -o "$out" >/dev/null 2>&1 &
    pid=$!
    # signalled as soon as its first rank's file is there: the writing takes about 0.4 s here, and
    # a fixed wait after the directory appeared (0.2 s) missed all of it about 1 run in 8 under load
    for _ in $(seq 1 3000); do compgen -G "$out.tmp-*/rank_*.c" >/dev/null && break; sleep 0.01; done
    kill -s $sig $pid 2>/dev/null
    wait $pid; rc=$?
    left=$(ls -d "$out".tmp-* 2>/dev/null | wc -l)
    [ "$left" = 0 ] && ok || bad "emit, SIG$sig while writing: $left temporary directories left"
    [ $rc -gt 128 ] && interrupted=$((interrupted + 1))
    if [ -d "$out" ]; then
        [ -f "$out/.wpgen-files" ] && [ "$(ls "$out"/rank_*.c | wc -l)" = 128 ] && ok || bad "emit, SIG$sig: $out is not whole"
    else
        [ $rc -gt 128 ] && ok || bad "emit, SIG$sig: no output and exit status $rc (not the signal's)"
    fi
    for delay in 0.5 2; do
        trace=$tmp/t-$sig-$delay.json
        WPGEN_PROGRESS=0 "${run[@]}" "$wpgen" sim $plan --trace "$trace" --svg "$tmp/t-$sig-$delay.svg" >/dev/null 2>&1 &
        pid=$!
        sleep $delay
        kill -s $sig $pid 2>/dev/null
        wait $pid
        left=$(ls "$tmp"/t-$sig-$delay.*.tmp-* 2>/dev/null | wc -l)
        [ "$left" = 0 ] && ok || bad "sim --trace, SIG$sig after $delay s: $left temporary files left"
        if [ -f "$trace" ]; then
            python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$trace" && ok || bad "sim --trace, SIG$sig after $delay s: the trace is not whole"
        else ok; fi
    done
done
# an earlier emit in DIR stays as it was when the next one is interrupted
"$wpgen" emit -t topologies/cpu-2x2.json -m tiny -o "$tmp/keep" >/dev/null 2>&1 && cp -r "$tmp/keep" "$tmp/keep.before" && ok || bad "emit tiny"
WPGEN_PROGRESS=0 "${run[@]}" "$wpgen" emit $plan -o "$tmp/keep" --force >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do ls -d "$tmp"/keep.tmp-* >/dev/null 2>&1 && break; sleep 0.05; done
sleep 0.2
kill -s INT $pid 2>/dev/null
wait $pid; rc=$?
if [ $rc -gt 128 ]; then
    # the earlier emission as it was; or, where the signal came once the new one was moving into
    # place (which finishes first, then wpgen ends by the signal: emit.c), the whole new one
    if diff -r "$tmp/keep" "$tmp/keep.before" >/dev/null; then ok
    elif [ -f "$tmp/keep/.wpgen-files" ] && [ "$(ls "$tmp"/keep/rank_*.c | wc -l)" = 128 ] &&
         grep -q '"topology": "h100-16x8-ib400"' "$tmp/keep/plan.json"; then ok
    else bad "an interrupted emit changed the earlier emission"; fi
else ok; fi
[ "$(ls -d "$tmp"/keep.* 2>/dev/null | grep -v before | wc -l)" = 0 ] && ok || bad "interrupted emit over an earlier one left $(ls -d "$tmp"/keep.*)"
# the signal landed while wpgen wrote, at least once (else this proved nothing)
[ $interrupted -ge 1 ] && ok || bad "no emit was interrupted"
echo "interrupt: $pass passed, $fail failed ($interrupted of 2 emits interrupted while writing)"
[ "$fail" -eq 0 ]
