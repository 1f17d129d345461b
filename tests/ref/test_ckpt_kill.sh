#!/usr/bin/env bash
# A checkpoint survives kill -9 at any moment: wp-ref saves every step (so that most of its time
# is spent inside a save) and is killed with SIGKILL 12 times at random moments, each run resuming
# from the checkpoint the previous one left. After every kill the checkpoint must resume (one more
# step, saved), be no older than the last one verified, and that save must leave no temporaries
# and exactly one shard (one process, --keep 1: one shard). Before checkpoints were one commit, a third of the kills left
# "optimizer state of step N but ... of step N-1".
set -uo pipefail
build=${1:-build}
ref=$build/wp-ref
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
ck=$tmp/ck/checkpoint.json
mkdir -p "$tmp/ck"
base=(-m tiny --seq 16 --micro-batch-size 1 --synthetic --lr 1e-3 --steps 1000000)
source tests/ckpt.sh

fails=0; last=0; resumed=0; empty=0
for i in $(seq 1 12); do
    args=("${base[@]}")
    [ -f "$ck" ] && args+=(--resume "$ck")
    "$ref" "${args[@]}" --save "$ck" --save-every 1 --keep 1 >"$tmp/run.out" 2>&1 &
    pid=$!
    sleep "0.$(printf '%02d' $((RANDOM % 35 + 10)))"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    if [ ! -f "$ck" ]; then empty=$((empty + 1)); continue; fi   # killed before its first save
    now=$(ckpt_step "$ck")
    if [ -z "$now" ] || [ "$now" -lt "$last" ]; then
        echo "FAIL: kill $i: the checkpoint is of step '${now}', an earlier one was of step $last"; fails=$((fails + 1)); continue
    fi
    # Resume for one step and save: the checkpoint loads whole, and the save cleans up.
    if ! "$ref" "${base[@]}" --resume "$ck" --stop-at $((now + 1)) --save "$ck" --keep 1 >"$tmp/resume.out" 2>&1; then
        echo "FAIL: kill $i: resume from step $now: $(grep -m1 'wp-ref:' "$tmp/resume.out")"; fails=$((fails + 1)); continue
    fi
    resumed=$((resumed + 1))
    last=$(ckpt_step "$ck")
    [ "$last" = $((now + 1)) ] || { echo "FAIL: kill $i: resumed to step $last, expected $((now + 1))"; fails=$((fails + 1)); }
    left=$(ls "$tmp/ck" | grep -c '\.tmp\.')
    opts=$(ls "$tmp/ck" | grep -c '^checkpoint\.shard\..*\.safetensors$')
    if [ "$left" != 0 ] || [ "$opts" != 1 ]; then
        echo "FAIL: kill $i: after the next save: $left temporaries, $opts shards: $(ls "$tmp/ck" | tr '\n' ' ')"
        fails=$((fails + 1))
    fi
done
[ "$resumed" -ge 6 ] || { echo "FAIL: only $resumed of 12 kills left a checkpoint to resume ($empty before the first save)"; fails=$((fails + 1)); }
echo "checkpoint kill: $resumed of 12 kills resumed (at step $last), $empty before the first save, $fails failures"
[ "$fails" -eq 0 ]
