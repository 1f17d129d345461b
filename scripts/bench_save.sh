#!/usr/bin/env bash
# `make bench-save`: what a checkpoint costs a run, background against --sync-save, side by side.
# For each model, one plan is emitted and trained STEPS steps saving every EVERY steps, once with
# the background writer (the default) and once with --sync-save, in turn (a b a b: this machine's
# speed drifts between minutes). Printed per model and mode: rank 0's shard (MiB, and bytes per
# parameter it owns), the copy to host memory and the write (rank 0's, each save), the longest
# stall of a step before the last on saves (the log's save_ms: the copy, plus any wait for a write
# or a commit) and the last step's (whose save the end of the run waits for in full), the median
# step without saves, and the peak resident memory of each rank (getrusage, through
# /usr/bin/time). The models: the demo's (tiny, 2 ranks) and a 0.55 B-parameter one (H 1536, 16
# layers, 1f1b on 2 ranks): the largest whose training state (16 bytes per parameter) and the
# background copy (12 more) fit in this machine's 24 GB together. Never fails the build.
# usage: scripts/bench_save.sh BUILD_DIR   (env: MODELS="tiny big", STEPS, EVERY, REPEAT (default 1))
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
wpgen=$build/wpgen
steps=${STEPS:-6}; every=${EVERY:-2}; repeat=${REPEAT:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
[ -x /usr/bin/time ] || { echo "bench-save: needs /usr/bin/time (apt install time) for the memory figures"; exit 0; }

# the 0.55 B model: a config.json as Hugging Face writes one
cat >"$tmp/big.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1536, "num_hidden_layers": 16,
 "num_attention_heads": 12, "num_key_value_heads": 12, "intermediate_size": 4096, "vocab_size": 32000,
 "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 2048}
EOF

# one node of 2 CPU "devices" with room for the big model's training state
python3 - topologies/cpu-1x4.json "$tmp/cpu-1x2.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
t["name"] = "cpu-1x2-16gb"
t["nodes"][0]["devices"] = 2
for d in t["device_types"].values(): d["mem_gb"] = 16
json.dump(t, open(sys.argv[2], "w"))
EOF

# MODEL: emit flags
plan_of() {
    case $1 in
        tiny) echo "-m tiny -t $tmp/cpu-1x2.json -s weipipe-interleave --micro-batches 2 --micro-batch-size 2" ;;
        big)  echo "-m $tmp/big.json -t $tmp/cpu-1x2.json -s 1f1b --micro-batches 2 --micro-batch-size 1 --seq 64" ;;
    esac
}

summary() {   # NAME LOG OUT TIMES MANIFEST
    python3 - "$@" <<'EOF'
import json, math, os, re, statistics, sys
name, log, out, times, manifest = sys.argv[1:6]
man = json.load(open(manifest))
model = sum(math.prod(shape) for shape in man["tensors"].values())
own0 = sum(n for _, n in man["shards"][0]["slices"].values())
shard0 = os.path.getsize(os.path.join(os.path.dirname(manifest), man["shards"][0]["file"]))
steps = [json.loads(l) for l in open(log)]
# the longest a step before the last waited on saves; the last step's save is waited for in full
stall = max((s.get("save_ms", 0) for s in steps[:-1]), default=0)
end = steps[-1].get("save_ms", 0) if steps else 0
plain = [s["ms"] for s in steps[1:] if "save_ms" not in s] or [s["ms"] for s in steps]
saves = re.findall(r"^save .*shard ([0-9.]+) MiB: copied in ([0-9.]+) ms, written in ([0-9.]+) s", open(out).read(), re.M)
rss = [int(x) for x in re.findall(r"maxrss_kb (\d+)", open(times).read())]
mib = float(saves[0][0]) if saves else 0
print(f"  {name:<10} {model / 1e6:.1f} M parameters, rank 0 owns {own0 / 1e6:.1f} M: its shard {shard0 / 2**20:.1f} MiB "
      f"({shard0 / own0:.2f} bytes per owned parameter, {shard0 / model:.2f} per model parameter) |"
      f" copy {' '.join(s[1] for s in saves):>28} ms | write {' '.join(s[2] for s in saves):>22} s"
      f" | longest stall before the last step {stall:9.1f} ms, the last step's save {end:9.1f} ms | median step {statistics.median(plain):8.1f} ms | peak RSS per rank "
      f"{' '.join(f'{r / 2**20:.2f}' for r in sorted(rss))} GiB")
EOF
}

for model in ${MODELS:-tiny big}; do
    d=$tmp/$model
    # shellcheck disable=SC2046
    "$wpgen" emit $(plan_of "$model") -o "$d" >"$tmp/emit.out" 2>&1 && make -s -j"$(nproc)" -C "$d" >/dev/null 2>&1 ||
        { echo "bench-save: $model: emit or build failed: $(tail -2 "$tmp/emit.out")"; continue; }
    echo "== $model: $(grep -o '"strategy": *"[^"]*"' "$d/plan.json" | head -1 | cut -d'"' -f4) on 2 ranks, $steps steps, a save every $every"
    for r in $(seq "$repeat"); do
        for mode in background sync; do
            flags=(); [ $mode = sync ] && flags=(--sync-save)
            rm -rf "$tmp/ck"; mkdir -p "$tmp/ck"
            OMP_NUM_THREADS=1 "${mpirun[@]}" -np 2 /usr/bin/time -f "maxrss_kb %M" "$d/train" --synthetic --steps "$steps" \
                --save "$tmp/ck/checkpoint.json" --save-every "$every" --log "$tmp/log" "${flags[@]}" >"$tmp/out" 2>"$tmp/times" ||
                { echo "  $mode: the run failed: $(grep -v maxrss "$tmp/times" | tail -2)"; continue; }
            summary "$mode" "$tmp/log" "$tmp/out" "$tmp/times" "$tmp/ck/checkpoint.json"
        done
    done
done
