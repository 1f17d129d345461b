#!/usr/bin/env bash
# What a new user meets first (issue 42): `wpgen list` and `plan --help` say --replicate-ends is
# on for tied models.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

# an option's default said in words where the value alone would mislead
"$wpgen" list >"$tmp/list" 2>&1
[ "$(grep -c -- '--replicate-ends: a flag, no value, default on for tied models, off otherwise' "$tmp/list")" = 4 ] && ok ||
    bad "list: $(grep -m1 -- --replicate-ends "$tmp/list")"
"$wpgen" plan --help -s weipipe-interleave 2>&1 | grep -q -- '--replicate-ends .*default on for tied models, off otherwise' && ok ||
    bad "plan --help: $("$wpgen" plan --help -s weipipe-interleave 2>&1 | grep -- --replicate-ends)"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
