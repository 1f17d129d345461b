# Planned against measured peak memory of emitted CPU programs, for tests/e2e/test_memory_plan.sh
# and scripts/bench_memory.sh (make bench-memory). Sourced with $build (wpgen's build folder) and
# $tmp (a scratch folder) set, from the repository root.
#
# mem_case LABEL SEQ [wpgen flags...] emits the plan (one rank: topologies/cpu-1x1.json) at SEQ
# tokens, builds it (the runtime's objects compiled once and copied into the next program), runs
# one step on synthetic tokens and sets:
#   MEM_PLAN   the plan's device peak (plan --json's peak_mem_bytes), bytes
#   MEM_HOST   the plan's host memory of the rank (peak_mem_breakdown.host: offload's stashes)
#   MEM_RSS    the process's measured peak resident set (getrusage's ru_maxrss), bytes
#   MEM_POOL   the bytes the run's offload host pool held (the program's "host pool" line; 0 without)
#   MEM_ATTN   what the plan leaves out (config.h, the workspace's "Not counted"): the CPU attention
#              kernel's work area, attention_work_floats for one thread less its fixed tiles: K and
#              V transposed, 2 T kv hd floats (T padded to 64 tokens), and the backward's row of
#              (heads / kv) S floats (a flash-attention GPU kernel needs none)
# On the CPU backend "device" memory is the process's memory and the host pool is malloc'ed in the
# same process: the resident peak counts both, so it is compared with MEM_PLAN + MEM_HOST; the
# pool's own figure (MEM_POOL) is what tells the two apart. Returns 1 (MEM_ERR says why) on failure.
mem_case() {
    local label=$1 seq=$2; shift 2
    local d="$tmp/mem-$label"
    MEM_ERR="" MEM_PLAN=0 MEM_HOST=0 MEM_RSS=0 MEM_POOL=0 MEM_ATTN=0
    rm -rf "$d"
    if ! "$build/wpgen" emit -t topologies/cpu-1x1.json --seq "$seq" "$@" -o "$d" >"$tmp/mem-emit.out" 2>&1; then
        MEM_ERR="emit: $(tail -2 "$tmp/mem-emit.out")"; return 1
    fi
    if [ -d "$tmp/mem-rt/runtime" ] && diff -rq "$tmp/mem-rt/runtime" "$d/runtime" >/dev/null; then
        mkdir -p "$d/obj" && cp -r "$tmp/mem-rt/obj/runtime" "$d/obj/"
    fi
    if ! bash tests/make_emitted.sh "$d" >"$tmp/mem-make.out" 2>&1; then MEM_ERR="make: $(tail -3 "$tmp/mem-make.out")"; return 1; fi
    if [ ! -d "$tmp/mem-rt" ]; then mkdir -p "$tmp/mem-rt/obj" && cp -r "$d/runtime" "$tmp/mem-rt/" && cp -r "$d/obj/runtime" "$tmp/mem-rt/obj/"; fi
    "$build/wpgen" plan -t topologies/cpu-1x1.json --seq "$seq" "$@" --json >"$d/plan-summary.json" 2>/dev/null
    # one step, one thread; the program is its own singleton MPI process (no mpirun): the peak
    # resident set of the child that ran is the program's alone
    local r
    r=$(cd "$d" && OMP_NUM_THREADS=1 python3 -c '
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
open("run.out", "w").write(p.stdout)
print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
' ./train --synthetic --steps 1)
    if [ "${r%% *}" != 0 ]; then MEM_ERR="train (exit ${r%% *}): $(tail -3 "$d/run.out")"; return 1; fi
    MEM_RSS=${r##* }
    read -r MEM_PLAN MEM_HOST MEM_ATTN < <(python3 -c '
import json, sys
d, m = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["model"]
S, G, kv = m["seq_len"], m["micro_batch_size"], m["num_key_value_heads"]
Sp = (S + 63) // 64 * 64
attn = 4 * (2 * G * kv * m["head_dim"] * Sp + m["num_attention_heads"] // kv * S)
print(d["peak_mem_bytes"], d["peak_mem_breakdown"].get("host", 0), attn)' "$d/plan-summary.json" "$d/plan.json")
    MEM_POOL=$(sed -n 's/.*host pool \([0-9]*\) bytes.*/\1/p' "$d/run.out" | tail -1)
    MEM_POOL=${MEM_POOL:-0}
}
