#!/usr/bin/env bash
# Probes every dependency of wpgen, prints one line per dependency, and installs the missing
# Debian packages with apt-get (saying so). Exit 0 when the required ones are present afterwards.
# Writes build/config.mk with what was found (OpenBLAS's flags, CUDA yes/no), which the Makefile
# includes.
set -u
out=${1:-build/config.mk}
mkdir -p "$(dirname "$out")"

have_header() { [ -e "$1" ]; }
check() { eval "$1" >/dev/null 2>&1; }

# OpenBLAS's compile and link flags (BLAS_CFLAGS, BLAS_LIBS): pkg-config first, else the usual
# places of its cblas.h and library. Emitted programs probe the same way when they are built
# (templates/backend/cpu.mk).
blas_probe() {
    if pkg-config --exists openblas 2>/dev/null; then
        BLAS_CFLAGS=$(pkg-config --cflags openblas) BLAS_LIBS=$(pkg-config --libs openblas)
        return 0
    fi
    local h
    for h in /usr/include/*/openblas-pthread/cblas.h /usr/include/openblas/cblas.h /usr/include/*/cblas.h \
             /usr/include/cblas.h /usr/local/include/cblas.h; do
        [ -e "$h" ] || continue
        ls /usr/lib/*/libopenblas.so* /usr/lib64/libopenblas.so* /usr/lib/libopenblas.so* \
           /usr/local/lib/libopenblas.so* >/dev/null 2>&1 || return 1
        BLAS_CFLAGS="-I$(dirname "$h")" BLAS_LIBS=-lopenblas
        return 0
    done
    return 1
}

# name | test | debian packages
deps=(
  "Jansson|have_header /usr/include/jansson.h|libjansson-dev"
  "Lua 5.4|have_header /usr/include/lua5.4/lua.h && command -v lua5.4|liblua5.4-dev lua5.4"
  "Penlight|lua5.4 -e 'require(\"pl.template\")'|lua-penlight"
  "Open MPI|command -v mpicc && command -v mpirun|libopenmpi-dev openmpi-bin"
  "BLAS (OpenBLAS)|blas_probe|libopenblas-dev"
  "pkg-config|command -v pkg-config|pkg-config"
  "Python 3 (test scripts)|command -v python3|python3"
)

missing=()
for d in "${deps[@]}"; do
    IFS='|' read -r name test pkgs <<<"$d"
    check "$test" || missing+=("$pkgs")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing missing Debian packages with apt-get: ${missing[*]}"
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q >/dev/null 2>&1 || true
    $SUDO apt-get install -y -q ${missing[*]} >/dev/null 2>&1 || echo "deps: apt-get install failed"
fi

fail=0
for d in "${deps[@]}"; do
    IFS='|' read -r name test pkgs <<<"$d"
    if check "$test"; then echo "  ✓ $name"; else echo "  ✗ $name (Debian: $pkgs)"; fail=1; fi
done

cuda=no
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "  ✓ CUDA toolkit ($CUDA_HOME, $("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
    if ls "$CUDA_HOME"/lib64/libnccl.so* >/dev/null 2>&1 || ls /usr/lib/x86_64-linux-gnu/libnccl.so* >/dev/null 2>&1; then
        echo "  ✓ NCCL"; cuda=yes
    else
        echo "  ✗ NCCL (optional: the CUDA backend is not built)"
    fi
else
    echo "  ✗ CUDA toolkit (optional: building CPU-only)"
fi
# The Makefile builds the CUDA and NCCL backends when both are found (it probes again itself and
# says what it built in one line, "cuda: ...").
if [ "$cuda" = yes ]; then echo "deps: CUDA toolkit and NCCL found: the CUDA and NCCL backends are built too"; fi
BLAS_CFLAGS="" BLAS_LIBS=""
blas_probe
{
    echo "# written by scripts/deps.sh"
    echo "BLAS_CFLAGS := $BLAS_CFLAGS"
    echo "BLAS_LIBS := $BLAS_LIBS"
    echo "HAVE_CUDA := $cuda"
    echo "CUDA_HOME := $CUDA_HOME"
} > "$out.tmp" && mv "$out.tmp" "$out"
exit $fail
