#!/usr/bin/env bash
# What --replicate-ends changes on WeiPipe's Table 2 setup (scripts/table2.sh: 2 nodes x 8 A800,
# NVLink inside, 10 GbE between, 32 layers, bf16, recomputation, one replica of 16): wpgen sim of
# weipipe-interleave (and weipipe-naive) with and without the flag, row by row: the step, tokens/s
# per GPU, the peak memory and the bytes between nodes per step.
# usage: scripts/table2_ends.sh [BUILD_DIR] (env: MB=micro-batches per rank, default 8;
# STRATEGIES="weipipe-interleave weipipe-naive"; EXTRA=more wpgen flags)
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
wpgen=$build/wpgen
topo=topologies/weipipe-2x8-a800-nvlink-10gbe.json
[ -x "$wpgen" ] || { echo "table2_ends: $wpgen missing (make)"; exit 1; }
printf '%-19s %-5s %-6s %-3s | %9s %9s %7s | %9s %9s %7s | %9s %9s | %9s %9s\n' strategy H S G "step s" "+ends s" change \
    "tok/s/GPU" "+ends" change "peak GiB" "+ends" "inter GiB" "+ends"
for s in ${STRATEGIES:-weipipe-interleave weipipe-naive}; do
    for row in "1024 4096 16" "1024 8192 8" "1024 16384 4" "2048 4096 16" "2048 8192 8" "2048 16384 4" "4096 4096 16" "4096 8192 8" "4096 16384 4"; do
        read -r H S G <<<"$row"
        args=(-t "$topo" -m "llama-h$H" --seq "$S" --micro-batch-size "$G" --recompute --replicas 1 --micro-batches "${MB:-8}" -s "$s" ${EXTRA:-} --json)
        a=$("$wpgen" sim "${args[@]}" 2>/dev/null) b=$("$wpgen" sim "${args[@]}" --replicate-ends 2>/dev/null)
        python3 - "$s" "$H" "$S" "$G" "$a" "$b" <<'PY' || echo "$s H$H S$S G$G: sim failed"
import json, sys
s, H, S, G, a, b = sys.argv[1:]
a, b = json.loads(a), json.loads(b)
g = 2 ** 30
print("%-19s %-5s %-6s %-3s | %9.2f %9.2f %+6.1f%% | %9.0f %9.0f %+6.1f%% | %9.2f %9.2f | %9.2f %9.2f" % (
    s, H, S, G, a["step_time_s"], b["step_time_s"], 100 * (b["step_time_s"] / a["step_time_s"] - 1),
    a["tokens_per_s_per_device"], b["tokens_per_s_per_device"], 100 * (b["tokens_per_s_per_device"] / a["tokens_per_s_per_device"] - 1),
    a["peak_mem_bytes"] / g, b["peak_mem_bytes"] / g, a["bytes_inter_node"] / g, b["bytes_inter_node"] / g))
PY
    done
done
