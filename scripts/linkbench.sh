#!/usr/bin/env bash
# Builds and runs the link benchmark (scripts/linkbench.c) and writes its JSON, which
# `wpgen calibrate --links FILE` reads. Run it on the ranks training uses: -np as many as the
# devices, --hostfile the cluster's hosts (pairs on two hosts measure the network).
# usage: scripts/linkbench.sh OUT.json [-np N] [--hostfile FILE] [--max BYTES] [--repeats K]
set -eu
out=${1:?usage: scripts/linkbench.sh OUT.json [-np N] [--hostfile FILE] [--max BYTES] [--repeats K]}
shift
np=2; hostfile=(); max=16777216; reps=10
while [ $# -gt 0 ]; do
    case $1 in
        -np) np=$2; shift 2 ;;
        --hostfile) hostfile=(--hostfile "$2"); shift 2 ;;
        --max) max=$2; shift 2 ;;
        --repeats) reps=$2; shift 2 ;;
        *) echo "linkbench: unknown flag $1" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
bin=${BUILD:-build}/tools/linkbench
mkdir -p "$(dirname "$bin")"
[ "$bin" -nt scripts/linkbench.c ] || mpicc -O2 -std=c11 -Wall -Wextra scripts/linkbench.c -o "$bin"
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
"${mpirun[@]}" -np "$np" "${hostfile[@]}" "$bin" "$max" "$reps" >"$out.tmp"
mv "$out.tmp" "$out"
echo "linkbench: wrote $out ($np ranks)"
