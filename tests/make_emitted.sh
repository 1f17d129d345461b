#!/usr/bin/env bash
# make -s -j2 -C DIR for an emitted folder, in the tests: the runtime's objects come from a cache
# when an earlier test built the same runtime with the same Makefile, so each test compiles only
# its ranks and plan tables (about 0.3 s, where the runtime's 50 files take 5 s on 2 cores).
#   bash tests/make_emitted.sh DIR [MAKE ARGS...]
# The Makefile names no plan and the runtime's files are the same for every plan on the same
# backends (templates/Makefile.tpl), so the cache key is their content and the compilers' versions:
# another backend, flag, runtime change or compiler is another key, and is compiled. The cache is
# $WPGEN_TEST_OBJCACHE (tests/run.sh sets it to BUILD/test-objcache); unset, this is plain make.
set -u
d=$1; shift
cache=${WPGEN_TEST_OBJCACHE:-}
if [ -z "$cache" ] || [ ! -f "$d/Makefile" ] || [ -e "$d/obj/runtime" ]; then
    exec make -s -j2 -C "$d" "$@"
fi
key=$( { cat "$d/Makefile"; for c in cc mpicc nvcc; do "$c" --version 2>/dev/null | head -1; done; printf '%s\n' "$@";
         (cd "$d" && find runtime -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); } | sha256sum | cut -c1-16)
if [ -d "$cache/$key/runtime" ]; then
    # copied now, so newer than the sources emit just wrote: make takes them as built
    mkdir -p "$d/obj" && cp -R "$cache/$key/runtime" "$d/obj/runtime"
fi
make -s -j2 -C "$d" "$@" || exit
if [ ! -d "$cache/$key" ] && [ -d "$d/obj/runtime" ]; then
    mkdir -p "$cache" && t=$(mktemp -d "$cache/.new-XXXXXX") && cp -R "$d/obj/runtime" "$t/runtime" &&
        { mv -T "$t" "$cache/$key" 2>/dev/null || rm -rf "$t"; }
fi
exit 0
