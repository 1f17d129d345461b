#!/usr/bin/env bash
# Checkpoints written in the background (runtime/train/saver.h): training goes on while a save is
# written, and what is saved is what a save written before the next step holds. WP_SAVE_DELAY_MS
# (a test hook) keeps each file's temporary that many milliseconds before its rename, so that a
# write of the tiny model takes long enough to be seen. Checked:
#  - with the delay, the steps after a save run before its commit (its "save" line comes after
#    the next step's line), and the step that began it waited for the copy only (its save_ms in
#    the log is far under the delay); with --sync-save the step waits for the whole write;
#  - a step's own commit (--sync-save, the last step) is said after the step's line;
#  - the background run's checkpoints are byte-identical to the --sync-save run's;
#  - SIGTERM while a shard is being written: the run waits for the write, saves the step it
#    stops at, exits 4, leaves no temporary, and that checkpoint resumes to the uninterrupted
#    run's weights bit for bit.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
d=$tmp/plan
emit_tiny8 "$d" || { echo "FAIL: emit or build"; echo "0 passed, 1 failed"; exit 1; }
train=("${mpirun[@]}" -np 4 "$d/train")
run=(--synthetic --seed 7 --lr 2e-3 --steps 12)
delay=800

# the step's save_ms in a JSON log (empty if none)
save_ms() {   # LOG STEP
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["step"] == int(sys.argv[2]): print(o.get("save_ms", ""))' "$1" "$2"
}

# 1. in the background, against --sync-save
mkdir -p "$tmp/bg/ck" "$tmp/sync/ck"
WP_SAVE_DELAY_MS=$delay "${train[@]}" "${run[@]}" --save "$tmp/bg/ck/ckpt.json" --save-every 4 --keep 3 \
    --log "$tmp/bg/log" >"$tmp/bg/out" 2>&1 || bad "background run: $(tail -3 "$tmp/bg/out")"
WP_SAVE_DELAY_MS=$delay "${train[@]}" "${run[@]}" --save "$tmp/sync/ck/ckpt.json" --save-every 4 --keep 3 --sync-save \
    --log "$tmp/sync/log" >"$tmp/sync/out" 2>&1 || bad "--sync-save run: $(tail -3 "$tmp/sync/out")"
line_of() { grep -n "^$2 *$3/" "$1" | head -1 | cut -d: -f1; }   # OUT KIND STEP: its line number
s4=$(line_of "$tmp/bg/out" save 4) n5=$(line_of "$tmp/bg/out" step 5)
[ -n "$s4" ] && [ -n "$n5" ] && [ "$s4" -gt "$n5" ] && ok ||
    bad "the save of step 4 did not run beside step 5 (save line ${s4:-none}, step 5's line ${n5:-none}): $(grep -E '^(save|step)' "$tmp/bg/out" | head -8)"
s4=$(line_of "$tmp/sync/out" save 4) n5=$(line_of "$tmp/sync/out" step 5)
[ -n "$s4" ] && [ -n "$n5" ] && [ "$s4" -lt "$n5" ] && ok || bad "--sync-save: the save of step 4 did not come before step 5"
# a step's own commit is said after its step line: step 4's with --sync-save, the last step's in both
n4=$(line_of "$tmp/sync/out" step 4)
[ -n "$s4" ] && [ -n "$n4" ] && [ "$s4" -gt "$n4" ] && ok || bad "--sync-save: the save of step 4 came before its step line"
for out in "$tmp/bg/out" "$tmp/sync/out"; do
    s12=$(line_of "$out" save 12) n12=$(line_of "$out" step 12)
    [ -n "$s12" ] && [ -n "$n12" ] && [ "$s12" -gt "$n12" ] && ok ||
        bad "save 12/12 before step 12/12: $(grep -E '^(save|step)' "$out" | tail -3)"
done
bg=$(save_ms "$tmp/bg/log" 4) sy=$(save_ms "$tmp/sync/log" 4)
python3 -c 'import sys; bg, sy, d = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); sys.exit(not (bg < d / 4 and sy >= d))' \
    "${bg:-1e9}" "${sy:-0}" $delay && ok || bad "step 4 waited ${bg:-?} ms for a background save, ${sy:-?} ms for a synchronous one (delay $delay ms)"
echo "step 4's stall: ${bg} ms in the background, ${sy} ms with --sync-save (each file held $delay ms)"
for s in 4 8 12; do
    a=$tmp/bg/ck/ckpt.$s.json b=$tmp/sync/ck/ckpt.$s.json
    same_ckpt "$a" "$b" && ok || bad "the checkpoint of step $s differs between the background and the --sync-save run"
done

# 2. SIGTERM in the middle of a background write
mkdir -p "$tmp/u" "$tmp/t/ck" "$tmp/r"
long=(--synthetic --seed 7 --lr 2e-3 --steps 40)
"${train[@]}" "${long[@]}" --save "$tmp/u/ckpt.json" >"$tmp/u.out" 2>&1 || bad "uninterrupted run: $(tail -3 "$tmp/u.out")"
WP_SAVE_DELAY_MS=1500 "${train[@]}" "${long[@]}" --save "$tmp/t/ck/ckpt.json" --save-every 3 >"$tmp/t.out" 2>&1 &
job=$!
( sleep 120; kill -9 $job 2>/dev/null ) &
dog=$!
for i in $(seq 3000); do ls "$tmp/t/ck" | grep -q '\.tmp\.' && break; kill -0 $job 2>/dev/null || break; sleep 0.01; done
during=$(ls "$tmp/t/ck" | grep -c '\.tmp\.')
kill -TERM $(pgrep -P $job)   # every rank, as a batch system does (mpirun answers SIGTERM its own way)
wait $job; rc=$?
kill $dog 2>/dev/null; wait $dog 2>/dev/null
s=$(ckpt_step "$tmp/t/ck/ckpt.json")
[ "$during" -gt 0 ] && [ $rc = 4 ] && ok || bad "SIGTERM during a write (${during} temporaries then): exit $rc: $(tail -3 "$tmp/t.out")"
grep -q "stopped by SIGTERM after step $s: the checkpoint of step $s is in" "$tmp/t.out" && ok ||
    bad "the stop did not save its own step (checkpoint of step ${s:-none}): $(grep -i stopped "$tmp/t.out")"
ls "$tmp/t/ck" | grep -q '\.tmp\.' && bad "a temporary was left: $(ls "$tmp/t/ck" | tr '\n' ' ')" || ok
"${train[@]}" "${long[@]}" --resume "$tmp/t/ck/ckpt.json" --save "$tmp/r/ckpt.json" >"$tmp/r.out" 2>&1 &&
    same_ckpt "$tmp/r/ckpt.json" "$tmp/u/ckpt.json" && ok ||
    bad "resumed from the stop's checkpoint (step ${s:-none}): not the uninterrupted run's weights: $(tail -2 "$tmp/r.out")"
echo "SIGTERM with $during temporaries of a save under way: exit $rc, checkpoint of step $s, resumed to the uninterrupted weights"
echo "background save: $pass passed, $fail failed"
[ $fail = 0 ]
