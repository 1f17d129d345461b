#!/usr/bin/env bash
# What the test suite needs beyond the build (scripts/deps.sh), installed once before any test
# runs (`make test` calls this first), so that no test installs anything for another and the
# order of the tests does not matter:
# - Debian's python3-torch and python3-numpy (tests/torch, tests/export), through apt-get;
# - transformers 4.44.2, the last that runs on Debian's torch 1.13, in a venv at BUILD/pyexport
#   over the system's site packages (tests/export);
# - Hugging Face tokenizers, where `wpgen data` looks for it (scripts/tokenize_data.py: installed,
#   or in wpgen's cache), for tests/e2e/test_data.sh;
# - strace (tests/cli/test_emit_durable.sh);
# - a TensorBoard writer, where logs_to_tensorboard.py looks for one (tests/ref/test_tensorboard.sh).
# Each is probed first and installed only when missing, saying so. Exit 1, naming what failed,
# when one cannot be installed: the suite would otherwise fail later, further from the cause.
# usage: scripts/test_deps.sh BUILD_DIR
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 DEBIAN_FRONTEND=noninteractive
py=/usr/bin/python3   # Debian's, whose site packages hold python3-torch (not a python3 earlier on PATH)
fail=0
if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi

if ! $py -c 'import torch, numpy' 2>/dev/null; then
    echo "test deps: installing python3-torch python3-numpy with apt-get (PyTorch, for tests/torch and tests/export)"
    $sudo apt-get install -y -q python3-torch python3-numpy >/dev/null 2>&1 ||
        { $sudo apt-get update -q >/dev/null 2>&1; $sudo apt-get install -y -q python3-torch python3-numpy >/dev/null 2>&1; }
    $py -c 'import torch, numpy' 2>/dev/null || { echo "test deps: PyTorch is still missing for $py (apt-get install python3-torch python3-numpy)"; fail=1; }
fi
if [ $fail = 0 ] && ! "$build/pyexport/bin/python" -c 'import torch, transformers' 2>/dev/null; then
    echo "test deps: installing transformers 4.44.2 into $build/pyexport (tests/export)"
    rm -rf "$build/pyexport"
    $py -m venv --system-site-packages "$build/pyexport" &&
        "$build/pyexport/bin/pip" install -q --disable-pip-version-check "transformers==4.44.2" >/dev/null 2>&1 &&
        "$build/pyexport/bin/python" -c 'import torch, transformers' 2>/dev/null ||
        { echo "test deps: could not install transformers 4.44.2 into $build/pyexport"; fail=1; }
fi
# strace, with which tests/cli/test_emit_durable.sh sees emit's fsyncs
if ! command -v strace >/dev/null; then
    echo "test deps: installing strace with apt-get (tests/cli/test_emit_durable.sh)"
    $sudo apt-get install -y -q strace >/dev/null 2>&1 || { $sudo apt-get update -q >/dev/null 2>&1; $sudo apt-get install -y -q strace >/dev/null 2>&1; }
    command -v strace >/dev/null || { echo "test deps: strace is still missing (apt-get install strace)"; fail=1; }
fi
# the tokenizers package: wpgen data's own lookup, which installs it into its cache when missing
if ! PYTHONPATH="$PWD/scripts" python3 -c 'import tokenize_data; tokenize_data.import_tokenizers()' >/dev/null 2>"$build/test-deps.err"; then
    echo "test deps: the tokenizers package could not be installed: $(tail -1 "$build/test-deps.err")"; fail=1
fi
# a TensorBoard writer (torch.utils.tensorboard, else tensorboardX in wpgen's cache), by
# logs_to_tensorboard.py's own lookup, for tests/ref/test_tensorboard.sh
if ! PYTHONPATH="$PWD/scripts" python3 -c 'import logs_to_tensorboard as t; t.summary_writer()' >/dev/null 2>"$build/test-deps.err"; then
    echo "test deps: no TensorBoard writer could be installed: $(tail -1 "$build/test-deps.err")"; fail=1
fi
rm -f "$build/test-deps.err"
[ $fail = 0 ] && echo "test deps: PyTorch $($py -c 'import torch; print(torch.__version__)'), transformers in $build/pyexport, tokenizers, a TensorBoard writer"
exit $fail
