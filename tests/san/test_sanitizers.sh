#!/usr/bin/env bash
# The code under AddressSanitizer and UndefinedBehaviorSanitizer: builds everything again in
# BUILD-san (build-san for build) with gcc -fsanitize=address,undefined, -fno-sanitize-recover=all
# (any finding ends the program with an error), then runs every unit test there, a few steps of
# the reference trainer, wpgen's plan, sim and emit, and an emitted program under mpirun. The
# objects stay in BUILD-san, so a second run rebuilds only what changed.
#
# Leaks: on for everything but the MPI program, whose Open MPI allocates for the life of the
# process and frees nothing at exit (ASAN_OPTIONS=detect_leaks=0 there).
# SAN_UNIT=pattern runs only the unit tests whose name contains it.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
san=${build%/}-san
. tests/check.sh
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=abort_on_error=0:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1
sanflags='-fsanitize=address,undefined -fno-sanitize-recover=all'

# The Makefile's own flags (-std=c11 -D_GNU_SOURCE, warnings) are added to these CFLAGS; the
# outer make's job server is not this one's.
t0=$SECONDS
units=$(for f in tests/unit/test_*.c; do echo "$san/tests/$(basename "$f" .c)"; done)
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL CFLAGS='-O1 -g' \
        make -j2 BUILD="$san" CC="gcc $sanflags" CUDA=no all $units >"$tmp/make.log" 2>&1; then
    tail -20 "$tmp/make.log"
    echo "sanitizers: the build in $san failed"
    exit 1
fi
echo "built $san in $((SECONDS - t0)) s"

# run NAME COMMAND...: passes when the command exits 0 and no sanitizer said anything
run() {
    local name=$1; shift
    local t=$SECONDS
    if "$@" >"$tmp/out" 2>&1 && ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$tmp/out"; then
        ok; echo "ok    $name ($((SECONDS - t)) s)"
    else
        bad "$name under the sanitizers:"; grep -E -A12 'ERROR: |runtime error:' "$tmp/out" | head -30
        grep -qE 'ERROR: |runtime error:' "$tmp/out" || tail -10 "$tmp/out"
    fi
}

for t in $units; do
    n=$(basename "$t")
    [ -n "${SAN_UNIT:-}" ] && [[ "$n" != *"$SAN_UNIT"* ]] && continue
    run "$n" "$t"
done

run "wp-ref 3 steps" "$san/wp-ref" -m tiny --synthetic --steps 3
run "wpgen plan" "$san/wpgen" plan -t topologies/cpu-uneven.json -m tests/data/tiny8/config.json -s tawpipe --micro-batches 3
run "wpgen sim" "$san/wpgen" sim -t topologies/cpu-4x2.json -m tiny -s fsdp --replicas 2 --trace "$tmp/t.json" --svg "$tmp/t.svg"
run "wpgen compare" "$san/wpgen" compare -t topologies/cpu-2x2.json -m tiny
# -s auto hands its winner's plan to plan and emit (its simulation once leaked there)
run "wpgen plan -s auto" "$san/wpgen" plan -t topologies/cpu-2x2.json -m tiny -s auto
run "wpgen emit" "$san/wpgen" emit -t topologies/cpu-2x2.json -m tiny -s weipipe-interleave --micro-batches 2 -o "$tmp/e"
# ... and emitting again over it (the user's file kept)
echo mine >"$tmp/e/notes.txt"
run "wpgen emit again" "$san/wpgen" emit -t topologies/cpu-2x2.json -m tiny -s weipipe-interleave --micro-batches 2 -o "$tmp/e"

# The emitted program, sanitized too, for two steps on 4 ranks.
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
if [ -f "$tmp/e/Makefile" ] && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j2 -C "$tmp/e" \
        OPT="-O1 -g $sanflags" RANKOPT="-O0 $sanflags" >"$tmp/emake.log" 2>&1; then
    ASAN_OPTIONS=detect_leaks=0 run "emitted train, 4 ranks" "${mpirun[@]}" -np 4 "$tmp/e/train" --synthetic --steps 2
else
    bad "the emitted program did not build with the sanitizers: $(tail -5 "$tmp/emake.log" 2>/dev/null)"
fi

echo "sanitizers: $pass passed, $fail failed ($((SECONDS - t0)) s)"
[ "$fail" -eq 0 ]
