#!/usr/bin/env bash
# The emitted job.sbatch against hostile names and settings, run with bash under stand-ins for
# srun, scontrol, sinfo, mpirun, make and nproc (a folder put first on PATH), so no Slurm, build
# or rank runs: the stand-in mpirun records its arguments and exits with the next status of
# $FAKE_RCS. Checked: a strategy file whose name holds a newline and a command gives a job name of
# [A-Za-z0-9._-] and runs nothing (no PWNED); every #SBATCH line is one option with a safe value,
# all before the first command; emit's folder and wpgen's path, with quotes, newlines and $(...),
# read back exactly; each bad WPGEN_* value exits 2 at once, naming the variable and what it
# takes, before anything is launched; a loss before the first checkpoint says that no checkpoint
# was saved (not "step  of"); a rankfile binding more ranks to a host than it has CPUs is refused
# before mpirun, which would exit 1 without a word; bash -n and (where installed) shellcheck pass
# on the script. A few seconds.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
root=$PWD

# ---- the plans: a plain one, and one of a strategy whose file name holds a command ----
"$wpgen" emit -t topologies/cpu-2x2.json -m tiny -s weipipe-interleave -o "$tmp/a" >"$tmp/out" 2>&1 || bad "emit a: $(tail -2 "$tmp/out")"
evil=$tmp/$'x\ntouch PWNED\n.lua'
cp schedules/weipipe-interleave.lua "$evil"
mkdir "$tmp/run"
(cd "$tmp/run" && "$root/$wpgen" emit -t "$root/topologies/cpu-2x2.json" -m tiny -s "$evil" -o "$tmp/h") >"$tmp/out" 2>&1 ||
    bad "emit of the strategy file with a newline: $(tail -2 "$tmp/out")"

# ---- stand-ins ----
mkdir "$tmp/bin"
cat >"$tmp/bin/mpirun" <<'EOF'
#!/bin/bash
# the stand-in: its arguments appended to $FAKE_LOG, then the next status of $FAKE_RCS (else 0)
echo "mpirun $*" >>"$FAKE_LOG"
n=$(grep -c '^mpirun' "$FAKE_LOG")
set -- ${FAKE_RCS:-0}
exit "${!n:-0}"
EOF
cat >"$tmp/bin/scontrol" <<'EOF'
#!/bin/bash
# show hostnames A,B: one per line; anything else: nothing
[ "$1 $2" = "show hostnames" ] && tr , '\n' <<<"$3"
exit 0
EOF
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/make"     # ./train is never run: nothing to build
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/srun"     # --mpi=list names no pmix: mpirun launches
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/sinfo"    # no node down
# nproc as GNU's reads OMP_NUM_THREADS (which the script's runs set to 1, as the tests' do)
printf '#!/bin/sh\necho "${OMP_NUM_THREADS:-${FAKE_NPROC:-8}}"\n' >"$tmp/bin/nproc"
chmod +x "$tmp/bin"/*

# job DIR [VAR=VALUE...]: runs DIR/job.sbatch from $tmp/run outside Slurm on the nodes
# "localhost 127.0.0.1" (settings after DIR replace these), its output in $tmp/job.out, its status
# in rc. timeout 60: each run ends in well under a second (no build, no ranks); the margin is for a
# loaded 2-core machine, while a script that loops (WPGEN_DOWN_WAIT=60s before the fix) ends there.
job() {
    local d=$1; shift
    rm -f "$tmp/mpirun.log"
    (cd "$tmp/run" && env PATH="$tmp/bin:$PATH" FAKE_LOG="$tmp/mpirun.log" OMP_NUM_THREADS=1 WPGEN_LAUNCH=mpirun \
        WPGEN_NODES="localhost 127.0.0.1" "$@" timeout 60 bash "$d/job.sbatch" --steps 1) >"$tmp/job.out" 2>&1
    rc=$?
}
launched() { [ -s "$tmp/mpirun.log" ]; }

# ---- H6: names in the script ----
job "$tmp/h"
[ $rc = 0 ] && launched && ok || bad "the plan of the strategy with a newline did not run: exit $rc: $(tail -2 "$tmp/job.out")"
[ -z "$(find "$tmp" -name PWNED)" ] && ok || bad "a command in the strategy's file name ran (PWNED made)"
grep -qx "#SBATCH --job-name=wpgen-x_touch_PWNED_" "$tmp/h/job.sbatch" && ok ||
    bad "the job name is not sanitized: $(grep -A1 -- --job-name "$tmp/h/job.sbatch")"
for d in "$tmp/a" "$tmp/h"; do
    # sbatch reads #SBATCH lines up to the first command: each one option with a safe value
    awk '/^#SBATCH/ { if (!/^#SBATCH --[a-z-]+(=[A-Za-z0-9._:@%-]+)?$/ || cmd) bad = 1; n++ }
         !/^#/ && !/^$/ { cmd = 1 } END { exit bad || n < 5 }' "$d/job.sbatch" && ok ||
        bad "$d/job.sbatch: an #SBATCH line that is not one safe option, or one after a command"
done
grep -qx "#SBATCH --job-name=wpgen-weipipe-interleave" "$tmp/a/job.sbatch" && ok || bad "a plain strategy's job name changed"
# a folder and a wpgen whose paths hold a quote, a newline and $(...): read back exactly
odd=$tmp/$'it\'s\n$(touch PWNED2)'
mkdir -p "$odd" && cp "$wpgen" "$odd/wpgen"
(cd "$odd" && WPGEN_HOME=$root ./wpgen emit -t "$root/topologies/cpu-2x2.json" -m tiny -s weipipe-interleave -o out) >"$tmp/out" 2>&1 || bad "emit from $odd: $(tail -2 "$tmp/out")"
# the script's head (up to its body's `set -u`) run in a shell that prints what it set
got=$(sed '/^set -u$/q' "$odd/out/job.sbatch" | bash -c 'source /dev/stdin; printf "%s|%s" "$emit_cwd" "$wpgen"')
[ "$got" = "$odd|$odd/wpgen" ] && [ -z "$(find "$tmp" -name PWNED2)" ] && ok || bad "emit_cwd and wpgen do not read back as the paths: '$got'"

# ---- H7 and the rest: every WPGEN_* setting checked at the start ----
touch "$tmp/not-exec"
mkdir "$tmp/folder"
# refused 'MESSAGE' VAR=VALUE...: exit 2 at once, MESSAGE said, nothing launched. The Slurm
# job variables make the loss path the one that looped (Slurm's node state asked until
# WPGEN_DOWN_WAIT); FAKE_RCS=1 makes a launch fail, were there one
refused() {
    local want=$1; shift
    job "$tmp/a" SLURM_JOB_ID=7 WPGEN_DIR="$tmp/a" FAKE_RCS=1 "$@"
    [ $rc = 2 ] && grep -qF -- "$want" "$tmp/job.out" && ! launched && ok ||
        bad "$*: exit $rc$(launched && echo ', launched'), want 2 and '$want': $(tail -2 "$tmp/job.out")"
}
for v in 60s abc 1e3 -1 1000000000000 86401; do
    refused "WPGEN_DOWN_WAIT=$v: expected a whole number in [0, 86400]" WPGEN_DOWN_WAIT=$v
done
refused "WPGEN_SAVE_EVERY=0: expected a whole number in [1, 2147483647]" WPGEN_SAVE_EVERY=0
refused "WPGEN_SAVE_EVERY=5x: expected a whole number in [1, 2147483647]" WPGEN_SAVE_EVERY=5x
refused "WPGEN_MAX_REPLANS=two: expected a whole number in [0, 1000]" WPGEN_MAX_REPLANS=two
refused "WPGEN_MAX_REPLANS=1001: expected a whole number in [0, 1000]" WPGEN_MAX_REPLANS=1001
refused "WPGEN_PROBE=yes: expected 0 (run the plan as emitted) or 1" WPGEN_PROBE=yes
refused "WPGEN_LAUNCH=ssh: expected srun or mpirun" WPGEN_LAUNCH=ssh
refused "WPGEN_NODES=localhost *: expected host names separated by spaces" WPGEN_NODES="localhost *"
refused "WPGEN_NODES=\$'a\\nb;c': expected host names" WPGEN_NODES=$'a\nb;c'
refused "WPGEN_NODES=-x y: expected host names" WPGEN_NODES="-x y"
refused "WPGEN_NODES=   : expected host names" WPGEN_NODES="   "
refused "WPGEN_MPIRUN_FLAGS=--foo: expected nothing with WPGEN_LAUNCH=srun" WPGEN_LAUNCH=srun WPGEN_MPIRUN_FLAGS=--foo
refused "WPGEN_DOWN_CMD=echo (: expected a bash command" WPGEN_DOWN_CMD="echo ("
refused "WPGEN_BIN=$tmp/none: expected an executable file" WPGEN_BIN="$tmp/none"
refused "WPGEN_BIN=$tmp/not-exec: expected an executable file" WPGEN_BIN="$tmp/not-exec"
refused "WPGEN_BIN=$tmp/folder: expected an executable file" WPGEN_BIN="$tmp/folder"
refused "WPGEN_BIN=no-such-wpgen: expected an executable file" WPGEN_BIN=no-such-wpgen
refused "WPGEN_CHECKPOINT=$tmp/folder: expected a file's path" WPGEN_CHECKPOINT="$tmp/folder"
refused "WPGEN_CHECKPOINT=$tmp/not-exec/c.json: expected a path whose folder can be made" WPGEN_CHECKPOINT="$tmp/not-exec/c.json"
refused "WPGEN_LOG=$tmp/folder/: expected a file's path" WPGEN_LOG="$tmp/folder/"
refused "WPGEN_DIR=$tmp/folder: expected the emitted directory" WPGEN_DIR="$tmp/folder"
# good values run: a wpgen named on PATH, leading zeros, flags for mpirun
job "$tmp/a" WPGEN_BIN=wpgen PATH="$root/$build:$tmp/bin:$PATH" WPGEN_DOWN_WAIT=007 WPGEN_SAVE_EVERY=3 WPGEN_MPIRUN_FLAGS="--mca btl self,tcp"
[ $rc = 0 ] && grep -q -- "--rankfile [^ ]* --mca btl self,tcp .*/train --save .* --save-every 3 " "$tmp/mpirun.log" && ok ||
    bad "good settings: exit $rc: $(tail -2 "$tmp/job.out") $(cat "$tmp/mpirun.log" 2>/dev/null)"

# a relative WPGEN_BIN still re-plans: the re-plan runs from where emit ran
ln -s "$root/$build/wpgen" "$tmp/run/my-wpgen"
job "$tmp/a" WPGEN_BIN=./my-wpgen WPGEN_DOWN_CMD="echo 127.0.0.1" FAKE_RCS="137 0" WPGEN_CHECKPOINT="$tmp/ck0/c.json"
[ $rc = 0 ] && grep -q "re-plan 1 of 2: $tmp/a.replan-1" "$tmp/job.out" && ok || bad "WPGEN_BIN=./my-wpgen: exit $rc: $(tail -2 "$tmp/job.out")"
rm -rf "$tmp/a.replan-1"*

# ---- a loss before the first checkpoint: said as such ----
ck=$tmp/ck/checkpoint.json
job "$tmp/a" WPGEN_CHECKPOINT="$ck" WPGEN_DOWN_CMD=true FAKE_RCS="3 0"
[ $rc = 0 ] && grep -q "no node is down: attempt 1 of 2: .*, starting from step 0 (no checkpoint was saved: $ck is not there)" "$tmp/job.out" &&
    ! grep -q "step  of\|of step ," "$tmp/job.out" && ok || bad "a rank lost before any save, no node down: exit $rc: $(grep '^job.sbatch' "$tmp/job.out" | tail -2)"
job "$tmp/a" WPGEN_CHECKPOINT="$ck" WPGEN_DOWN_CMD="echo 127.0.0.1" WPGEN_MAX_REPLANS=0 FAKE_RCS=137
[ $rc = 3 ] && grep -q "WPGEN_MAX_REPLANS=0: stopping; no checkpoint was saved ($ck is not there)" "$tmp/job.out" && ok ||
    bad "a loss before any save, no re-plan left: exit $rc: $(grep '^job.sbatch' "$tmp/job.out" | tail -2)"
job "$tmp/a" WPGEN_CHECKPOINT="$ck" WPGEN_DOWN_CMD="echo 127.0.0.1" FAKE_RCS="137 0"
[ $rc = 0 ] && grep -q "re-plan 1 of 2: $tmp/a.replan-1, 2 ranks on 1 node(s) (localhost), starting from step 0 (no checkpoint was saved: $ck is not there)" "$tmp/job.out" &&
    ok || bad "a node lost before any save, re-planned: exit $rc: $(grep '^job.sbatch' "$tmp/job.out" | tail -2)"

# ---- more ranks bound to a host than it has CPUs: refused before mpirun ----
job "$tmp/a" FAKE_NPROC=1
[ $rc = 2 ] && ! launched && grep -q "the plan binds 2 rank(s) to localhost (node n0) at slots up to 1, and it has 1 CPU(s) (nproc of .*): mpirun would fail" "$tmp/job.out" &&
    ok || bad "2 ranks a node on 1 CPU: exit $rc: $(tail -2 "$tmp/job.out")"
job "$tmp/a" SLURM_JOB_ID=7 WPGEN_DIR="$tmp/a" WPGEN_NODES= SLURM_JOB_NODELIST=w1,w2 SLURM_JOB_NUM_NODES=2 SLURM_JOB_CPUS_PER_NODE="2,1"
[ $rc = 2 ] && ! launched && grep -q "the plan binds 2 rank(s) to w2 (node n1) at slots up to 1, and it has 1 CPU(s) (SLURM_JOB_CPUS_PER_NODE)" "$tmp/job.out" &&
    ok || bad "Slurm's 2,1 CPUs for 2 ranks a node: exit $rc: $(tail -2 "$tmp/job.out")"
job "$tmp/a" SLURM_JOB_ID=7 WPGEN_DIR="$tmp/a" WPGEN_NODES= SLURM_JOB_NODELIST=w1,w2 SLURM_JOB_NUM_NODES=2 SLURM_JOB_CPUS_PER_NODE="2(x2)" FAKE_NPROC=1
[ $rc = 0 ] && launched && ok || bad "Slurm's 2(x2) CPUs for 2 ranks a node: exit $rc: $(tail -2 "$tmp/job.out")"

# ---- the script parses, and shellcheck finds nothing at warning level ----
bash -n "$tmp/h/job.sbatch" && ok || bad "bash -n job.sbatch"
if command -v shellcheck >/dev/null; then
    shellcheck -S warning "$tmp/a/job.sbatch" >"$tmp/sc" 2>&1 && ok || bad "shellcheck: $(head -20 "$tmp/sc")"
else
    echo "shellcheck is not installed: skipped (apt-get install shellcheck)"
fi

echo "sbatch_hostile: $pass passed, $fail failed"
[ "$fail" = 0 ]
