#!/usr/bin/env bash
# Emitting again replaces only what wpgen can prove it wrote (generator/emit/manifest.c): a file
# listed in .wpgen-files with its content's hash, obj/ and train as the emitted Makefile builds
# them. Anything else in the way is refused by name (exit 2) and the directory is left exactly as
# it was; the user's other files are kept.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
emit=("$wpgen" emit -t topologies/cpu-2x2.json -m tiny -s weipipe-interleave)
snapshot() { (cd "$1" && find . -printf '%p %y %s\n' | sort && find . -type f -exec sha256sum {} + | sort); }

# refused REASON DIR: emit into DIR refused naming REASON, DIR unchanged
refused() {
    local needle=$1 d=$2
    snapshot "$d" >"$tmp/before"
    "${emit[@]}" -o "$d" >"$tmp/out" 2>&1
    local rc=$?
    snapshot "$d" >"$tmp/after"
    [ $rc = 2 ] && grep -q -- "$needle" "$tmp/out" && cmp -s "$tmp/before" "$tmp/after" && ok ||
        bad "emit into $d: exit $rc (want 2), $(head -2 "$tmp/out") (want: $needle)$(cmp -s "$tmp/before" "$tmp/after" || echo '; and it changed the directory')"
}

# a user's folders named train and obj, with their files inside
"${emit[@]}" -o "$tmp/a" >/dev/null || bad "emit a"
mkdir "$tmp/a/train" "$tmp/a/obj" && echo mine >"$tmp/a/train/notes.txt" && echo mine >"$tmp/a/obj/notes.txt"
refused "a/train is not the program the emitted Makefile builds (a directory)" "$tmp/a"
rm -rf "$tmp/a/train"
refused "a/obj/notes.txt is not an object the emitted Makefile builds" "$tmp/a"
rm -rf "$tmp/a/obj"
# a train that is not what make builds (a script of the user's)
printf '#!/bin/sh\necho mine\n' >"$tmp/a/train"
refused "a/train is not the program the emitted Makefile builds (not an executable)" "$tmp/a"
rm "$tmp/a/train"
# a name added to .wpgen-files by hand is not proof
echo mine >"$tmp/a/notes.txt"; echo notes.txt >>"$tmp/a/.wpgen-files"
refused "a/notes.txt was changed after wpgen wrote it (or listed in .wpgen-files by hand)" "$tmp/a"
sed -i '/^notes.txt$/d' "$tmp/a/.wpgen-files"
# an emitted file the user edited since
echo '/* my change */' >>"$tmp/a/rank_001.c"
refused "a/rank_001.c was changed after wpgen wrote it" "$tmp/a"
echo '# my change' >>"$tmp/a/runtime/backend/cpu.mk"; sed -i '$d' "$tmp/a/rank_001.c"
refused "a/runtime/backend/cpu.mk was changed after wpgen wrote it" "$tmp/a"
sed -i '$d' "$tmp/a/runtime/backend/cpu.mk"
# as wpgen wrote it, built by make: replaced, the user's notes kept, and what make built carried
# over (manifest_carry_build): the same emission again leaves nothing for make to do
make -s -j2 -C "$tmp/a" >/dev/null 2>&1 || bad "make"
"${emit[@]}" -o "$tmp/a" >"$tmp/out" 2>&1 && [ "$(cat "$tmp/a/notes.txt")" = mine ] && [ -x "$tmp/a/train" ] && [ -d "$tmp/a/obj" ] &&
    ok || bad "re-emit over a built emission: $(head -2 "$tmp/out"); $(ls "$tmp/a" | tr '\n' ' ')"
make -q -C "$tmp/a" >/dev/null 2>&1 && ok || bad "the same emission again: make has work to do: $(make -n -C "$tmp/a" 2>&1 | head -3)"
# another plan on the same backends: make compiles the ranks and the plan's tables, not the runtime
"${emit[@]}" --micro-batches 3 -o "$tmp/a" >/dev/null 2>&1 || bad "re-emit with 3 micro-batches"
make -n -C "$tmp/a" >"$tmp/out" 2>&1
grep -q "rank_000.c" "$tmp/out" && grep -q "plan_desc.c" "$tmp/out" && ! grep -q -- " -c runtime/" "$tmp/out" && ok ||
    bad "another plan: make would run $(grep -c -- ' -c ' "$tmp/out") compiles: $(grep -o 'runtime/[a-z_/]*\.c' "$tmp/out" | head -3 | tr '\n' ' ')"
make -s -j2 -C "$tmp/a" >/dev/null 2>&1 && grep -q '"micro_batches_per_rank": 3' "$tmp/a/plan.json" &&
    mpirun --oversubscribe $([ "$(id -u)" = 0 ] && echo --allow-run-as-root) -np 4 "$tmp/a/train" --synthetic --steps 1 --log "$tmp/a/log" >"$tmp/out" 2>&1 &&
    ok || bad "the rebuilt program does not run: $(tail -3 "$tmp/out")"
# fewer ranks: the objects of the ranks no longer emitted leave obj/ (or the next emit would refuse them)
"$wpgen" emit -t "$(printf '{"version":1,"name":"two","device_types":{"cpu":{"peak_tflops_fp32":0.05,"mem_gb":4,"hbm_GBps":10}},"nodes":[{"name":"n0","devices":2,"type":"cpu","intra":{"type":"SHM","bw_GBps":5,"lat_us":1}}]}' >"$tmp/two.json"; echo "$tmp/two.json")" \
    -m tiny -s weipipe-interleave -o "$tmp/a" >"$tmp/out" 2>&1 && [ -e "$tmp/a/obj/rank_001.o" ] && [ ! -e "$tmp/a/obj/rank_002.o" ] &&
    "${emit[@]}" -o "$tmp/a" >"$tmp/out" 2>&1 && ok || bad "fewer ranks: $(head -2 "$tmp/out"); $(ls "$tmp/a/obj" | tr '\n' ' ')"
rm "$tmp/a/log"
# a user's file among make's objects is refused, the objects and it kept
make -s -j2 -C "$tmp/a" >/dev/null 2>&1 || bad "make"
echo mine >"$tmp/a/obj/runtime/notes.o"
refused "a/obj/runtime/notes.o is not an object the emitted Makefile builds" "$tmp/a"
rm "$tmp/a/obj/runtime/notes.o"

# a folder of the user's with a copied plan.json (and no manifest) is not an emission's: its own
# Makefile and README are not replaced
mkdir "$tmp/b"; cp "$tmp/a/plan.json" "$tmp/b/"; echo 'all:; echo mine' >"$tmp/b/Makefile"; echo mine >"$tmp/b/README"
refused "b/Makefile was not written by wpgen" "$tmp/b"
rm "$tmp/b/Makefile"
refused "b/README was not written by wpgen" "$tmp/b"
# an emission of an earlier version (no manifest, its files with the generated header): replaced
"${emit[@]}" -o "$tmp/c" >/dev/null && rm -rf "$tmp/c/.wpgen-files" "$tmp/c/runtime" && echo mine >"$tmp/c/notes.txt"
"${emit[@]}" -o "$tmp/c" >"$tmp/out" 2>&1 && [ "$(cat "$tmp/c/notes.txt")" = mine ] && [ -f "$tmp/c/.wpgen-files" ] && ok ||
    bad "re-emit over an emission without a manifest: $(head -2 "$tmp/out")"

# what an emit killed by SIGKILL left (DIR.tmp-PID, DIR.old-PID of a process that is gone) goes
# with the next emit into DIR; a folder of that shape that is not an emission's stays
sleep 0 & gone=$!; wait $gone
cp -r "$tmp/c" "$tmp/d.tmp-$gone"; mkdir "$tmp/d.old-$gone"; mkdir "$tmp/d.tmp-$((gone + 1))" && echo mine >"$tmp/d.tmp-$((gone + 1))/notes.txt"
kill -0 $((gone + 1)) 2>/dev/null && rm -rf "$tmp/d.tmp-$((gone + 1))"   # (a live process of that number: not the case tested)
"${emit[@]}" -o "$tmp/d" >"$tmp/out" 2>&1 && [ ! -e "$tmp/d.tmp-$gone" ] && [ ! -e "$tmp/d.old-$gone" ] && grep -q "left by an emit that was killed" "$tmp/out" &&
    ok || bad "the leftovers of a killed emit stay: $(ls "$tmp" | tr '\n' ' ')"
[ ! -d "$tmp/d.tmp-$((gone + 1))" ] || [ "$(cat "$tmp/d.tmp-$((gone + 1))/notes.txt")" = mine ] && ok || bad "a user's folder named like a leftover was removed"

# -o a symbolic link to a folder: emitted into that folder, the link kept
mkdir "$tmp/real"; ln -s real "$tmp/link"
"${emit[@]}" -o "$tmp/link" >"$tmp/out" 2>&1 && [ -L "$tmp/link" ] && [ -f "$tmp/real/plan.json" ] && ok ||
    bad "emit -o a link to a folder: $(head -2 "$tmp/out"); $(ls -l "$tmp" | tr '\n' ' ')"
"${emit[@]}" -o "$tmp/link/" >"$tmp/out" 2>&1 && [ -L "$tmp/link" ] && ok || bad "emit again -o link/: $(head -2 "$tmp/out")"

# the CUDA backend's objects are built from .cu sources: make's, kept
"$wpgen" emit -t topologies/cpu-2x2.json -m tiny --backend cuda -o "$tmp/g" >/dev/null 2>&1 || bad "emit --backend cuda"
mkdir -p "$tmp/g/obj/runtime/cuda" && cp "$tmp/a/obj/main.o" "$tmp/g/obj/runtime/cuda/adamw_cuda.o"
"$wpgen" emit -t topologies/cpu-2x2.json -m tiny --backend cuda -o "$tmp/g" >"$tmp/out" 2>&1 && [ -f "$tmp/g/obj/runtime/cuda/adamw_cuda.o" ] &&
    ok || bad "re-emit over a CUDA build: $(head -2 "$tmp/out")"

# a backend's formats are checked when it is emitted, not when its program starts
"$wpgen" emit -t topologies/cpu-2x2.json -m tiny --backend cuda --precision fp32 -o "$tmp/f" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--backend cuda computes in bf16 only, and the plan is in fp32" "$tmp/out" && [ ! -e "$tmp/f" ] && ok ||
    bad "emit --backend cuda --precision fp32: exit $rc: $(head -2 "$tmp/out")"

echo "emit owned: $pass passed, $fail failed"
[ $fail = 0 ]
