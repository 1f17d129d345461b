#!/usr/bin/env bash
# The sandbox strategies run in (generator/lua/sandbox.c): a strategy cannot reach files,
# processes or the environment, load code from outside schedules/lib, end wpgen, loop forever or
# take all the memory; `wpgen list` reads descriptions without running any script; an option a
# strategy refuses is one line naming the flag, a bug of the script a traceback with paths
# relative to the wpgen home. Strategies under tests/data/strategies.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
wpgen=$PWD/$build/wpgen
data=tests/data/strategies

# expect STATUS 'stderr substring' -- args...: wpgen under a time limit and a memory ceiling, so
# that a strategy the sandbox fails to stop fails the test instead of hanging or swapping
expect() {
    local want=$1 msg=$2; shift 3
    (ulimit -v 4000000; timeout 120 "$wpgen" "$@") >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" != "$want" ]; then bad "wpgen $*: exit $got, want $want: $(head -3 "$tmp/err")"; return; fi
    if [ -n "$msg" ] && ! grep -qF -- "$msg" "$tmp/err"; then bad "wpgen $*: stderr lacks '$msg': $(head -3 "$tmp/err")"; return; fi
    ok
}
plan=(plan -t topologies/cpu-2x2.json -m tiny)

# no os, io, load, print; require only of schedules/lib
expect 2 "attempt to index a nil value (global 'os')" -- "${plan[@]}" -s $data/escape-os.lua
expect 2 "attempt to index a nil value (global 'io')" -- "${plan[@]}" -s $data/escape-io.lua
expect 2 "attempt to index a nil value (global 'os')" -- "${plan[@]}" -s $data/escape-exit.lua
[ -s "$tmp/err" ] && ok || bad "os.exit ended wpgen without a word"
expect 2 "attempt to call a nil value (global 'load')" -- "${plan[@]}" -s $data/escape-load.lua
expect 2 'require "pl.template": a strategy may require only the modules of schedules/lib' -- "${plan[@]}" -s $data/escape-require.lua
expect 2 "cannot set finalizers" -- "${plan[@]}" -s $data/finalizer-loop.lua

# the limits: an endless loop that catches the error stopping it, a memory bomb that catches
# its refused allocations; each one line, in bounded time
t0=$SECONDS
expect 2 "wpgen: strategy endless-loop ran more than 100 million Lua instructions" -- "${plan[@]}" -s $data/endless-loop.lua --lua-max-instructions 100
[ "$(wc -l <"$tmp/err")" = 1 ] && ok || bad "the instruction limit's message is not one line: $(cat "$tmp/err")"
expect 2 "wpgen: strategy memory-bomb used more than 64 MiB of memory" -- "${plan[@]}" -s $data/memory-bomb.lua --lua-max-mib 64
[ "$(wc -l <"$tmp/err")" = 1 ] && ok || bad "the memory limit's message is not one line: $(cat "$tmp/err")"
[ $((SECONDS - t0)) -lt 100 ] && ok || bad "the limits took $((SECONDS - t0)) s to stop two strategies"
# the defaults grow with the plan asked for: 1024 ranks x 160 micro-batches x 4 layers is 655,360
# units of 4,000 instructions (sandbox.h), so the endless loop runs to 2,622 million, and says why
t0=$SECONDS
expect 2 "ran more than 2622 million Lua instructions (the default for 1024 ranks x 160 micro-batches x 4 layers; an endless loop?" -- \
    plan -t tests/data/scale/h100-128x8-ib400.json -m tiny --micro-batches 160 -s $data/endless-loop.lua
echo "scaled instruction limit reached in $((SECONDS - t0)) s"
# garbage far past the limit, never much of it alive: not a memory error
expect 2 "wpgen: garbage: made 300 MiB" -- "${plan[@]}" -s $data/garbage.lua --lua-max-mib 16
expect 2 "--lua-max-mib: expected an integer" -- "${plan[@]}" --lua-max-mib lots

# math.random from a fixed seed: the same output twice
expect 2 "random-draw: drew" -- "${plan[@]}" -s $data/random-draw.lua
cp "$tmp/err" "$tmp/draw1"
expect 2 "random-draw: drew" -- "${plan[@]}" -s $data/random-draw.lua
cmp -s "$tmp/err" "$tmp/draw1" && ok || bad "math.random differs between two runs: $(cat "$tmp/draw1" "$tmp/err")"

# no environment reaches a strategy: tawpipe's plan is the same with its old variables set
"$wpgen" "${plan[@]}" -s tawpipe --micro-batches 3 >"$tmp/plain" 2>&1
WPGEN_TAWPIPE_ROUNDS=3 WPGEN_TAWPIPE_GROUPING=published "$wpgen" "${plan[@]}" -s tawpipe --micro-batches 3 >"$tmp/env" 2>&1
cmp -s "$tmp/plain" "$tmp/env" && ok || bad "the environment changes tawpipe's plan: $(diff "$tmp/plain" "$tmp/env" | head -4)"

# an option a strategy refuses: exactly one line naming the flag
expect 2 "" -- "${plan[@]}" -s 1f1b --chunks 7
[ "$(cat "$tmp/err")" = "wpgen: --chunks 7: 1f1b cuts the model's 4 layers into at most 4 chunks" ] && ok || bad "--chunks 7 (1f1b): $(cat "$tmp/err")"
expect 2 "" -- "${plan[@]}" -s weipipe-interleave --chunks 9
[ "$(cat "$tmp/err")" = "wpgen: --chunks 9: expected 1 to 4 (the model has 4 layers)" ] && ok || bad "--chunks 9 (weipipe-interleave): $(cat "$tmp/err")"

# a copy of the strategies elsewhere (WPGEN_HOME), with a hostile script and a buggy one
home=$tmp/home
mkdir -p "$home"
cp -r schedules "$home/"
cat >"$home/schedules/hostile.lua" <<LUA
-- about: looks harmless
local f = io.open("$tmp/opened", "w")
os.execute("touch $tmp/executed")
return { build = function(plan, ctx) end }
LUA
cat >"$home/schedules/buggy.lua" <<'LUA'
-- about: cuts the layers wrongly: a bug in the script, inside a library function
local wp = require("wp")
return { build = function(plan, ctx) plan:chunks(wp.split_layers(ctx.model.layers, 0)) end }
LUA
# wpgen list reads the descriptions and runs nothing
WPGEN_HOME=$home "$wpgen" list >"$tmp/list" 2>&1 && ok || bad "list in a copied home: $(head -3 "$tmp/list")"
[ ! -e "$tmp/opened" ] && [ ! -e "$tmp/executed" ] && ok || bad "wpgen list ran schedules/hostile.lua"
grep -q "^  hostile  *looks harmless$" "$tmp/list" && ok || bad "list lacks hostile's description: $(grep hostile "$tmp/list")"
grep -q "^  weipipe-interleave  *one backward + one forward per turn" "$tmp/list" && ok || bad "list lacks weipipe-interleave's description"
# run, it is stopped at its first escape
(cd "$tmp" && WPGEN_HOME=$home "$wpgen" plan -t "$OLDPWD/topologies/cpu-2x2.json" -m tiny -s hostile) >/dev/null 2>"$tmp/err"
[ $? = 2 ] && [ ! -e "$tmp/opened" ] && [ ! -e "$tmp/executed" ] && grep -q "^wpgen: schedules/hostile.lua:2: .*global 'io'" "$tmp/err" && ok ||
    bad "plan -s hostile: $(head -3 "$tmp/err")"
# a bug: the error and the traceback, paths relative to the home
(cd "$tmp" && WPGEN_HOME=$home "$wpgen" plan -t "$OLDPWD/topologies/cpu-2x2.json" -m tiny -s buggy) >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "^wpgen: cannot cut 4 layers into 0 chunks" "$tmp/err" && grep -q "stack traceback:" "$tmp/err" &&
    grep -q "	schedules/lib/wp.lua:[0-9]*: in field 'split_layers'" "$tmp/err" && grep -q "	schedules/buggy.lua:3: in function" "$tmp/err" && ok ||
    bad "plan -s buggy: $(cat "$tmp/err")"
grep -q "$tmp\|$PWD" "$tmp/err" && bad "the traceback names absolute paths: $(cat "$tmp/err")" || ok

# limits that hold where the instruction count cannot see: one call of a library function (a
# backtracking pattern), stopped by the wall clock; memory wpgen holds for the script (notes)
t0=$SECONDS
expect 2 "ran past its wall-clock limit of 2 s" -- "${plan[@]}" -s $data/pattern-bomb.lua --lua-max-seconds 2 --lua-max-instructions 1
# ... and while a declaration is read (for its options), before any plan is built
t0=$SECONDS
expect 2 "ran past its wall-clock limit of 2 s" -- compare -t topologies/cpu-2x2.json -m tiny --strategies $data/declaration-bomb.lua --lua-max-seconds 2
[ $((SECONDS - t0)) -lt 30 ] && ok || bad "the declaration's wall clock took $((SECONDS - t0)) s"

[ $((SECONDS - t0)) -lt 30 ] && ok || bad "the pattern bomb ran $((SECONDS - t0)) s under a 2 s limit"
t0=$SECONDS
expect 2 "used more than 16 MiB of memory" -- "${plan[@]}" -s $data/note-bomb.lua --lua-max-mib 16
[ $((SECONDS - t0)) -lt 10 ] && ok || bad "the note bomb ran $((SECONDS - t0)) s"
expect 2 "--lua-max-seconds: expected an integer in [1, 86400]" -- "${plan[@]}" --lua-max-seconds 0
# errors without a message, and a precompiled chunk, still name the file
expect 2 "error-nil.lua:4: (error object is a nil value)" -- "${plan[@]}" -s $data/error-nil.lua
luac5.4 -o "$tmp/compiled.lua" $data/endless-loop.lua 2>/dev/null || printf '\033Lua\124' >"$tmp/compiled.lua"
expect 2 "compiled.lua: attempt to load a binary chunk" -- "${plan[@]}" -s "$tmp/compiled.lua"

echo "sandbox: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
