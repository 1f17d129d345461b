#!/usr/bin/env bash
# PyTorch parity of the CPU model: tests/torch/dump.c runs the C model and writes weights, batch,
# loss, log-sum-exp of the logits and gradients; tests/torch/parity.py redoes it in PyTorch and compares (the
# tolerances are stated there). Uses Debian's python3-torch through /usr/bin/python3 (not a
# python3 earlier on PATH), installing it when missing.
# usage: tests/torch/test_torch_parity.sh BUILD_DIR
set -eu
build=${1:-build}
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the tree
if ! $py -c 'import torch, numpy' 2>/dev/null; then
    echo "test_torch_parity: PyTorch missing for $py; installing python3-torch python3-numpy with apt-get"
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -q python3-torch python3-numpy >/dev/null 2>&1 ||
        { $sudo apt-get update -q >/dev/null 2>&1 || true; $sudo apt-get install -y -q python3-torch python3-numpy >/dev/null; }
    $py -c 'import torch, numpy' || { echo "test_torch_parity: PyTorch still missing"; exit 1; }
fi
[ -f "$build/libwprt.a" ] || { echo "test_torch_parity: $build/libwprt.a missing (run make)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gcc -O2 -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -fopenmp -Iruntime \
    tests/torch/dump.c "$build/libwprt.a" -lopenblas -ljansson -lm -o "$tmp/dump"
status=0
for variant in untied tied llama3 head_dim; do
    "$tmp/dump" "$tmp/$variant.safetensors" $variant
    (cd tests/torch && $py parity.py "$tmp/$variant.safetensors") || status=1
done
[ $status = 0 ] && echo "torch parity: loss, log-sum-exp and every gradient match (untied GQA, tied MQA, Llama 3.1 RoPE scaling, explicit head_dim)"
exit $status
