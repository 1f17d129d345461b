#!/usr/bin/env bash
# `make bench-memory`: the memory plan against the measured peak, as a table. For each sequence
# length and mode (no recomputation; --recompute; with --mlp-tile 256; with --offload-activations
# too) one emitted CPU program (model "small" unless MODEL says, fsdp on one rank, one micro-batch)
# runs one step, and the line gives the plan's device peak and host memory, the CPU attention's
# work area the plan leaves out, the measured peak resident set (getrusage) and offload's host pool
# as the program reported it; then each figure's growth from the shortest length, planned (device
# + host + attention's work) against measured. On the CPU the host pool is the process's memory
# too: the resident set counts both (tests/e2e/memory_lib.sh says how each figure is taken;
# tests/e2e/test_memory_plan.sh holds two lengths of it to 15%). Never fails the build.
# usage: scripts/bench_memory.sh BUILD_DIR   (env: MODEL (default small), SEQS (default "512 1024 2048 4096"))
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/e2e/memory_lib.sh
model=${MODEL:-small}
seqs=(${SEQS:-512 1024 2048 4096})
MiB=1048576
echo "bench-memory: model $model, fsdp on 1 rank (topologies/cpu-1x1.json), 1 micro-batch, 1 step, 1 thread; MiB"
echo
echo "| mode | seq | plan device | plan host | attention's work | measured peak | host pool | growth planned | growth measured | off by |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for mode in none rc tile off; do
    case $mode in
        none) extra=() ;;
        rc) extra=(--recompute) ;;
        tile) extra=(--recompute --mlp-tile 256) ;;
        off) extra=(--recompute --mlp-tile 256 --offload-activations) ;;
    esac
    base_p="" base_r=""
    for s in "${seqs[@]}"; do
        if ! mem_case "$mode-$s" "$s" -m "$model" -s fsdp --micro-batch-size 1 --micro-batches 1 "${extra[@]}"; then
            echo "| $mode | $s | failed: $MEM_ERR |"; continue
        fi
        p=$((MEM_PLAN + MEM_HOST + MEM_ATTN))
        [ -z "$base_p" ] && base_p=$p base_r=$MEM_RSS
        awk -v m="$mode" -v s="$s" -v d="$MEM_PLAN" -v h="$MEM_HOST" -v a="$MEM_ATTN" -v r="$MEM_RSS" -v q="$MEM_POOL" \
            -v gp=$((p - base_p)) -v gr=$((MEM_RSS - base_r)) -v M=$MiB 'BEGIN {
            off = gp > 0 ? sprintf("%+.1f%%", 100 * (gr / gp - 1)) : "-"
            printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", m, s, d / M, h / M, a / M, r / M, q / M, gp / M, gr / M, off }'
    done
done
echo
echo "modes: none (no recomputation), rc (--recompute), tile (--recompute --mlp-tile 256), off (tile and --offload-activations)"
