#!/usr/bin/env bash
# make demo: plan a 2-node x 2-rank CPU cluster, show the plan, emit it, compile it, train a tiny
# byte-level model on a text every Debian system has, save a checkpoint, and say where to look.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
out=out/demo
topo=topologies/cpu-2x2.json
text=/usr/share/common-licenses/GPL-3
strategy=${STRATEGY:-weipipe-interleave}
steps=${STEPS:-400}
mpirun=(mpirun --oversubscribe -np 4)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)

echo "== 1. plan: $strategy on $topo, model tiny (H=64, 4 layers, byte-level)"
"$build/wpgen" plan -t "$topo" -m tiny -s "$strategy" --micro-batches 2
echo
echo "== 2. emit and compile"
mkdir -p "$(dirname "$out")"
"$build/wpgen" emit -t "$topo" -m tiny -s "$strategy" --micro-batches 2 -o "$out"
make -s -C "$out" >/dev/null
echo "built $out/train"
echo
echo "== 3. train on $text for $steps steps, 4 MPI ranks"
mkdir -p "$out/ckpt"
"${mpirun[@]}" "$out/train" --data "$text" --steps "$steps" --lr 3e-3 --warmup 10 \
    --save "$out/ckpt/checkpoint.json" --log "$out/train.log" --trace "$out/trace.json" |
    awk '/^step/ { n++; if (n <= 3 || n % 40 == 0) print; next } { print }'
echo
echo "== where to look"
echo "  $out/rank_001.c        the unrolled step of rank 1, one commented call per operation"
echo "  $out/schedule.txt      every rank's turns, one line each"
echo "  $out/trace.json        what really happened: open in https://ui.perfetto.dev"
echo "  $out/ckpt/             the trained model: checkpoint.json (manifest), one safetensors shard per rank (Hugging Face names), config.json"
echo "  $out/train.log         loss per step (JSON lines)"
echo "  $out/job.sbatch        the same plan as a Slurm batch script (docs/cluster.md)"
echo "for transformers: $build/wpgen export $out/ckpt -o $out/hf"
