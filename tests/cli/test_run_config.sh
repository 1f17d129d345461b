#!/usr/bin/env bash
# wpgen run RUN.json (generator/cli/runcfg.c, cmd_run.c; docs/run-config.md), with the example
# users copy, examples/run-cpu.json, so that the example cannot rot:
#   (c) --dry-run prints the commands and runs none, writing nothing;
#   (b) a bad file (an unknown key, a wrong type, a value out of range on the plan's side and on
#       train's, a missing key) is refused with exit 2 naming the file and the JSON path, nothing
#       written;
#   (a) the example trains through wpgen run, and its losses are, bit for bit, those of the same run
#       by hand (wpgen emit, make, mpirun train with the flags); OUT/run.json is emit's (its
#       manifest lists it) and `bash OUT/run.sh` alone, from elsewhere, trains the same again;
#   and every flag of wpgen emit and of train is a key of the table (wpgen run --keys).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
top=$PWD
wpgen=$top/$build/wpgen
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
ws=$tmp/ws
mkdir -p "$ws"
for d in topologies tests examples; do ln -s "$top/$d" "$ws/$d"; done
cd "$ws"
listing() { (cd "$ws" && find . -not -path './topologies*' -not -path './tests*' -not -path './examples*' | sort); }
listing >"$tmp/empty"

# (c) --dry-run: the commands, nothing run or written
"$wpgen" run examples/run-cpu.json --dry-run >"$tmp/dry" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^  wpgen emit .*-o out/run-cpu" "$tmp/dry" && grep -q "^  make -s -C out/run-cpu" "$tmp/dry" &&
    grep -q "^  ./out/run-cpu/run.sh$" "$tmp/dry" && grep -q "train with: --synthetic --steps 3" "$tmp/dry" && ok ||
    bad "--dry-run: exit $rc: $(cat "$tmp/dry")"
listing | cmp -s - "$tmp/empty" && ok || bad "--dry-run wrote: $(listing | tr '\n' ' ')"
grep -q "^train: " "$tmp/dry" && bad "--dry-run trained" || ok

# (b) bad files, each the example changed at one key (PATH=JSON, PATH deleted with -PATH): exit 2,
# the file and the path named, no output folder
variant() {   # NAME EDIT...
    python3 - examples/run-cpu.json "$tmp/$1.json" "${@:2}" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["out"] = "bad-out/x"
for edit in sys.argv[3:]:
    path, _, value = edit.partition("=")
    *sec, key = path.lstrip("-").split(".")
    obj = cfg
    for s in sec:
        obj = obj.setdefault(s, {})
    if path.startswith("-"): del obj[key]
    else: obj[key] = json.loads(value)
json.dump(cfg, open(sys.argv[2], "w"))
PY
}
refused() {   # NAME NEEDLE
    "$wpgen" run "$tmp/$1.json" >"$tmp/err" 2>&1
    local rc=$?
    [ $rc = 2 ] && grep -qF -- "$tmp/$1.json: $2" "$tmp/err" && [ ! -e bad-out ] && [ ! -e out ] && ok ||
        bad "$1: exit $rc (want 2), want \"$tmp/$1.json: $2\": $(head -3 "$tmp/err")$([ -e bad-out ] && echo '; and it made bad-out')"
}
variant unknown 'plan.sequence=4096'; refused unknown "plan.sequence: unknown key (the keys of this section: strategy,"
variant toplevel 'modle="tiny"'; refused toplevel "modle: unknown key (the keys: about, model,"
variant type 'plan.seq="48"'; refused type 'plan.seq: expected an integer, got "48"'
variant type2 'train.steps=3.5'; refused type2 "train.steps: expected an integer, got a number with a fraction"
variant switch 'train.synthetic="yes"'; refused switch 'train.synthetic: expected true or false, got "yes"'
variant range 'plan.seq=0'; refused range 'plan.seq (--seq): expected an integer in [1, 16777216], got "0"'
variant range2 'train.lr=20'; refused range2 'train.lr: --lr: expected a number in [0, 10], got "20"'
variant range3 'train.schedule="cosin"'; refused range3 'train.schedule: --schedule: expected one of'
variant option 'plan.options={"rounds": 2}'; refused option "plan.options.rounds: strategy weipipe-interleave declares no such option"
variant missing '-out'; refused missing "out: missing: expected a string"
variant notrain '-train'; refused notrain "train: missing: expected an object"
variant both 'train.data="x.bin"'; refused both "train: exactly one of --data SPEC and --synthetic is needed"
# what only the flags together, or the files they name, can refuse: wpgen emit's line, then the file
variant batch 'plan.global_batch=15'; refused batch "refused as wpgen emit's flags"
grep -q "^wpgen: --global-batch 15: expected a multiple of 8 sequences" "$tmp/err" && ok || bad "global_batch 15: $(cat "$tmp/err")"
variant nomodel 'model="nope/config.json"'; refused nomodel "refused as wpgen emit's flags"
variant slurmresume 'launch="slurm"' 'train.resume="ck/checkpoint.json"'; refused slurmresume 'train.resume: launch "slurm": job.sbatch resumes'

# launch slurm (dry run): train.save, save_every and log become job.sbatch's variables, not flags
variant slurm 'launch="slurm"' 'train.save="ck/checkpoint.json"' 'train.save_every=2' 'mpirun_flags="--mca btl self,tcp"'
"$wpgen" run "$tmp/slurm.json" --dry-run >"$tmp/dry" 2>&1
rc=$?
[ $rc = 0 ] && grep -qF "  WPGEN_CHECKPOINT=ck/checkpoint.json WPGEN_SAVE_EVERY=2 WPGEN_LOG=out/run-cpu-train.jsonl 'WPGEN_MPIRUN_FLAGS=--mca btl self,tcp' sbatch --chdir=$ws bad-out/x/job.sbatch --synthetic --steps 3 --lr 0.003 --warmup 1 --seed 7" "$tmp/dry" &&
    ! grep -q "sbatch .*--save" "$tmp/dry" && ok || bad "launch slurm --dry-run: exit $rc: $(cat "$tmp/dry")"
variant none 'launch="none"' '-train'
"$wpgen" run "$tmp/none.json" --dry-run >"$tmp/dry" 2>&1 && grep -q 'launch "none": nothing is started' "$tmp/dry" && ok || bad "launch none: $(cat "$tmp/dry")"
"$wpgen" run "$tmp/nothere.json" >"$tmp/err" 2>&1
[ $? = 2 ] && grep -qF "$tmp/nothere.json" "$tmp/err" && ok || bad "a missing file: $(cat "$tmp/err")"
listing | cmp -s - "$tmp/empty" && ok || bad "the refusals wrote: $(listing | tr '\n' ' ')"

# every flag of wpgen emit (but sim's outputs, --json and -h) and of train is a key
"$wpgen" run --keys >"$tmp/keys" || bad "wpgen run --keys"
"$wpgen" plan --help | sed -n '/^The flags of plan/,/^-s auto/p' | grep -o '^  -[-a-z]*\(, --[-a-z]*\)\?' | sed 's/,.*//; s/^ *//' |
while read -r f; do
    case $f in --trace|--svg|--json|-h) continue ;; esac
    grep -q "emit $f " "$tmp/keys" || echo "FAIL: emit's $f is no key of wpgen run"
done >"$tmp/missing"
[ -s "$tmp/missing" ] && bad "$(cat "$tmp/missing")" || ok
# and every key is in docs/run-config.md's table
sed 's/^  \([a-z0-9_.]*\) .*/\1/' "$tmp/keys" | while read -r k; do
    grep -q "^| \`$k\`" "$top/docs/run-config.md" || echo "FAIL: docs/run-config.md lacks the key $k"
done >"$tmp/missing"
[ -s "$tmp/missing" ] && bad "$(cat "$tmp/missing")" || ok

# (a) the example through wpgen run, then by hand
"$wpgen" run examples/run-cpu.json >"$tmp/run" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^strategy *weipipe-interleave" "$tmp/run" && ok || bad "wpgen run: exit $rc: $(grep -v '^step' "$tmp/run" | tail -8)"
o=out/run-cpu
[ -f $o/run.json ] && grep -q " run.json$" $o/.wpgen-files && ok || bad "run.json not emitted as wpgen's: $(ls $o)"
python3 - $o/run.json <<'PY' && ok || bad "run.json: $(head -c 400 $o/run.json)"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["config"]["train"]["steps"] == 3 and r["launch"] == "mpirun", r
assert r["train"] == ["--synthetic", "--steps", "3", "--lr", "0.003", "--warmup", "1", "--seed", "7", "--log", "out/run-cpu-train.jsonl"], r["train"]
PY
cp out/run-cpu-train.jsonl "$tmp/run.jsonl"
"$wpgen" emit -t topologies/cpu-2x2.json -m tests/data/tiny8/config.json -s weipipe-interleave --micro-batch-size 2 \
    --global-batch 16 --precision fp32 -o hand >/dev/null && make -s -j2 -C hand >/dev/null 2>&1 || bad "emit and make by hand"
"${mpirun[@]}" -np 4 hand/train --synthetic --steps 3 --lr 3e-3 --warmup 1 --seed 7 --log hand.jsonl >"$tmp/hand" 2>&1 || bad "train by hand: $(tail -3 "$tmp/hand")"
losses() { python3 -c 'import json, sys; print(" ".join(repr(json.loads(l)["loss"]) for l in open(sys.argv[1]) if "loss" in l))' "$1"; }
a=$(losses "$tmp/run.jsonl") h=$(losses hand.jsonl)
[ -n "$a" ] && [ "$(echo $a | wc -w)" = 3 ] && [ "$a" = "$h" ] && ok || bad "losses: wpgen run $a, by hand $h"
cmp -s <(python3 -c 'import json; print(json.load(open("hand/plan.json"))["plan_hash"])') \
       <(python3 -c 'import json; print(json.load(open("out/run-cpu/plan.json"))["plan_hash"])') && ok || bad "the plans differ"

# wpgen run OUT/run.json, from anywhere: the record's config, from where it ran (dry run)
(cd / && "$wpgen" run "$ws/$o/run.json" --dry-run) >"$tmp/dry" 2>&1
rc=$?
[ $rc = 0 ] && grep -qF "is the record of a run: its config, from $ws" "$tmp/dry" && grep -qF "wpgen run: the commands it would run, from $ws:" "$tmp/dry" &&
    grep -q "^  wpgen emit .*-o out/run-cpu" "$tmp/dry" && ok || bad "wpgen run OUT/run.json: exit $rc: $(cat "$tmp/dry")"

# bash OUT/run.sh alone, from another folder: the recorded flags, the same losses
rm -f out/run-cpu-train.jsonl
(cd / && bash "$ws/$o/run.sh") >"$tmp/again" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "the flags wpgen run recorded" "$tmp/again" && [ "$(losses out/run-cpu-train.jsonl)" = "$a" ] && ok ||
    bad "bash run.sh alone: exit $rc, losses $(losses out/run-cpu-train.jsonl 2>/dev/null): $(tail -3 "$tmp/again")"
# every train flag is a key (but --global-batch and --global-batch-tokens, which only check the
# plan's batch against themselves: plan.global_batch sets it)
$o/train --help | grep -o '^  --[-a-z0-9]*\(, --[-a-z0-9]*\)\?' | sed 's/^ *//; s/, / /' | tr ' ' '\n' | while read -r f; do
    case $f in --help|--global-batch|--global-batch-tokens) continue ;; esac
    grep -q "train $f[ ,]" "$tmp/keys" || echo "FAIL: train's $f is no key of wpgen run"
done >"$tmp/missing"
[ -s "$tmp/missing" ] && bad "$(cat "$tmp/missing")" || ok

echo "$pass passed, $fail failed"
[ $fail = 0 ]
