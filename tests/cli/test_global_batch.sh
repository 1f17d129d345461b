#!/usr/bin/env bash
# One global batch in every tool (common/batch.h): --global-batch B (or --global-batch-tokens T)
# gives wpgen's plan, sim and compare their micro-batches per rank (B / (devices x micro-batch
# size)), the same whatever the strategy, replicas or context parallelism; a B that does not split
# is refused (exit 2) with the nearest valid values, and so is a --micro-batches that disagrees;
# wp-ref derives its micro-batches by the same rule; the emitted train checks B against its plan
# and runs the same batch as wp-ref given the same B (the same losses); replan keeps it.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
model=tests/data/tiny8/config.json   # seq 48
shape=(-m "$model" --micro-batch-size 2)
t4=topologies/cpu-2x2.json           # 4 devices: B a multiple of 8

# the derivation: 16 sequences on 4 devices of 2 a micro-batch are 2 micro-batches per rank, for
# every strategy; the tokens form is the same batch
for s in weipipe-interleave 1f1b fsdp tawpipe; do
    "$wpgen" plan -t $t4 "${shape[@]}" -s $s --global-batch 16 --json >"$tmp/j" 2>"$tmp/e" &&
    python3 - "$tmp/j" <<'EOF' && ok || bad "plan -s $s --global-batch 16: $(head -2 "$tmp/e")"
import json, sys
d = json.load(open(sys.argv[1]))
assert (d['micro_batches_per_rank'], d['micro_batches'], d['global_batch'], d['global_batch_tokens']) == (2, 8, 16, 768), d
EOF
done
"$wpgen" plan -t $t4 "${shape[@]}" --global-batch-tokens 768 >"$tmp/out" 2>&1 &&
    grep -q "^batch       global batch 16 sequences, 768 tokens: 8 micro-batches per step (2 per rank)$" "$tmp/out" && ok ||
    bad "--global-batch-tokens 768: $(grep batch "$tmp/out")"
# with --context-parallel 2 a group runs twice the micro-batches: the step's batch is the same
"$wpgen" plan -t $t4 "${shape[@]}" -s fsdp --context-parallel 2 --global-batch 16 --json >"$tmp/j" 2>"$tmp/e" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["global_batch"] == 16 and d["context_parallel"] == 2, d' "$tmp/j" &&
    ok || bad "--context-parallel 2 --global-batch 16: $(head -2 "$tmp/e")"
# compare keeps it for every candidate (replicas, context parallelism, chunks)
"$wpgen" compare -t $t4 "${shape[@]}" --global-batch 16 --json >"$tmp/j" 2>"$tmp/e" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); b={x["global_batch"] for x in d if "global_batch" in x}; assert b == {16} and len(d) > 2, (b, len(d))' "$tmp/j" &&
    ok || bad "compare --global-batch 16: $(head -2 "$tmp/e")"
"$wpgen" sim -t $t4 "${shape[@]}" --global-batch 16 >"$tmp/out" 2>&1 && grep -q "global batch 16 sequences, 768 tokens" "$tmp/out" && ok ||
    bad "sim --global-batch 16: $(head -3 "$tmp/out")"

# refusals: not a multiple (the nearest named), below one micro-batch a device, tokens not whole
# sequences of the rule, disagreement with --micro-batches or between the two forms; agreement runs
unit="expected a multiple of 8 sequences (4 devices x 2 sequences per micro-batch"
expect 2 "--global-batch 20: $unit" -- plan -t $t4 "${shape[@]}" --global-batch 20
expect 2 "the nearest are 16 and 24" -- plan -t $t4 "${shape[@]}" --global-batch 20
expect 2 "--global-batch 4: $unit, each device running whole micro-batches); the nearest is 8" -- sim -t $t4 "${shape[@]}" --global-batch 4
expect 2 "--global-batch-tokens 800: expected a multiple of 384 tokens (4 devices x 2 sequences per micro-batch x 48 tokens a sequence); the nearest are 768 and 1152" -- \
    compare -t $t4 "${shape[@]}" --global-batch-tokens 800
expect 2 "--micro-batches 3 and --global-batch 16 disagree: 16 sequences on 4 devices of 2 sequences a micro-batch are 2 micro-batches per rank; give one of them" -- \
    plan -t $t4 "${shape[@]}" --global-batch 16 --micro-batches 3
expect 2 "--global-batch 16 and --global-batch-tokens 1536 disagree" -- plan -t $t4 "${shape[@]}" --global-batch 16 --global-batch-tokens 1536
expect 2 "--global-batch: expected an integer in [1, 1073741824]" -- plan -t $t4 "${shape[@]}" --global-batch 0
expect 0 "" -- plan -t $t4 "${shape[@]}" --global-batch 16 --micro-batches 2
expect 2 "--global-batch given twice (\"16\", then \"8\")" -- plan -t $t4 "${shape[@]}" --global-batch 16 --global-batch 8

# wp-ref: one device, the same rule and words
ref=("$build/wp-ref" "${shape[@]}" --synthetic --seed 3 --steps 2)
"${ref[@]}" --global-batch 15 >"$tmp/out" 2>&1
[ $? = 2 ] && grep -qF -- "--global-batch 15: expected a multiple of 2 sequences (1 device x 2 sequences per micro-batch, each device running whole micro-batches); the nearest are 14 and 16" "$tmp/out" &&
    ok || bad "wp-ref --global-batch 15: $(head -2 "$tmp/out")"
"${ref[@]}" --global-batch 16 --micro-batches 4 >"$tmp/out" 2>&1
[ $? = 2 ] && grep -qF -- "--micro-batches 4 and --global-batch 16 disagree" "$tmp/out" && ok || bad "wp-ref disagreeing: $(head -2 "$tmp/out")"
"${ref[@]}" --global-batch 16 --log "$tmp/ref.jsonl" >"$tmp/ref.out" 2>&1 &&
    grep -q "global batch 16 sequences, 768 tokens: 8 micro-batches x 2 sequences x 48 tokens per step" "$tmp/ref.out" && ok ||
    bad "wp-ref --global-batch 16: $(head -3 "$tmp/ref.out")"

# the emitted train: its plan's batch, from --global-batch; the same losses as wp-ref's
d=$tmp/plan
"$wpgen" emit -t $t4 "${shape[@]}" -s weipipe-interleave --global-batch 16 -o "$d" >/dev/null && bash tests/make_emitted.sh "$d" >/dev/null 2>&1 &&
    ok || { bad "emit --global-batch 16 or its build"; echo "$pass passed, $fail failed"; exit 1; }
train=("${mpirun[@]}" -np 4 "$d/train" --synthetic --seed 3 --steps 2)
"${train[@]}" --global-batch 16 --log "$tmp/train.jsonl" >"$tmp/train.out" 2>&1 &&
    grep -q "global batch 16 sequences, 768 tokens: 8 micro-batches x 2 sequences x 48 tokens per step" "$tmp/train.out" && ok ||
    bad "train --global-batch 16: $(head -3 "$tmp/train.out")"
python3 - "$tmp/ref.jsonl" "$tmp/train.jsonl" <<'EOF' && ok || bad "wp-ref and train with --global-batch 16 differ"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b) == 2 and all(abs(x - y) < 1e-5 for x, y in zip(a, b)), (a, b)
EOF
"${train[@]}" --global-batch 32 >"$tmp/out" 2>&1
[ $? = 2 ] && grep -qF -- "--global-batch 32: this program's plan" "$tmp/out" && grep -qF "runs the global batch 16 sequences, 768 tokens per step" "$tmp/out" &&
    grep -qF "emit it again with the same flags and --global-batch 32" "$tmp/out" && ok || bad "train --global-batch 32: $(head -2 "$tmp/out")"
"${train[@]}" --global-batch 12 >"$tmp/out" 2>&1
[ $? = 2 ] && grep -qF -- "--global-batch 12: $unit" "$tmp/out" && ok || bad "train --global-batch 12: $(head -2 "$tmp/out")"

# replan: the recorded --global-batch gives way to the micro-batches that keep the batch (6 devices
# cannot run 16: the nearest, said), and one given to replan is the new batch
"$wpgen" replan "$d" -t topologies/cpu-uneven.json -o "$tmp/re1" >"$tmp/out" 2>&1 &&
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["micro_batches"] == 6 and "--global-batch" not in p["command"], p["command"]' "$tmp/re1/plan.json" &&
    ok || bad "replan of a --global-batch plan onto 6 devices: $(head -3 "$tmp/out")"
"$wpgen" replan "$d" -t topologies/cpu-uneven.json -o "$tmp/re2" --global-batch 24 >"$tmp/out" 2>&1 &&
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["micro_batches"] == 12, p["micro_batches"]' "$tmp/re2/plan.json" &&
    ok || bad "replan --global-batch 24: $(head -3 "$tmp/out")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
