#!/usr/bin/env bash
# make test-blas: the test suite under every OpenBLAS core type this machine can execute, and the
# spread of every figure the tests compare with a tolerance. OpenBLAS (Debian's is built with
# DYNAMIC_ARCH) picks its kernels, and so the order of its sums, by CPU: a tolerance that holds on
# one CPU's kernels must hold on all of them (issue 38). OPENBLAS_CORETYPE forces a kernel set;
# a core type this CPU cannot run (its instructions missing) or that this OpenBLAS does not know is
# skipped, saying so. Not in `make test`: it runs the suite once per core type.
# Logs: BUILD/test-blas/CORE/*.log; the spread: BUILD/test-blas/spread.txt, one line per figure
# (the log line with its numbers as #, then each number's smallest and largest value over the
# core types), for the figures in lines that say "relative", "error", "cosine", "off by" or
# "differ".
# usage: scripts/test_blas.sh BUILD_DIR [CORE ...]   (TESTS=pattern as in tests/run.sh)
set -u
build=${1:-build}; shift
cd "$(dirname "$0")/.."
cores=("$@")
[ ${#cores[@]} -gt 0 ] || cores=(Prescott Nehalem Sandybridge Haswell Zen SkylakeX Cooperlake)
out=$build/test-blas
rm -rf "$out"; mkdir -p "$out"
probe=$build/tests/test_bf16   # a short program that runs sgemm
ran=(); status=0
for ct in "${cores[@]}"; do
    exec 3>&2 2>/dev/null   # bash's own "Illegal instruction" line, where the kernels crash
    OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=$ct "$probe" >"$out/probe" 2>&1; rc=$?
    exec 2>&3 3>&-
    if [ $rc != 0 ]; then
        echo "test-blas: $ct: skipped (its kernels do not run on this CPU)"; continue
    fi
    got=$(sed -n 's/^Core: //p' "$out/probe" | tail -1)
    if [ "$got" != "$ct" ]; then
        echo "test-blas: $ct: skipped (this OpenBLAS runs $got when asked for it)"; continue
    fi
    echo "test-blas: the suite under OPENBLAS_CORETYPE=$ct"
    if ! OPENBLAS_CORETYPE=$ct bash tests/run.sh "$build" >"$out/$ct.out" 2>&1; then status=1; fi
    tail -n 1 "$out/$ct.out" | sed "s/^/test-blas: $ct: /"
    grep -E '^  FAIL' "$out/$ct.out" | sed "s/^/test-blas: $ct: /"
    mkdir -p "$out/$ct" && cp "$build"/test-logs/*.log "$out/$ct/"
    ran+=("$ct")
done
rm -f "$out/probe"
[ ${#ran[@]} -gt 0 ] || { echo "test-blas: no core type ran"; exit 1; }
python3 - "$out" "${ran[@]}" >"$out/spread.txt" <<'PY'
import glob, os, re, sys
out, cores = sys.argv[1], sys.argv[2:]
num = re.compile(r'(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])')
words = re.compile(r'relative|error|cosine|off by|differ')
spread = {}   # (log, key) -> list of per-core lists of numbers
for ct in cores:
    for log in sorted(glob.glob(os.path.join(out, ct, '*.log'))):
        for line in open(log, errors='replace'):
            line = line.strip()
            if not words.search(line): continue
            nums = num.findall(line)
            if not nums: continue
            key = (os.path.basename(log), re.sub(r'\d+', '#', num.sub('#', line)))
            spread.setdefault(key, []).append([float(x) for x in nums])
print(f"# the spread of each tolerance-bound figure over OPENBLAS_CORETYPE in {' '.join(cores)}")
print("# log: line (numbers as #): each number's smallest..largest over the core types")
for (log, key), rows in sorted(spread.items()):
    cols = zip(*[r for r in rows if len(r) == len(rows[0])])
    ranges = ['%g' % min(c) if min(c) == max(c) else '%g..%g' % (min(c), max(c)) for c in cols]
    if all('..' not in r for r in ranges): continue   # the same on every core type
    print(f"{log}: {key}\n    {'  '.join(ranges)}")
PY
echo "test-blas: $(grep -c '^    ' "$out/spread.txt") figures differ across ${ran[*]}: $out/spread.txt"
exit $status
