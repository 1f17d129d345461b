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

# cuDNN's fused attention (runtime/cuda/attention_cudnn.cu), optional: the cudnn-frontend headers
# (header-only, Apache-2.0; the include/ of the PyPI wheel nvidia-cudnn-frontend, pinned), kept in
# ~/.cache/wpgen (the emitted programs' Makefiles look there too) and copied into build/deps; and
# cudnn.h from the toolkit, /usr/include or the nvidia-cudnn wheel PyTorch uses, whose lib/ is
# also where the program looks for libcudnn.so.9 at run time besides the loader's own search.
CUDNN_FE_VERSION=1.23.0
CUDNN_FE_INC="" CUDNN_INC="" CUDNN_LIBDIR=""
if [ "$cuda" = yes ]; then
    fe_cache=${XDG_CACHE_HOME:-$HOME/.cache}/wpgen/cudnn-frontend-$CUDNN_FE_VERSION
    fe_here=$(dirname "$out")/deps/cudnn-frontend-$CUDNN_FE_VERSION
    # a machine without the network (a GPU node) may have the copy in build/deps alone
    [ -f "$fe_cache/include/cudnn_frontend.h" ] || [ ! -f "$fe_here/include/cudnn_frontend.h" ] || fe_cache=$fe_here
    if [ ! -f "$fe_cache/include/cudnn_frontend.h" ] && command -v python3 >/dev/null 2>&1; then
        echo "deps: fetching the cudnn-frontend $CUDNN_FE_VERSION headers from PyPI into $fe_cache"
        fe_tmp=$(mktemp -d)
        if timeout 300 python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
               --platform manylinux_2_28_x86_64 -d "$fe_tmp" "nvidia-cudnn-frontend==$CUDNN_FE_VERSION" >/dev/null 2>&1 &&
           mkdir -p "$fe_tmp/x" && (cd "$fe_tmp/x" && python3 -m zipfile -e "$fe_tmp"/*.whl . >/dev/null 2>&1) &&
           [ -f "$fe_tmp/x/include/cudnn_frontend.h" ]; then
            mkdir -p "$(dirname "$fe_cache")" && rm -rf "$fe_cache.tmp" && mkdir "$fe_cache.tmp" &&
                cp -r "$fe_tmp/x/include" "$fe_cache.tmp/" && rm -rf "$fe_cache" && mv "$fe_cache.tmp" "$fe_cache"
        fi
        rm -rf "$fe_tmp"
    fi
    wheel=$(python3 -c 'import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null || true)
    for d in "$CUDA_HOME/include" /usr/include /usr/include/x86_64-linux-gnu ${wheel:+"$wheel/include"}; do
        [ -f "$d/cudnn.h" ] && { CUDNN_INC=$d; break; }
    done
    [ -n "$wheel" ] && [ -e "$wheel/lib/libcudnn.so.9" ] && CUDNN_LIBDIR=$wheel/lib
    if [ -f "$fe_cache/include/cudnn_frontend.h" ] && [ -n "$CUDNN_INC" ]; then
        [ -f "$fe_here/include/cudnn_frontend.h" ] || { mkdir -p "$fe_here" && cp -r "$fe_cache/include" "$fe_here/"; }
        CUDNN_FE_INC=$(cd "$fe_here/include" && pwd)
        echo "  ✓ cuDNN fused attention: cudnn-frontend $CUDNN_FE_VERSION, cudnn.h in $CUDNN_INC, libcudnn.so.9 loaded at run time${CUDNN_LIBDIR:+ (also from $CUDNN_LIBDIR)}"
    else
        echo "  ✗ cuDNN fused attention (optional: ${CUDNN_INC:+no cudnn-frontend headers}${CUDNN_INC:-no cudnn.h}; the CUDA backend uses its own attention kernels)"
    fi
fi
BLAS_CFLAGS="" BLAS_LIBS=""
blas_probe
{
    echo "# written by scripts/deps.sh"
    echo "BLAS_CFLAGS := $BLAS_CFLAGS"
    echo "BLAS_LIBS := $BLAS_LIBS"
    echo "HAVE_CUDA := $cuda"
    echo "CUDA_HOME := $CUDA_HOME"
    echo "CUDNN_FE_INC := $CUDNN_FE_INC"
    echo "CUDNN_INC := $CUDNN_INC"
    echo "CUDNN_LIBDIR := $CUDNN_LIBDIR"
} > "$out.tmp" && mv "$out.tmp" "$out"
exit $fail
