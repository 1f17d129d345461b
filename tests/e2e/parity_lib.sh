# The harness of the end-to-end parity tests (sourced, with $build set and the repository root as
# the working directory): case_ emits a plan, builds it, trains it under mpirun for a few steps
# and compares the loss of every step (relative 1e-5) and every weight tensor at the end
# (relative 1e-4) with the reference trainer on the same global batch (DESIGN.md, "Numerical
# contract"). The reference run for each batch size is made once and kept. LABEL=text adds to a
# case's name; a strategy's own knobs are wpgen flags after the micro-batches (--rounds K).
# PREC="P G" runs the plan and the reference at --precision P --grad-precision G (default
# "fp32 fp32"), compared to LOSS_TOL and WEIGHT_TOL (default 1e-5 and 1e-4, relative). NORM=1 also
# compares the gradient norm of every step (to LOSS_TOL).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
steps=3
# 8 layers, so that 8 pipeline stages fit and 8 layers in 3 chunks are uneven
model=tests/data/tiny8/config.json
common=(--synthetic --steps "$steps" --seed 5 --lr 2e-3 --warmup 1)

# 1-node clusters of n CPU devices, for the rank counts the shipped topologies do not have
topo_for() {
    local n=$1 f="$tmp/c$1.json"
    [ -f "$f" ] || printf '{"version":1,"name":"cpu-1x%d","device_types":{"cpu":{"peak_tflops_fp32":0.05,"mem_gb":4,"hbm_GBps":10}},"nodes":[{"name":"n0","devices":%d,"type":"cpu","intra":{"type":"SHM","bw_GBps":5,"lat_us":1}}]}\n' "$n" "$n" >"$f"
    echo "$f"
}

prec_flags() {   # PREC -> the flags of both programs
    local p=(${PREC:-fp32 fp32})
    echo "--precision ${p[0]} --grad-precision ${p[1]:-fp32}"
}

ref_for() {   # M -> checkpoint of the reference trainer over M micro-batches (at PREC)
    local M=$1 d="$tmp/ref-$1-$(prec_flags | tr -d ' -')"
    if [ ! -f "$d/checkpoint.json" ]; then
        mkdir -p "$d"
        "$build/wp-ref" -m "$model" --micro-batch-size 2 --micro-batches "$M" $(prec_flags) "${common[@]}" --save "$d/checkpoint.json" --log "$d/log" >"$d/out" 2>&1 ||
            { echo "wp-ref failed:"; cat "$d/out"; return 1; }
    fi
    echo "$d"
}

losses() { grep -o '"loss": *[-0-9.eE+naif]*' "$1" | sed 's/.*: *//'; }
norms() { grep -o '"grad_norm": *[-0-9.eE+naif]*' "$1" | sed 's/.*: *//'; }

pass=0; fail=0; t0=$SECONDS
case_() {   # strategy topology ranks micro-batches [extra wpgen flags...]
    local s=$1 topo=$2 n=$3 mb=$4; shift 4
    local label="$s on $(basename "$topo" .json), $mb mb/rank $* ${PREC:+$PREC }${LABEL:-}"
    local ltol=${LOSS_TOL:-1e-5} wtol=${WEIGHT_TOL:-1e-4}
    # every case is emitted into the same folder: emit keeps what make built there, so make
    # compiles only the ranks and the plan's tables (generator/emit/manifest.c); the run's
    # checkpoint and log go to a folder of their own, new for each case
    local d="$tmp/run" o="$tmp/case" M=$((n * mb)) ref
    ref=$(ref_for "$M") || { fail=$((fail + 1)); return; }
    rm -rf "$o"; mkdir -p "$o"
    if ! "$build/wpgen" emit -t "$topo" -m "$model" --micro-batch-size 2 -s "$s" --micro-batches "$mb" $(prec_flags) "$@" -o "$d" >"$tmp/emit.out" 2>&1; then
        echo "FAIL $label: emit: $(cat "$tmp/emit.out")"; fail=$((fail + 1)); return
    fi
    if ! bash tests/make_emitted.sh "$d" >"$tmp/make.out" 2>&1; then
        echo "FAIL $label: make:"; tail -20 "$tmp/make.out"; fail=$((fail + 1)); return
    fi
    if ! timeout 300 "${mpirun[@]}" -np "$n" "$d/train" "${common[@]}" --save "$o/checkpoint.json" --log "$o/log" >"$tmp/run.out" 2>&1; then
        echo "FAIL $label: train:"; tail -20 "$tmp/run.out"; fail=$((fail + 1)); return
    fi
    # losses of every step, relative ltol
    if ! paste <(losses "$ref/log") <(losses "$o/log") | awk -v n="$steps" -v tol="$ltol" '
        { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
          if (NF != 2 || d > tol * a) { print "step " NR ": loss " $1 " vs " $2; bad = 1 } }
        END { if (NR != n) { print NR " steps logged, expected " n; bad = 1 } exit bad }' >"$tmp/loss.out"; then
        echo "FAIL $label: losses differ: $(cat "$tmp/loss.out")"; fail=$((fail + 1)); return
    fi
    # NORM=1: the gradient norm of every step too, relative ltol (a chunk counted twice, as a
    # replicated chunk held by every rank could be, changes it even where clipping does not act)
    if [ -n "${NORM:-}" ] && ! paste <(norms "$ref/log") <(norms "$o/log") | awk -v tol="$ltol" '
        { d = $1 - $2; if (d < 0) d = -d; if (NF != 2 || d > tol * $1) { print "step " NR ": gradient norm " $1 " vs " $2; bad = 1 } }
        END { exit bad }' >"$tmp/norm.out"; then
        echo "FAIL $label: gradient norms differ: $(cat "$tmp/norm.out")"; fail=$((fail + 1)); return
    fi
    if ! "$build/tools/ckpt_compare" "$o/checkpoint.json" "$ref/checkpoint.json" "$wtol" >"$tmp/cmp.out" 2>&1; then
        echo "FAIL $label: weights differ:"; cat "$tmp/cmp.out"; fail=$((fail + 1)); return
    fi
    pass=$((pass + 1))
    echo "ok   $label: $(tail -n 1 "$tmp/cmp.out" | sed 's/ckpt-compare: //')"
}

