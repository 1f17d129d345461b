#!/usr/bin/env bash
# wp-ref --eval CHECKPOINT --data SPEC: a checkpoint's held-out loss with no training flag, for a
# run of several micro-batches (what resuming with --val-data refused), equal to the val_loss the
# training run logged on the same data (1e-6 relative), in fp32 and bf16, with its perplexity;
# --val-steps narrows the set; a training flag, a missing --data, a file that is no checkpoint, a
# bad --val-steps and missing data are refused (exit 2), the checkpoint left as it was.
set -uo pipefail
build=${1:-build}
ref=$build/wp-ref
. tests/check.sh
text=/usr/share/common-licenses/GPL-3
head -c 20000 "$text" >"$tmp/train.txt"
tail -c 6000 "$text" >"$tmp/val.txt"

# close A B: |A - B| <= 1e-6 |B|
close() { awk -v a="$1" -v b="$2" 'BEGIN { exit !((a - b) ^ 2 <= (1e-6 * b) ^ 2 && b > 0) }'; }
val_of_log() { sed -nE 's/.*"val_loss":([^,}]*).*/\1/p' "$1" | tail -1; }
val_of_eval() { sed -nE 's/^eval .*\| val loss ([0-9.]+) \|.*/\1/p' "$1"; }

for prec in fp32 bf16; do
    mkdir -p "$tmp/$prec"
    "$ref" -m tiny --seq 32 --micro-batches 4 --precision $prec --data "$tmp/train.txt" --val-data "$tmp/val.txt" \
        --steps 5 --lr 3e-3 --save "$tmp/$prec/checkpoint.json" --log "$tmp/$prec.jsonl" >"$tmp/out" 2>&1 ||
        bad "$prec training: exit $?: $(tail -2 "$tmp/out")"
    want=$(val_of_log "$tmp/$prec.jsonl")
    "$ref" --eval "$tmp/$prec/checkpoint.json" --data "$tmp/val.txt" --precision $prec >"$tmp/eval" 2>&1
    rc=$?
    got=$(val_of_eval "$tmp/eval")
    [ $rc = 0 ] && [ -n "$got" ] && close "$got" "$want" && ok ||
        bad "$prec: eval exit $rc, loss '$got', the run logged '$want': $(tail -2 "$tmp/eval")"
    # perplexity exp(loss), and the set the training run used (184 sequences: 23 steps of 4 x 2)
    awk -v l="$got" -v line="$(cat "$tmp/eval")" 'BEGIN { if (!match(line, /perplexity [0-9.]+/)) exit 1;
        p = substr(line, RSTART + 11, RLENGTH - 11); exit !((p - exp(l)) ^ 2 < (1e-4 * p) ^ 2) }' &&
        grep -q '184 sequences of 32 tokens (23 steps of 4 x 2)' "$tmp/eval" && ok || bad "$prec: $(cat "$tmp/eval")"
done
# the checkpoint of a mid-run step, by its kept name, and --val-steps: the first steps' worth
"$ref" --eval "$tmp/fp32/checkpoint.5.json" --data "$tmp/val.txt" --val-steps 2 >"$tmp/eval" 2>&1 &&
    grep -q '16 sequences of 32 tokens (2 steps of 4 x 2)' "$tmp/eval" && ok || bad "--val-steps 2: $(cat "$tmp/eval")"

# refused: training flags, no data, not a checkpoint, another vocabulary; nothing written
c=$tmp/fp32/checkpoint.json
expect_refused 'wp-ref: --eval: --lr is not an evaluation flag' "$c" -- "$ref" --eval "$c" --data "$tmp/val.txt" --lr 1e-3
expect_refused '--eval CHECKPOINT and --data SPEC are both needed' "$c" -- "$ref" --eval "$c"
expect_refused "--eval $tmp/val.txt" "$c" -- "$ref" --eval "$tmp/val.txt" --data "$tmp/val.txt"
expect_refused '--val-steps: expected an integer' "$c" -- "$ref" --eval "$c" --data "$tmp/val.txt" --val-steps 0
expect_refused '--data' "$c" -- "$ref" --eval "$c" --data "$tmp/missing.bin"
"$ref" --eval --help | grep -q 'usage: wp-ref --eval CHECKPOINT' && ok || bad "--eval --help"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
