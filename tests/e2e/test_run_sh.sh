#!/usr/bin/env bash
# The emitted run.sh, the common launch on one machine: it is there, executable and wpgen's (in
# .wpgen-files); it trains; SIGTERM sent to its whole process group (as Ctrl-C and timeout(1)
# send it) becomes the ranks' stop-and-save, not mpirun's kill a second later: exit 4, the
# checkpoint of the step the log stopped at, and --resume from it lands on the uninterrupted
# run's weights bit for bit.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
steps=40
long=(--synthetic --seed 3 --lr 2e-3 --warmup 1 --steps $steps)

d=$tmp/plan
emit_tiny8 "$d" || { echo "FAIL: emit or build"; echo "0 passed, 1 failed"; exit 1; }
[ -x "$d/run.sh" ] && ok || bad "$d/run.sh is missing or not executable"
grep -q " run.sh$" "$d/.wpgen-files" && ok || bad "run.sh is not in $d/.wpgen-files"

# the uninterrupted run
mkdir -p "$tmp/u" "$tmp/k" "$tmp/r"
"$d/run.sh" "${long[@]}" --save "$tmp/u/ckpt.json" >"$tmp/u.out" 2>&1 && ok || bad "uninterrupted run: $(tail -3 "$tmp/u.out")"

# started in a process group of its own; TERM to the group once 5 steps are logged
setsid "$d/run.sh" "${long[@]}" --save "$tmp/k/ckpt.json" --log "$tmp/k.log" >"$tmp/k.out" 2>&1 &
job=$!
( sleep 120; kill -9 -- -$job 2>/dev/null ) & dog=$!
for i in $(seq 600); do [ -f "$tmp/k.log" ] && [ "$(wc -l <"$tmp/k.log")" -ge 5 ] && break; sleep 0.1; done
kill -TERM -- -$job
wait $job; rc=$?
kill $dog 2>/dev/null; wait $dog 2>/dev/null
last=$(tail -n 1 "$tmp/k.log" | sed 's/^{"step":\([0-9]*\),.*/\1/')
s=$(ckpt_step "$tmp/k/ckpt.json")
[ $rc = 4 ] && ok || bad "TERM to run.sh's group: exit $rc, expected 4: $(tail -3 "$tmp/k.out")"
[ -n "$s" ] && [ "$s" = "$last" ] && [ "$s" -lt $steps ] && ok ||
    bad "TERM to run.sh's group: checkpoint of step ${s:-none}, the log's last step ${last:-none} (of $steps)"
echo "  SIGTERM to run.sh's process group: exit $rc, checkpoint of step ${s:-none}"
"$d/run.sh" "${long[@]}" --resume "$tmp/k/ckpt.json" --save "$tmp/r/ckpt.json" >"$tmp/r.out" 2>&1 ||
    bad "resume from step $s: $(tail -3 "$tmp/r.out")"
same_ckpt "$tmp/r/ckpt.json" "$tmp/u/ckpt.json" && ok ||
    bad "resumed from step $s: not the uninterrupted run's weights at step $steps"

echo "run.sh: $pass passed, $fail failed"
[ $fail = 0 ]
