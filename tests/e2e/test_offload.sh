#!/usr/bin/env bash
# --offload-activations (docs/strategies.md, "Activation offload"). On the CPU backend the stashes
# live in a host pool of blocks of their own and every layer's input goes through the scratch's
# two staging slots (model.c, "offload"): a run with offload must give the same bits as the same
# plan without it (every step's loss and gradient norm as logged, every weight and AdamW moment
# at the end, tolerance 0): a copy missed or out of order reads another layer's input from the
# staging and changes them. Cases: the ring (weipipe-interleave), the split backward with
# layer-less end chunks (weipipe-zb2 --replicate-ends: the B half rebuilds the stash from the
# host copy), activation passing in bf16 (1f1b). Then the memory plan: on dgx-h100 at 131,072
# tokens offload moves the stashes off the device (device peak and activations fall, the node's
# host memory rises from 0, and the plan fits), a node whose host memory is too small makes the
# plan not fit and says which; the simulated copies; the CUDA program emitted with the offload (not
# run: no GPU here); and bad input: exit 2 with the flag or JSON path named.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
model=tests/data/tiny8/config.json
common=(--synthetic --steps 3 --seed 5 --lr 2e-3 --warmup 1)
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

steps_of() { grep -o '"loss": *[^,}]*\|"grad_norm": *[^,}]*' "$1"; }

# Every program here has the same runtime (cpu and mpi): built once, its objects copied into the
# next programs (newer than their sources there, so make compiles only the plan's files).
reuse_runtime() {   # DIR
    if [ -d "$tmp/rt/obj/runtime" ] && diff -rq "$tmp/rt/runtime" "$1/runtime" >/dev/null; then
        mkdir -p "$1/obj" && cp -r "$tmp/rt/obj/runtime" "$1/obj/"
    fi
}

same_bits() {   # label topology ranks micro-batches [wpgen flags...]
    local label=$1 topo=$2 n=$3 mb=$4; shift 4
    for v in plain off; do
        local d="$tmp/$v" extra=()
        [ $v = off ] && extra=(--offload-activations)
        rm -rf "$d"
        "$build/wpgen" emit -t "$topo" -m "$model" --micro-batch-size 2 --micro-batches "$mb" --recompute "$@" "${extra[@]}" \
            -o "$d" >"$tmp/emit.out" 2>&1 && reuse_runtime "$d"
        if [ ! -f "$d/plan.json" ] || ! bash tests/make_emitted.sh "$d" >"$tmp/make.out" 2>&1; then
            bad "$label: emit or build ($v): $(tail -3 "$tmp/emit.out" "$tmp/make.out")"; return
        fi
        [ -d "$tmp/rt" ] || cp -r "$d" "$tmp/rt"
        if ! timeout 300 "${mpirun[@]}" -np "$n" "$d/train" "${common[@]}" --save "$d/ck.json" --log "$d/log" >"$tmp/run.out" 2>&1; then
            bad "$label: train ($v): $(tail -5 "$tmp/run.out")"; return
        fi
    done
    grep -q '"offload_activations": true' "$tmp/off/plan.json" || { bad "$label: plan.json does not record the offload"; return; }
    grep -q '"offload_activations": false' "$tmp/plain/plan.json" || { bad "$label: plan.json records an offload it lacks"; return; }
    [ "$(steps_of "$tmp/plain/log" | wc -l)" = 6 ] || { bad "$label: expected 3 logged steps"; return; }
    if ! diff <(steps_of "$tmp/plain/log") <(steps_of "$tmp/off/log") >"$tmp/diff.out"; then
        bad "$label: losses or gradient norms differ with offload: $(cat "$tmp/diff.out")"; return
    fi
    if ! "$build/tools/ckpt_compare" "$tmp/plain/ck.json" "$tmp/off/ck.json" 0 >"$tmp/cmp.out" 2>&1; then
        bad "$label: weights differ with offload: $(cat "$tmp/cmp.out")"; return
    fi
    ok "$label: the same bits with offload"
}

same_bits "weipipe-interleave" topologies/cpu-2x2.json 4 2 -s weipipe-interleave
same_bits "weipipe-zb2 --replicate-ends" topologies/cpu-2x2.json 4 2 -s weipipe-zb2 --replicate-ends
same_bits "1f1b bf16" topologies/cpu-1x4.json 4 2 -s 1f1b --precision bf16 --grad-precision bf16

# ---- the memory plan (at 262,144 tokens: 131,072 fits without offload since the gradients and
# activations are written in place, docs/strategies.md) ----
big=(-t topologies/dgx-h100.json -m llama2-7b -s weipipe-interleave --recompute --micro-batches 8 --seq 262144 --micro-batch-size 1)
"$build/wpgen" plan "${big[@]}" --json >"$tmp/p0.json" 2>/dev/null
"$build/wpgen" plan "${big[@]}" --offload-activations --json >"$tmp/p1.json"; rc=$?
if python3 - "$tmp/p0.json" "$tmp/p1.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
ma, mb = a["peak_mem_breakdown"], b["peak_mem_breakdown"]
GiB = 2 ** 30
checks = [
    (not a["fits"] and b["fits"], "fits without offload %s, with %s" % (a["fits"], b["fits"])),
    (b["peak_mem_bytes"] < a["peak_mem_bytes"], "device peak %.2f -> %.2f GiB" % (a["peak_mem_bytes"] / GiB, b["peak_mem_bytes"] / GiB)),
    (mb["activations"] < ma["activations"], "activations %.2f -> %.2f GiB" % (ma["activations"] / GiB, mb["activations"] / GiB)),
    # the stashes moved: what left the activations is in host memory, less the one micro-batch's
    # chunk inputs that stay on the device; the workspace gains the staging, far less than that
    (mb["host"] > 0.9 * (ma["activations"] - mb["activations"]), "rank's host memory %.2f GiB" % (mb["host"] / GiB)),
    (mb["workspace"] - ma["workspace"] < mb["host"] / 4, "workspace %.2f -> %.2f GiB" % (ma["workspace"] / GiB, mb["workspace"] / GiB)),
    (a["host_mem_bytes"] == 0 and b["host_mem_bytes"] >= 8 * mb["host"] * 0.99, "node's host memory %d -> %.2f GiB" % (a["host_mem_bytes"], b["host_mem_bytes"] / GiB)),
    (b["offload_activations"] and not a["offload_activations"], "offload_activations recorded"),
]
bad = [m for okk, m in checks if not okk]
print("; ".join(m for _, m in checks))
sys.exit(1 if bad else 0)
PY
then ok "plan memory with offload (exit $rc)"; else bad "plan memory with offload"; fi
[ "$rc" = 0 ] || bad "the offloaded plan at 262144 tokens: exit $rc, expected 0 (it fits)"
"$build/wpgen" plan "${big[@]}" --offload-activations | grep -q "^host memory .* on node n0 of .*: fits" &&
    ok "summary's host memory line" || bad "summary's host memory line"

# the simulator: the copies cost time on the host link where compute does not hide them. At the
# default 55 GB/s only each chunk's first copy in and last out are exposed (a layer's compute at
# 131k tokens far outlasts its 1 GiB copy); over a 0.5 GB/s link every copy is, and the step grows
python3 - "$tmp/slow-host.json" <<'PY'
import json, sys
t = json.load(open("topologies/dgx-h100.json"))
t["device_types"]["H100-SXM"]["host_GBps"] = 0.5
json.dump(t, open(sys.argv[1], "w"))
PY
at131=("${big[@]/262144/131072}")
"$build/wpgen" sim "${at131[@]}" --json >"$tmp/s0.json" 2>/dev/null
"$build/wpgen" sim "${at131[@]}" --offload-activations --json >"$tmp/s1.json" 2>/dev/null
"$build/wpgen" sim "${at131[@]/topologies\/dgx-h100.json/$tmp/slow-host.json}" --offload-activations --json >"$tmp/s2.json" 2>/dev/null
if python3 - "$tmp/s0.json" "$tmp/s1.json" "$tmp/s2.json" <<'PY'
import json, sys
a, b, c = (json.load(open(f)) for f in sys.argv[1:4])
x = lambda d: d.get("offload_exposed_s_per_rank", 0)
# per rank: 32 chunk-micro-batch forwards and as many backwards, each with one whole copy
# exposed: 1 GiB at 55 GB/s is 19.5 ms
one = 2 ** 30 / 55e9
checks = [
    (x(a) == 0 and 0 < x(b) <= 2 * 32 * 2 * one * 1.01, "exposed %.3g s, %.3g s" % (x(a), x(b))),
    (b["step_time_s"] >= a["step_time_s"], "step %.4g -> %.4g s" % (a["step_time_s"], b["step_time_s"])),
    (x(c) > 20 * x(b) and c["step_time_s"] > b["step_time_s"] + 0.5 * x(c) / 2, "slow link: exposed %.4g s, step %.4g s" % (x(c), c["step_time_s"])),
]
print("; ".join(m for _, m in checks))
sys.exit(0 if all(ok for ok, _ in checks) else 1)
PY
then ok "simulated offload copies"; else bad "simulated offload copies"; fi

# a node whose host memory cannot hold the stashes: the plan does not fit, and says why
python3 - "$tmp/small-host.json" <<'PY'
import json, sys
t = json.load(open("topologies/dgx-h100.json"))
t["nodes"][0]["host_mem_gb"] = 100
json.dump(t, open(sys.argv[1], "w"))
PY
out=$("$build/wpgen" plan "${big[@]/topologies\/dgx-h100.json/$tmp/small-host.json}" --offload-activations 2>&1); rc=$?
if [ "$rc" = 1 ] && grep -q "host memory .*DOES NOT FIT" <<<"$out" &&
   grep -q "the plan does not fit: node n0 keeps [0-9]* bytes of offloaded stashes in host memory of 100000000000 (nodes\[0\].host_mem_gb)" <<<"$out"; then
    ok "host memory too small: exit 1, said"
else bad "host memory too small: exit $rc: $out"; fi

# ---- bad input: exit 2, the flag or the JSON path named ----
expect2() {   # label pattern command...
    local label=$1 pat=$2; shift 2
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" = 2 ] && grep -qF -- "$pat" <<<"$out"; then ok "$label"; else bad "$label: exit $rc: $out"; fi
}
expect2 "offload without --recompute" "wpgen: --offload-activations: expected --recompute too" \
    "$build/wpgen" plan -t topologies/cpu-2x2.json -m "$model" --offload-activations
# the CUDA program (not run here: no GPU) is emitted with the offload recorded
"$build/wpgen" emit "${big[@]}" --offload-activations --backend cuda -o "$tmp/cuda" >/dev/null 2>&1 &&
    grep -q '"offload_activations": true' "$tmp/cuda/plan.json" && grep -q "\.recompute = 2," "$tmp/cuda/plan_desc.c" &&
    ok "CUDA emit records the offload" || bad "CUDA emit with offload"
topo_with() {   # python expression on t -> file
    python3 - "$tmp/t.json" "$1" <<'PY'
import json, sys
t = json.load(open("topologies/dgx-h100.json"))
exec(sys.argv[2])
json.dump(t, open(sys.argv[1], "w"))
PY
    echo "$tmp/t.json"
}
expect2 "host_mem_gb 0" "t.json: nodes[0].host_mem_gb: expected a positive number, got 0" \
    "$build/wpgen" plan -t "$(topo_with 't["nodes"][0]["host_mem_gb"] = 0')" -m llama2-7b
expect2 "host_mem_gb too large" "t.json: nodes[0].host_mem_gb: expected a number in [0.001, 1e+06], got 5000000" \
    "$build/wpgen" plan -t "$(topo_with 't["nodes"][0]["host_mem_gb"] = 5000000')" -m llama2-7b
expect2 "host_GBps a string" "t.json: device_types.H100-SXM.host_GBps: expected a positive number, got \"55\"" \
    "$build/wpgen" plan -t "$(topo_with 't["device_types"]["H100-SXM"]["host_GBps"] = "55"')" -m llama2-7b

echo "test_offload: $pass passed, $fail failed"
[ "$fail" = 0 ]
