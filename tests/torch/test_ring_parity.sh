#!/usr/bin/env bash
# PyTorch parity of ring attention (context parallelism's attention, runtime/cpu/attention_block.c):
# tests/torch/ring_dump.c runs the ring in one process (tests/ring_fixture.h) and two blocks alone;
# tests/torch/ring_parity.py redoes them with full causal attention in PyTorch and compares (the
# tolerances are stated there). GQA, MHA and multi-query; C = 2 and 4; chunks inside one tile and
# across two. Uses /usr/bin/python3's PyTorch, installed by scripts/test_deps.sh, as test_torch_parity.sh.
# usage: tests/torch/test_ring_parity.sh BUILD_DIR
set -eu
build=${1:-build}
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the tree
$py -c 'import torch, numpy' 2>/dev/null ||
    { echo "test_ring_parity: PyTorch missing for $py (make test installs it first: scripts/test_deps.sh)"; exit 1; }
[ -f "$build/libwprt.a" ] || { echo "test_ring_parity: $build/libwprt.a missing (run make)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gcc -O2 -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -fopenmp -Iruntime -Itests \
    tests/torch/ring_dump.c "$build/libwprt.a" -lopenblas -ljansson -lm -o "$tmp/ring_dump"
status=0
#        C   S    heads kv hd
for case in "2 160 4 2 16" "4 192 4 4 8" "2 280 6 1 16"; do
    "$tmp/ring_dump" "$tmp/ring.safetensors" $case
    (cd tests/torch && $py ring_parity.py "$tmp/ring.safetensors") || status=1
done
exit $status
