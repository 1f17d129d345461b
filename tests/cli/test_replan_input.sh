#!/usr/bin/env bash
# wpgen replan on input it must refuse, and on recorded commands emit would take (fast: no run).
# plan.json's "command" is read as emit reads a command line: a word that is not a string, an
# unknown flag, a flag without its value, a stray word or -h is refused with exit 2 naming
# "command"[i]; a command of any length is run whole (no fixed array). -o that is the plan folder
# read, or holds it, under any spelling, is refused; --without with an empty name or a node twice
# too. On every path nothing is left in TMPDIR (the survivors' topology) and nothing is written.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
export TMPDIR=$tmp/tmpdir
mkdir -p "$TMPDIR"
t=topologies/cpu-2x2.json
"$wpgen" emit -t $t -m tiny -s weipipe-interleave -o "$tmp/a" >/dev/null 2>&1 || bad "emit a"
snapshot() { (cd "$1" && find . -printf '%p %y %s\n' | sort && find . -type f -exec sha256sum {} + | sort); }
snapshot "$tmp/a" >"$tmp/a.snap"

# with_command DIR JSON: a copy of a whose plan.json records JSON as its command
with_command() {
    rm -rf "$1" && cp -r "$tmp/a" "$1"
    python3 - "$1/plan.json" "$2" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); p["command"] = json.loads(sys.argv[2]); json.dump(p, open(sys.argv[1], "w"))
EOF
}
# refused STATUS 'stderr substring' -- replan args: exit STATUS, the message, no -o folder, TMPDIR empty
refused() {
    local want=$1 msg=$2; shift 3
    rm -rf "$tmp/new"
    "$wpgen" replan "$@" >"$tmp/out" 2>&1
    local got=$?
    [ "$got" = "$want" ] && grep -qF -- "$msg" "$tmp/out" && [ ! -e "$tmp/new" ] && [ -z "$(ls -A "$TMPDIR")" ] && ok ||
        bad "replan $*: exit $got (want $want), $(tail -2 "$tmp/out") (want: $msg); $(ls "$tmp/new" "$TMPDIR" 2>&1 | head -3)"
    rm -rf "${TMPDIR:?}"/*
}

# H4: a word that is not a string (it read an argument never set: exit 139, the survivors left)
with_command "$tmp/int" '[1]'
refused 2 '"command"[0]: expected a string (a word of the command that emitted it), got 1' -- "$tmp/int" --without n1 -o "$tmp/new"
with_command "$tmp/null" '["emit", "-m", "tiny", null]'
refused 2 '"command"[3]: expected a string (a word of the command that emitted it), got null' -- "$tmp/null" --without n1 -o "$tmp/new"
with_command "$tmp/arr" '["emit", ["-m"], "tiny"]'
refused 2 '"command"[1]: expected a string (a word of the command that emitted it), got an array' -- "$tmp/arr" -t $t -o "$tmp/new"
# read as a command line: emit's flags, their values, nothing else
with_command "$tmp/unk" '["emit", "-m", "tiny", "--bogus", "1"]'
refused 2 '"command"[3]: unknown flag "--bogus"' -- "$tmp/unk" --without n1 -o "$tmp/new"
with_command "$tmp/noval" '["emit", "-s", "weipipe-interleave", "-m"]'
refused 2 '"command"[3]: -m needs a value' -- "$tmp/noval" --without n1 -o "$tmp/new"
with_command "$tmp/stray" '["emit", "-m", "tiny", "stray"]'
refused 2 '"command"[3]: "stray" follows no flag that takes a value' -- "$tmp/stray" --without n1 -o "$tmp/new"
with_command "$tmp/help" '["emit", "-m", "tiny", "--help"]'
refused 2 '"command"[3]: --help is no flag of a command to run' -- "$tmp/help" --without n1 -o "$tmp/new"
with_command "$tmp/plan" '["replan", "x"]'
refused 2 'its command is "replan", not emit' -- "$tmp/plan" --without n1 -o "$tmp/new"
with_command "$tmp/seq" '["emit", "-m", "tiny", "--seq", "abc"]'   # a value out of range: emit's parser says so
refused 2 '--seq: expected an integer' -- "$tmp/seq" --without n1 -o "$tmp/new"
refused 2 'unknown flag "--bogus"' -- "$tmp/a" --without n1 -o "$tmp/new" --bogus
refused 1 'the plan does not fit' -- "$tmp/a" --without n1 -o "$tmp/new" --micro-batch-size 100000

# H5: 600 words recorded and 20 flags given (a fixed array overflowed: exit 139); run whole
with_command "$tmp/long" "$(python3 -c 'import json; print(json.dumps(["emit", "-m", "tiny", "-s", "weipipe-interleave"] + ["--recompute"] * 600))')"
"$wpgen" replan "$tmp/long" -t $t -o "$tmp/long-new" $(for i in $(seq 20); do echo --lua-max-mib 512; done) >"$tmp/out" 2>&1; rc=$?
[ $rc = 0 ] && python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["command"]
assert c == ["emit", "-m", "tiny", "-s", "weipipe-interleave"] + ["--recompute"] * 600 + ["--micro-batches", "4"] + ["--lua-max-mib", "512"] * 20, c[:8]
' "$tmp/long-new/plan.json" && ok || bad "a 600-word command and 20 flags: exit $rc: $(tail -2 "$tmp/out")"

# flags named either way: a recorded --topology is replaced by -t (it was given twice), --model replaces -m
"$wpgen" emit --topology $t --model tiny --strategy 1f1b -o "$tmp/longform" >/dev/null 2>&1 || bad "emit with long flags"
"$wpgen" replan "$tmp/longform" -t topologies/cpu-1x4.json -o "$tmp/longform-new" --model small >"$tmp/out" 2>&1; rc=$?
[ $rc = 0 ] && python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["command"]
assert c == ["emit", "--strategy", "1f1b", "--micro-batches", "4", "--model", "small"], c
' "$tmp/longform-new/plan.json" && ok || bad "replan of a command with --topology, given --model: exit $rc: $(tail -2 "$tmp/out")"

# M10: -o the plan folder read, or a folder holding it, under any spelling: refused, a unchanged
ln -s "$tmp/a" "$tmp/link"
for o in "$tmp/a" "$tmp/./a/" "$tmp/../$(basename "$tmp")/a" "$tmp/link"; do
    "$wpgen" replan "$tmp/a" -t $t -o "$o" >"$tmp/out" 2>&1; rc=$?
    [ $rc = 2 ] && grep -qF -- "-o $o is the plan folder it reads ($tmp/a)" "$tmp/out" && ok || bad "replan a -o $o: exit $rc: $(tail -2 "$tmp/out")"
done
"$wpgen" replan "$tmp/link" --without n1 -o "$tmp" >"$tmp/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -qF -- "-o $tmp holds the plan folder it reads ($tmp/link)" "$tmp/out" && ok || bad "replan -o its parent: exit $rc: $(tail -2 "$tmp/out")"
snapshot "$tmp/a" | cmp -s - "$tmp/a.snap" && [ -z "$(ls -A "$TMPDIR")" ] && ok || bad "a refused -o changed the plan folder read or left a file"

# --without: no empty name, no node twice
refused 2 '--without "": an empty node name; expected NODE[,NODE...]' -- "$tmp/a" --without "" -o "$tmp/new"
refused 2 '--without "n1,": an empty node name' -- "$tmp/a" --without "n1," -o "$tmp/new"
refused 2 '--without "n0,,n1": an empty node name' -- "$tmp/a" --without "n0,,n1" -o "$tmp/new"
refused 2 '--without "n1,n1": node n1 is named twice' -- "$tmp/a" --without "n1,n1" -o "$tmp/new"
refused 2 '--without "n1, n1": node n1 is named twice' -- "$tmp/a" --without "n1, n1" -o "$tmp/new"
# still a plan: names with commas and spaces between them
"$wpgen" replan "$tmp/a" --without " n1 " -o "$tmp/new" >"$tmp/out" 2>&1 && grep -q '"topology": "cpu-2x2-without-n1"' "$tmp/new/plan.json" &&
    [ -z "$(ls -A "$TMPDIR")" ] && ok || bad "replan --without ' n1 ': $(tail -2 "$tmp/out")"

echo "replan input: $pass passed, $fail failed"
[ "$fail" = 0 ]
