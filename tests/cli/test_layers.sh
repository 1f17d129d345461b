#!/usr/bin/env bash
# The tree's layers (scripts/check_layers.py): this tree passes; a copy of it with one include
# against the order, one generator include of a runtime header it may not take, one circle of
# modules, and one folder the layers do not place fails, each named.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
out=$(python3 scripts/check_layers.py 2>&1) && ok || bad "this tree: $out"
echo "$out" | tail -1
t=$tmp/tree
mkdir -p "$t" && cp -r generator runtime "$t/"
echo '#include "cli/cli.h"' >>"$t/generator/ir/plan.c"                 # ir is below cli
echo '#include "train/loop.h"' >>"$t/generator/emit/emit.c"            # not a header the generator may take
echo '#include "sim/traffic.h"' >>"$t/generator/sim/timeline.c"         # traffic.c includes timeline's below
printf '#include "sim/timeline.h"\n' >"$t/generator/sim/traffic.h"
echo '#include "sim/traffic.h"' >>"$t/generator/sim/traffic.c"
echo '#include "sim/timeline.h"' >>"$t/generator/sim/traffic.c"
printf '/* x */\n' >"$t/generator/sim/timeline.h"
mkdir -p "$t/generator/extra" && printf '/* x */\n' >"$t/generator/extra/x.c"
python3 scripts/check_layers.py "$t" >"$tmp/out" 2>&1; rc=$?
[ $rc = 1 ] && ok || bad "the broken copy: exit $rc"
grep -q 'generator/ir/plan.c: includes cli/cli.h: generator/cli is above generator/ir' "$tmp/out" && ok || bad "include against the order: $(cat "$tmp/out")"
grep -q 'generator/emit/emit.c: includes runtime/train/loop.h, which the generator may not' "$tmp/out" && ok || bad "runtime boundary: $(cat "$tmp/out")"
grep -q 'generator/sim: modules include each other: \(timeline -> traffic -> timeline\|traffic -> timeline -> traffic\)' "$tmp/out" && ok || bad "circle: $(cat "$tmp/out")"
grep -q 'generator/extra: a folder the layers do not place' "$tmp/out" && ok || bad "unplaced folder: $(cat "$tmp/out")"
echo "layers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
