#!/usr/bin/env bash
# An emitted training program as a user meets it: it refuses a world size other than its plan's
# and a checkpoint of another model shape (exit 2); its checkpoints and the reference trainer's
# are the same files, so either resumes the other and lands on the same weights; --trace writes
# a Chrome trace with every rank's compute and transfers, in memory bounded by one step's events;
# MFU from the topology's peaks; a signal stops it at a step boundary
# with a checkpoint that resumes (exit 4).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/train_lib.sh
common=(--synthetic --seed 3 --lr 2e-3 --warmup 1 --steps 4)
ref=("$build/wp-ref" -m "$model" --micro-batch-size 2 --micro-batches 8)

d=$tmp/plan
emit_tiny8 "$d" && ok || { bad "emit or build"; echo "0 passed, 1 failed"; exit 1; }
train=("${mpirun[@]}" -np 4 "$d/train")

# the backends it was emitted for: named in plan.json, each with its folder and its part of the
# Makefile, which finds its libraries itself (no path of this machine in the Makefile)
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert (p["backend"], p["comm"]) == ("cpu", "mpi"), p' "$d/plan.json" &&
    [ -f "$d/runtime/backend/cpu.mk" ] && [ -f "$d/runtime/backend/mpi.mk" ] && [ -f "$d/runtime/cpu/compute_cpu.c" ] &&
    [ ! -e "$d/runtime/cuda" ] && ! grep -q -- "-I/" "$d/Makefile" && ok || bad "backends of the emitted directory"

# the world size is the plan's
"${mpirun[@]}" -np 3 "$d/train" --synthetic --steps 1 >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "generated for 4 ranks" "$tmp/out" && ok || bad "world size 3: exit $rc: $(head -3 "$tmp/out")"
# bad flags
"${train[@]}" --synthetic --steps x >"$tmp/out" 2>&1
[ $? = 2 ] && grep -q -- "--steps: expected an integer" "$tmp/out" && ok || bad "bad --steps: $(head -3 "$tmp/out")"
# bad environment is bad input, the variable named
WP_COMM_TIMEOUT=abc "${train[@]}" --synthetic --steps 1 >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "WP_COMM_TIMEOUT=abc: expected a number of seconds >= 0" "$tmp/out" && ok || bad "WP_COMM_TIMEOUT=abc: exit $rc: $(head -2 "$tmp/out")"
OMP_NUM_THREADS=999999 "${train[@]}" --synthetic --steps 1 >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "OMP_NUM_THREADS=999999: expected a positive integer" "$tmp/out" && ok || bad "OMP_NUM_THREADS=999999: exit $rc: $(head -2 "$tmp/out")"
# an output naming an input: refused at start (common/outpaths.c), the input as it was
mkdir -p "$tmp/in"
"$build/wp-ref" -m "$model" --micro-batch-size 2 --synthetic --steps 1 --save "$tmp/in/checkpoint.json" >/dev/null 2>&1 || bad "wp-ref --save"
cp "$tmp/in/checkpoint.json" "$tmp/in.before"
"${train[@]}" --synthetic --steps 2 --resume "$tmp/in/checkpoint.json" --trace "$tmp/in/checkpoint.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--trace $tmp/in/checkpoint.json is --resume" "$tmp/out" && cmp -s "$tmp/in/checkpoint.json" "$tmp/in.before" &&
    ok || bad "train --trace naming --resume: exit $rc: $(head -2 "$tmp/out")"
"${train[@]}" --synthetic -m tiny >"$tmp/out" 2>&1
[ $? = 2 ] && grep -q "fixed by the plan" "$tmp/out" && ok || bad "-m accepted: $(head -3 "$tmp/out")"
# a checkpoint of another shape
mkdir -p "$tmp/other"   # a model of another shape: a folder of its own
"$build/wp-ref" -m tiny --synthetic --steps 0 --save "$tmp/other/checkpoint.json" >/dev/null 2>&1 || bad "wp-ref --steps 0"
"${train[@]}" --synthetic --steps 1 --init "$tmp/other/checkpoint.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "shape" "$tmp/out" && ok || bad "other shape: exit $rc: $(head -3 "$tmp/out")"

# 4 steps straight, reference
"${ref[@]}" "${common[@]}" --save "$tmp/straight.json" >/dev/null 2>&1 || bad "wp-ref straight"
# reference 2 steps, pipelined resumes to 4
"${ref[@]}" "${common[@]}" --stop-at 2 --save "$tmp/r2.json" >/dev/null 2>&1 || bad "wp-ref 2 steps"
"${train[@]}" "${common[@]}" --resume "$tmp/r2.json" --save "$tmp/p4.json" >"$tmp/out" 2>&1 || bad "train --resume: $(tail -3 "$tmp/out")"
"$build/tools/ckpt_compare" "$tmp/p4.json" "$tmp/straight.json" 1e-4 >"$tmp/cmp" 2>&1 && ok || bad "pipelined resume of a reference checkpoint: $(cat "$tmp/cmp")"
# the optimizer's settings against the checkpoint's, on every rank, said once: another --beta2
# refused (exit 2), another --lr warned of
"${train[@]}" "${common[@]}" --beta2 0.99 --resume "$tmp/r2.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && [ "$(grep -c -- '--beta2 0.99: the run being resumed was trained with --beta2 0.95' "$tmp/out")" = 1 ] && ok ||
    bad "train --resume with another --beta2: exit $rc: $(head -3 "$tmp/out")"
"${train[@]}" --synthetic --seed 3 --lr 1e-3 --warmup 1 --steps 4 --resume "$tmp/r2.json" >"$tmp/out" 2>&1   # common's but --lr
rc=$?
[ $rc = 0 ] && [ "$(grep -c -- 'train: warning: --lr changes on resume: 0.002 in the checkpoint, 0.001 now' "$tmp/out")" = 1 ] && ok ||
    bad "train --resume with another --lr: exit $rc: $(head -3 "$tmp/out")"
# pipelined 2 steps, reference resumes to 4
"${train[@]}" "${common[@]}" --stop-at 2 --save "$tmp/p2.json" >"$tmp/out" 2>&1 || bad "train 2 steps: $(tail -3 "$tmp/out")"
"${ref[@]}" "${common[@]}" --resume "$tmp/p2.json" --save "$tmp/r4.json" >/dev/null 2>&1 || bad "wp-ref --resume"
"$build/tools/ckpt_compare" "$tmp/r4.json" "$tmp/straight.json" 1e-4 >"$tmp/cmp" 2>&1 && ok || bad "reference resume of a pipelined checkpoint: $(cat "$tmp/cmp")"
[ -f "$tmp/config.json" ] && grep -q '"num_hidden_layers": *8' "$tmp/config.json" && ok || bad "config.json beside the checkpoint"

# a NaN in the weights: --init refuses them (exit 2, the tensor and element named); a resume
# runs into the shared loop's check, which stops before the update, exit 1, as wp-ref does
mkdir -p "$tmp/nan"
cp "$tmp/p2.json" $(ckpt_shards "$tmp/p2.json") "$tmp/nan/"
ckpt_poke "$tmp/nan/p2.json" model.norm.weight nan
"${train[@]}" "${common[@]}" --init "$tmp/nan/p2.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "p2.json: tensor model.norm.weight\[1\] is nan (first of its elements that is not finite)" "$tmp/out" && ok ||
    bad "NaN weights at --init: exit $rc: $(grep -v '^step' "$tmp/out" | head -3)"
"${train[@]}" "${common[@]}" --resume "$tmp/nan/p2.json" >"$tmp/out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "train: step 3: the loss is NaN: stopping (the checkpoint $tmp/nan/p2.json is untouched)" "$tmp/out" && ok ||
    bad "NaN weights at --resume: exit $rc: $(grep -v '^step' "$tmp/out" | head -3)"

# host memory: the ranks of a node need more than it has available (WP_MEM_AVAILABLE, the test
# hook, stands for a small machine): refused before allocating, both figures and the override said
"${mpirun[@]}" -np 4 -x WP_MEM_AVAILABLE=100000 "$d/train" "${common[@]}" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "this run needs .* of memory (2 ranks on node 0: buffers .*) and 100.0 kB are available (WP_MEM_AVAILABLE, a test hook): refusing to start (WP_SKIP_MEM_CHECK=1 starts it anyway)" "$tmp/out" &&
    ! grep -q '^step' "$tmp/out" && ok || bad "not enough memory: exit $rc: $(grep -v '^step' "$tmp/out" | head -3)"
"${mpirun[@]}" -np 4 -x WP_MEM_AVAILABLE=100000 -x WP_SKIP_MEM_CHECK=1 "$d/train" "${common[@]:0:7}" --steps 1 >"$tmp/out" 2>&1 && ok ||   # common but its --steps
    bad "WP_SKIP_MEM_CHECK=1: $(grep -v '^step' "$tmp/out" | head -3)"

# the trace: valid JSON, every rank, compute and transfers
"${train[@]}" --synthetic --steps 2 --trace "$tmp/trace.json" >"$tmp/out" 2>&1 || bad "train --trace"
python3 - "$tmp/trace.json" <<'PY' && ok || bad "trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in ev if e.get("ph") == "X"]
pids = {e["pid"] for e in spans}
cats = {e["cat"] for e in spans}
assert pids == {0, 1, 2, 3}, pids
assert {"forward", "backward", "transfer", "optimizer"} <= cats, cats
assert all(e["dur"] >= 0 for e in spans)
PY
# ... written as it goes: 3 steps and 60 (each rank's part, some 400 KB, then takes several of the
# merge's rounds of 256 KiB a rank) hold as many events per step, every one in the trace, while
# no rank ever buffered more than it did over 3 steps: one step's events (trace.c's trace_buffer)
"${train[@]}" --synthetic --steps 3 --trace "$tmp/trace3.json" >"$tmp/out" 2>&1 || bad "train --trace, 3 steps"
"${train[@]}" --synthetic --steps 60 --trace "$tmp/trace60.json" >"$tmp/out" 2>&1 || bad "train --trace, 60 steps"
python3 - "$tmp/trace3.json" "$tmp/trace60.json" <<'PY' && ok || bad "the trace's buffer is not bounded by a step"
import json, sys
def load(path):
    ev = json.load(open(path))["traceEvents"]
    buf = {e["pid"]: e["args"] for e in ev if e.get("name") == "trace_buffer"}
    spans = {}
    for e in ev:
        if e.get("ph") == "X": spans[e["pid"]] = spans.get(e["pid"], 0) + 1
    assert sorted(buf) == [0, 1, 2, 3] and all(spans[p] == buf[p]["events"] for p in buf), (buf, spans)
    return buf
short, long = load(sys.argv[1]), load(sys.argv[2])
for p in short:
    assert long[p]["events"] == 20 * short[p]["events"], (p, short[p], long[p])
    assert long[p]["most_buffered"] == short[p]["most_buffered"] <= short[p]["events"] / 3, (p, short[p], long[p])
PY

# MFU from the plan: the topology's 4 devices of 0.05 TFLOP/s fp32, the model FLOPs per token
# counted as common/flops.h says (6 per matrix parameter and LM head's, 6 * L * S * heads * head_dim
# for attention), from the plan's model
"${train[@]}" --synthetic --steps 2 --log "$tmp/mfu.log" >"$tmp/out" 2>&1 || bad "train --log"
python3 - "$tmp/mfu.log" "$d/plan.json" <<'PY' && grep -q '| MFU ' "$tmp/out" && ok || bad "mfu: $(head -1 "$tmp/mfu.log")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
plan = json.load(open(sys.argv[2]))
m = plan["model"]
H, L, F, V, S = m["hidden_size"], m["num_hidden_layers"], m["intermediate_size"], m["vocab_size"], m["seq_len"]
hd = m.get("head_dim", H // m["num_attention_heads"])
qd, kvd = m["num_attention_heads"] * hd, m["num_key_value_heads"] * hd
per_token = 6 * (L * (H * (qd + 2 * kvd) + qd * H + 3 * F * H) + V * H) + 6 * L * S * qd
tokens = plan["micro_batches"] * m["micro_batch_size"] * S
for r in rows:
    assert abs(r["tokens_per_s"] * r["ms"] * 1e-3 - tokens) <= 1e-3 * tokens, (r, tokens)
    want = per_token * tokens / (r["ms"] * 1e-3) / (4 * 0.05e12)
    assert abs(r["mfu"] - want) <= 1e-3 * want + 1e-6, (r, want)
PY

# Stopping. A signal makes every rank stop after the step under way (it travels in the step's
# allreduce), write the checkpoint of that step (--save) and exit 4; the checkpoint resumes to the
# weights of an uninterrupted run. The ranks are signalled as a batch system does (all of them,
# or one); SIGUSR1 goes to mpirun, which forwards it. SIGTERM to mpirun itself is not tested:
# Open MPI answers it on its own (SIGTERM to the ranks later, then SIGKILL, exit 1), and here it
# sometimes never exited once its ranks had. A watchdog ends any run that outlives 120 s.
long=(--synthetic --seed 3 --lr 2e-3 --warmup 1 --steps 400)
stop_run() {   # NAME SIGNAL mpirun|rank [mpirun flags...]: train until the first step is logged, then signal
    local name=$1 sig=$2 target=$3 i; shift 3
    "${mpirun[@]}" "$@" -np 4 "$d/train" "${long[@]}" --save "$tmp/$name.json" --log "$tmp/$name.log" \
        >"$tmp/$name.out" 2>&1 &
    local pid=$!
    ( sleep 120; kill -9 $pid 2>/dev/null ) &
    local dog=$!
    for i in $(seq 600); do [ -s "$tmp/$name.log" ] && break; sleep 0.1; done
    case $target in
        rank) kill -"$sig" "$(pgrep -P $pid | tail -n 1)" ;;
        ranks) kill -"$sig" $(pgrep -P $pid) ;;
        *) kill -"$sig" $pid ;;
    esac
    wait $pid
    local rc=$?
    kill $dog 2>/dev/null; wait $dog 2>/dev/null
    return $rc
}
last_step() { tail -n 1 "$1" | sed 's/^{"step":\([0-9]*\),.*/\1/'; }

# SIGTERM to every rank: exit 4, the checkpoint of the last logged step, which resumes exactly
stop_run term TERM ranks
rc=$?
n=$(last_step "$tmp/term.log")
[ $rc = 4 ] && [ -n "$n" ] && [ "$n" -lt 400 ] && [ "$(ckpt_step "$tmp/term.json")" = "$n" ] && ok ||
    bad "SIGTERM to the ranks: exit $rc, last step logged ${n:-none}, checkpoint of step $(ckpt_step "$tmp/term.json"): $(tail -3 "$tmp/term.out")"
if [ -n "$n" ]; then   # one step more, resumed or straight: the same bytes (same file names, so
    mkdir -p "$tmp/r" "$tmp/s"   # that the model files name the same optimizer file)
    "${train[@]}" "${long[@]}" --stop-at $((n + 1)) --resume "$tmp/term.json" --save "$tmp/r/ckpt.json" \
        >"$tmp/out" 2>&1 || bad "resume after SIGTERM: $(tail -3 "$tmp/out")"
    "${train[@]}" "${long[@]}" --stop-at $((n + 1)) --save "$tmp/s/ckpt.json" >/dev/null 2>&1 || bad "train to step $((n + 1))"
    same_ckpt "$tmp/r/ckpt.json" "$tmp/s/ckpt.json" &&
        ok || bad "stopped at step $n by SIGTERM, resumed to step $((n + 1)): not the uninterrupted run's checkpoint"
fi
# SIGUSR1 to mpirun, forwarded: exit 4
stop_run usr1 USR1 mpirun
rc=$?
n=$(last_step "$tmp/usr1.log")
[ $rc = 4 ] && grep -q "stopped by SIGUSR1 after step $n: the checkpoint of step $n is in" "$tmp/usr1.out" &&
    [ "$(ckpt_step "$tmp/usr1.json")" = "$n" ] && ok || bad "SIGUSR1 to mpirun: exit $rc: $(grep -v '^step' "$tmp/usr1.out" | head -3)"
# SIGTERM to one rank only: the others agree, exit 4
stop_run rank TERM rank
rc=$?
n=$(last_step "$tmp/rank.log")
[ $rc = 4 ] && grep -q "stopped by .* after step $n: the checkpoint of step $n is in" "$tmp/rank.out" &&
    [ "$(ckpt_step "$tmp/rank.json")" = "$n" ] && ok || bad "SIGTERM to one rank: exit $rc: $(grep -v '^step' "$tmp/rank.out" | head -3)"

echo "train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
