# A test Slurm on this machine, for the scripts of tests/slurm (sourced after tests/check.sh, which
# gives $tmp, ok and bad): slurmctld, slurmd and munged from Debian's packages (installed with
# apt-get when missing), configured in $tmp/slurm on ports of their own and stopped on exit.
# slurm_start CPUS NODE...: one slurmd per NODE, each NODE a Slurm node name of CPUS CPUs; one
# name, this host's, makes the plain one-node cluster; several are emulated nodes of this host
# (NodeHostname, a port and a spool each: Debian's build has MULTIPLE_SLURMD).

# exits 0 (skipped, said) where the daemons cannot run here
slurm_install() {
    if [ "$(id -u)" != 0 ]; then echo "skipped: the test Slurm runs its daemons as root"; exit 0; fi
    if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
        command -v apt-get >/dev/null || { echo "skipped: no Slurm and no apt-get to install it"; exit 0; }
        echo "test_slurm: installing slurmctld slurmd slurm-client munge with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q slurmctld slurmd slurm-client munge >/dev/null 2>&1 ||
            { apt-get update -q >/dev/null 2>&1; apt-get install -y -q slurmctld slurmd slurm-client munge >/dev/null 2>&1; } ||
            { echo "test_slurm: apt-get install failed"; exit 1; }
    fi
}

slurm_start() {   # CPUS NODE...
    local cpus=$1 n i=0; shift
    S=$tmp/slurm
    mkdir -p "$S/munge" "$S/state" "$S/log"
    chmod 700 "$S/munge"
    head -c 1024 /dev/urandom >"$S/munge/munge.key" && chmod 600 "$S/munge/munge.key"
    local port=$((20000 + $$ % 20000)) host
    host=$(hostname -s)
    for n in "$@"; do mkdir -p "$S/spool-$n"; done
    cat >"$S/slurm.conf" <<CONF
ClusterName=wptest$$
SlurmctldHost=$host
AuthType=auth/munge
AuthInfo=socket=$S/munge/sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=10
MpiDefault=none
JobRequeue=1
CONF
    for n in "$@"; do
        i=$((i + 1))
        if [ "$n" = "$host" ]; then echo "NodeName=$n CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=4000 State=UNKNOWN"
        else echo "NodeName=$n NodeHostname=$host Port=$((port + 1 + i)) CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=2000 State=UNKNOWN"
        fi
    done >>"$S/slurm.conf"
    echo "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" >>"$S/slurm.conf"
    export SLURM_CONF=$S/slurm.conf
    SLURM_NODES=("$@")
    trap 'slurm_stop; rm -rf "$tmp"' EXIT
    munged -f --key-file="$S/munge/munge.key" -S "$S/munge/sock" --log-file="$S/log/munged.log" \
        --pid-file="$S/munge/pid" --seed-file="$S/munge/seed" || { bad "munged did not start"; exit 1; }
    slurmctld -c -i >"$S/log/ctld.out" 2>&1 || { bad "slurmctld did not start: $(tail -3 "$S/log/slurmctld.log")"; exit 1; }
    for n in "$@"; do
        slurmd -N "$n" >"$S/log/d-$n.out" 2>&1 || { bad "slurmd $n did not start: $(tail -3 "$S/log/slurmd-$n.log")"; exit 1; }
    done
    for i in $(seq 30); do [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" = $# ] && break; sleep 1; done
    [ "$(sinfo -h -N -t idle -o %N | sort -u | wc -l)" = $# ] && ok || { bad "the test Slurm's nodes are not idle: $(sinfo 2>&1 | tail -2)"; exit 1; }
}

slurm_stop() {
    local f
    for f in "$S"/slurmd-*.pid "$S/slurmctld.pid" "$S/munge/pid"; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
    sleep 1
}

# A job that lost a node and re-planned, against the same two plans run by hand: OLD_TRAIN on
# OLD_NP ranks to step S, then NEW_TRAIN on NEW_NP ranks from that checkpoint, in REF (a new
# folder); the job's last checkpoint JOB_CKPT must be bit-identical. FLAGS: the training flags
# (with --steps). Needs $mpirun and $build.
same_as_by_hand() {   # JOB_CKPT REF S OLD_NP OLD_TRAIN NEW_NP NEW_TRAIN FLAGS...
    local job=$1 ref=$2 s=$3 onp=$4 old=$5 nnp=$6 new=$7; shift 7
    mkdir -p "$ref"
    "${mpirun[@]}" -np "$onp" "$old" "$@" --stop-at "$s" --save "$ref/checkpoint.json" >"$ref/old.out" 2>&1
    [ "$(ckpt_step "$ref/checkpoint.json")" = "$s" ] &&
        "${mpirun[@]}" -np "$nnp" "$new" "$@" --resume "$ref/checkpoint.json" --save "$ref/checkpoint.json" \
            >"$ref/new.out" 2>&1 || bad "the runs by hand: $(tail -2 "$ref/old.out" "$ref/new.out")"
    "$build/tools/ckpt_compare" "$job" "$ref/checkpoint.json" 0 >"$ref/cmp.out" 2>&1 && ok ||
        bad "the job's weights differ from the runs by hand: $(tail -2 "$ref/cmp.out")"
}

# The job's log LOG: steps 1..k until the loss, then S+1..TOTAL once each after the resume from
# step S (at least 20): no step replayed or skipped.
steps_once_after_resume() {   # LOG S TOTAL
    python3 - "$@" <<'PY' && ok || bad "the steps after the resume are not $2+1..$3 once each"
import json, sys
log = [json.loads(l)["step"] for l in open(sys.argv[1]) if l.strip()]
s, total = int(sys.argv[2]), int(sys.argv[3])
k = len(log) - (total - s)
assert s >= 20 and log[k:] == list(range(s + 1, total + 1)) and log[:k] == list(range(1, k + 1)), (s, log[k - 3:k + 3])
PY
}
