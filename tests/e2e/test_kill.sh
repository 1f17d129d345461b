#!/usr/bin/env bash
# Hardware fails: a job that loses a rank ends by itself (no hang), and the last checkpoint it
# committed resumes to the uninterrupted run's weights, bit for bit. Two ways to die:
#  - one rank (not 0) killed with SIGKILL in the middle of training;
#  - a rank killed with SIGKILL while the ranks write a checkpoint (a save every step, written in
#    the background; the kill sent while a temporary of the k-th save exists, which
#    WP_SAVE_DELAY_MS, a test hook, keeps there 300 ms): rank 0 (which commits the manifest)
#    twice, ranks 3 and 1 (which write only their shards) once each. At least 3 of the 4 kills
#    must land with the temporaries there, or the test would not be testing what it says.
# Each resumed run saves under the same file name as the uninterrupted one, so that equal states
# give byte-identical files (the manifest names its shards by content).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
steps=30
long=(--synthetic --seed 3 --lr 2e-3 --warmup 1 --steps $steps)
midsave=0

d=$tmp/plan
emit_tiny8 "$d" || { echo "FAIL: emit or build"; echo "0 passed, 1 failed"; exit 1; }
train=("${mpirun[@]}" -np 4 "$d/train")

# the pid of the given rank among mpirun's children (Open MPI puts the rank in the environment)
rank_pid() {
    local c
    for c in $(pgrep -P "$1"); do
        tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$c"; return; }
    done
}
# runs a job in the background with a watchdog: a job that outlives 120 s has hung
start_job() {   # OUT, train flags...
    local out=$1; shift
    "${train[@]}" "$@" >"$out" 2>&1 &
    job=$!
    ( sleep 120; kill -9 $job 2>/dev/null ) &
    dog=$!
}
end_job() { wait $job; local rc=$?; kill $dog 2>/dev/null; wait $dog 2>/dev/null; return $rc; }

# the uninterrupted run
mkdir -p "$tmp/u"
"${train[@]}" "${long[@]}" --save "$tmp/u/ckpt.json" >"$tmp/u.out" 2>&1 || { bad "uninterrupted run: $(tail -3 "$tmp/u.out")"; }

# resumes CKPT (a committed checkpoint) in DIR to the end and compares with the uninterrupted run
resume_and_compare() {   # WHAT, CKPT, DIR
    local what=$1 ck=$2 dir=$3 s
    s=$(ckpt_step "$ck")
    [ -n "$s" ] || { bad "$what: no committed checkpoint left ($(ls "$(dirname "$ck")" | tr '\n' ' '))"; return; }
    ls "$(dirname "$ck")" | grep -q '\.tmp\.' && { midsave=$((midsave + 1)); what="$what (mid-save: a temporary was left)"; }
    mkdir -p "$dir"
    "${train[@]}" "${long[@]}" --resume "$ck" --save "$dir/ckpt.json" >"$dir.out" 2>&1 ||
        { bad "$what: resume from step $s: $(tail -3 "$dir.out")"; return; }
    same_ckpt "$dir/ckpt.json" "$tmp/u/ckpt.json" && ok ||
        bad "$what: resumed from step $s, not the uninterrupted run's weights at step $steps"
    echo "  $what: resumed from the checkpoint of step $s, landed on the uninterrupted weights"
}

# 1. a rank other than 0 dies mid-training; the others must not wait forever for it
mkdir -p "$tmp/k1"
t0=$SECONDS
WP_COMM_TIMEOUT=20 start_job "$tmp/k1.out" "${long[@]}" --save "$tmp/k1/ckpt.json" --save-every 5 --log "$tmp/k1.log"
for i in $(seq 600); do [ -f "$tmp/k1.log" ] && [ "$(wc -l <"$tmp/k1.log")" -ge 12 ] && break; sleep 0.1; done
victim=$(rank_pid $job 2)
[ -n "$victim" ] && kill -9 "$victim"
end_job
rc=$?
[ -n "$victim" ] && [ $rc != 0 ] && [ $((SECONDS - t0)) -lt 110 ] && ok ||
    bad "rank 2 killed: exit $rc after $((SECONDS - t0)) s (victim ${victim:-not found}): $(tail -3 "$tmp/k1.out")"
resume_and_compare "rank 2 killed at step $(tail -n 1 "$tmp/k1.log" | sed 's/^{"step":\([0-9]*\),.*/\1/')" "$tmp/k1/ckpt.json" "$tmp/r1"

# 2. a rank dies while the ranks write a checkpoint: the previous one must still be whole
victims=(0 0 0 3 1)
for k in 1 2 3 4; do
    v=${victims[$k]}
    mkdir -p "$tmp/k2$k"
    WP_SAVE_DELAY_MS=300 start_job "$tmp/k2$k.out" "${long[@]}" --save "$tmp/k2$k/ckpt.json" --save-every 1
    # wait for the checkpoint of step k to be committed, then for the next save's temporaries
    for i in $(seq 2000); do s=$(ckpt_step "$tmp/k2$k/ckpt.json"); [ -n "$s" ] && [ "$s" -ge $k ] && break; sleep 0.02; done
    # the victim found before the temporaries appear: looking it up takes a pgrep and reads of
    # /proc, which on a loaded machine can outlast the 300 ms the temporaries stay
    rv=$(rank_pid $job "$v")
    for i in $(seq 2000); do
        ls "$tmp/k2$k" | grep -q '\.tmp\.' && break
        kill -0 $job 2>/dev/null || break
        sleep 0.005
    done
    [ -n "$rv" ] && kill -9 "$rv"
    end_job
    resume_and_compare "rank $v killed during save $k" "$tmp/k2$k/ckpt.json" "$tmp/r2$k"
done

[ $midsave -ge 3 ] && ok || bad "only $midsave of the 4 kills during saves landed while a temporary of the save existed"
echo "kill: $pass passed, $fail failed ($midsave of the kills during saves landed while a temporary of the save existed)"
[ $fail = 0 ]
