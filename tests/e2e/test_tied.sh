#!/usr/bin/env bash
# A tied model (tie_word_embeddings: Llama 3.2 1B/3B) under pipelined plans: tiny8's shape with
# tied embeddings, whose last chunk holds a mirror of the embedding as its LM head and whose plan
# sums the two gradients (TIE) before either update. Trained by emitted programs under mpirun
# against the reference trainer (tests/e2e/parity_lib.sh: every step's loss and gradient norm to
# 1e-5, every weight at the end to 1e-4; the reference runs the tied model as one chunk, adding
# both uses into one gradient micro-batch by micro-batch, the plan sums each use over the step
# first and then the two: the same sum in another order, so close, not bit-identical). A mirror
# that drifted from the embedding, or a gradient counted twice in the norm, fails here. Then the
# tied checkpoints: resumed and exported (below).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/parity_lib.sh

model=$tmp/tied/config.json
mkdir -p "$(dirname "$model")"
python3 - "$model" <<'PY'
import json, sys
c = json.load(open("tests/data/tiny8/config.json"))
c["tie_word_embeddings"] = True
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY

NORM=1 case_ weipipe-interleave topologies/cpu-2x2.json 4 1
NORM=1 case_ weipipe-zb2 "$(topo_for 2)" 2 2 --replicate-ends
# activation passing: the embedding on the first stage, the mirror on the last, their gradients
# summed between the two (TIE_ALLREDUCE); interleaved (the mirror's stage holds chunk C-1 of 8),
# with replicas (each pipeline ties its pair after the replicas' all-reduces), split backward,
# and tawpipe's owners
NORM=1 case_ 1f1b topologies/cpu-1x4.json 4 1
NORM=1 case_ 1f1b "$(topo_for 2)" 2 2 --chunks 4
NORM=1 case_ 1f1b topologies/cpu-1x4.json 4 1 --replicas 2
NORM=1 case_ zb1 topologies/cpu-1x4.json 4 1
NORM=1 case_ tawpipe topologies/cpu-2x2.json 4 1
# fsdp over several chunks: the ends replicated (chunks 0 and C + 1, all-reduced over every rank,
# TIE on every rank), the layers sharded; per micro-batch (full-shard), with replicas (HSDP),
# without overlap
NORM=1 case_ fsdp "$(topo_for 2)" 2 2
NORM=1 case_ fsdp "$(topo_for 2)" 2 2 --chunks 3 --fsdp-variant full-shard
NORM=1 case_ fsdp topologies/cpu-1x4.json 4 1 --replicas 2 --fsdp-overlap off
# bf16 weights and gradients (the ends' all-reduces sum bf16; TIE adds the two fp32 sums): the
# tolerances of tests/e2e/test_parity.sh's bf16 cases
PREC="bf16 bf16" LOSS_TOL=1e-3 WEIGHT_TOL=5e-2 case_ weipipe-interleave topologies/cpu-2x2.json 4 1

# Checkpoints: the tied pipelined run saved at step 2 resumes under its own plan and lands on the
# uninterrupted run's weights at step 4 bit for bit (the mirror and its AdamW moments, which the
# checkpoint does not keep, filled from the embedding's: the same bits the run had); it resumes
# under fsdp (2 ranks: the ends replicated, the layers sharded) and under one chunk (fsdp
# --chunks 1) within the parity tolerance (other sum orders), and the
# reference trainer's one-chunk checkpoint resumes under the pipelined plan. The export holds the
# embedding and no lm_head.weight, as Hugging Face writes a tied model, and says it is tied.
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
long=(--synthetic --seed 3 --lr 2e-3 --warmup 1 --steps 4)
emit_() {   # DIR TOPO STRATEGY MICRO-BATCHES [FLAG...]
    local d=$1 t=$2 s=$3 n=$4; shift 4
    "$build/wpgen" emit -t "$t" -m "$model" --micro-batch-size 2 -s "$s" --micro-batches "$n" "$@" -o "$d" >"$tmp/emit.out" 2>&1 &&
        bash tests/make_emitted.sh "$d" >/dev/null 2>&1 || { bad "emit $s: $(tail -2 "$tmp/emit.out")"; return 1; }
}
emit_ "$tmp/wp" topologies/cpu-2x2.json weipipe-interleave 1
emit_ "$tmp/fsdp" "$(topo_for 2)" fsdp 2
emit_ "$tmp/fsdp1" "$(topo_for 2)" fsdp 2 --chunks 1
wp=("${mpirun[@]}" -np 4 "$tmp/wp/train"); fsdp=("${mpirun[@]}" -np 2 "$tmp/fsdp/train")
mkdir -p "$tmp/u" "$tmp/a" "$tmp/s" "$tmp/f" "$tmp/r" "$tmp/rr"
"${wp[@]}" "${long[@]}" --save "$tmp/u/ckpt.json" >"$tmp/out" 2>&1 || bad "uninterrupted: $(tail -2 "$tmp/out")"
"${wp[@]}" "${long[@]}" --stop-at 2 --save "$tmp/a/ckpt.json" >"$tmp/out" 2>&1 || bad "weipipe to step 2: $(tail -2 "$tmp/out")"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["tensors"]; sys.exit(0 if "model.embed_tokens.weight" in t and "lm_head.weight" not in t else 1)' \
    "$tmp/a/ckpt.json" && ok || bad "the tied checkpoint's manifest: an lm_head.weight, or no embedding"
"${wp[@]}" "${long[@]}" --resume "$tmp/a/ckpt.json" --save "$tmp/s/ckpt.json" >"$tmp/out" 2>&1 &&
    "$build/tools/ckpt_compare" "$tmp/s/ckpt.json" "$tmp/u/ckpt.json" 0 >"$tmp/cmp" 2>&1 && ok ||
    bad "weipipe resumed under weipipe is not the uninterrupted run bit for bit: $(tail -2 "$tmp/out") $(tail -2 "$tmp/cmp")"
"${fsdp[@]}" "${long[@]}" --resume "$tmp/a/ckpt.json" --save "$tmp/f/ckpt.json" >"$tmp/out" 2>&1 &&
    "$build/tools/ckpt_compare" "$tmp/f/ckpt.json" "$tmp/u/ckpt.json" 1e-4 >"$tmp/cmp" 2>&1 && ok ||
    bad "weipipe resumed under fsdp: $(tail -2 "$tmp/out") $(tail -2 "$tmp/cmp")"
mkdir -p "$tmp/f1"
"${mpirun[@]}" -np 2 "$tmp/fsdp1/train" "${long[@]}" --resume "$tmp/a/ckpt.json" --save "$tmp/f1/ckpt.json" >"$tmp/out" 2>&1 &&
    "$build/tools/ckpt_compare" "$tmp/f1/ckpt.json" "$tmp/u/ckpt.json" 1e-4 >"$tmp/cmp" 2>&1 && ok ||
    bad "weipipe resumed under fsdp --chunks 1 (one chunk): $(tail -2 "$tmp/out") $(tail -2 "$tmp/cmp")"
"$build/wp-ref" -m "$model" --micro-batch-size 2 --micro-batches 4 "${long[@]}" --stop-at 2 --save "$tmp/r/ckpt.json" >"$tmp/out" 2>&1 &&
    "${wp[@]}" "${long[@]}" --resume "$tmp/r/ckpt.json" --save "$tmp/rr/ckpt.json" >"$tmp/out" 2>&1 &&
    "$build/tools/ckpt_compare" "$tmp/rr/ckpt.json" "$tmp/u/ckpt.json" 1e-4 >"$tmp/cmp" 2>&1 && ok ||
    bad "wp-ref's one-chunk checkpoint resumed under weipipe: $(tail -2 "$tmp/out") $(tail -2 "$tmp/cmp")"
# a plan stopped at step 2 and resumed under itself: the uninterrupted run's weights bit for bit
resumes_exactly() {   # NAME DIR TRAINER...
    local name=$1 d=$2; shift 2
    mkdir -p "$d/u" "$d/a" "$d/s"
    "$@" "${long[@]}" --save "$d/u/ckpt.json" >"$tmp/out" 2>&1 &&
        "$@" "${long[@]}" --stop-at 2 --save "$d/a/ckpt.json" >"$tmp/out" 2>&1 &&
        "$@" "${long[@]}" --resume "$d/a/ckpt.json" --save "$d/s/ckpt.json" >"$tmp/out" 2>&1 &&
        "$build/tools/ckpt_compare" "$d/s/ckpt.json" "$d/u/ckpt.json" 0 >"$tmp/cmp" 2>&1 && ok ||
        bad "$name resumed under $name is not the uninterrupted run bit for bit: $(tail -2 "$tmp/out") $(tail -2 "$tmp/cmp")"
}
# 1f1b, its ends on two ranks (the last stage's mirror and its moments filled from the embedding
# it does not own), and from the weipipe checkpoint; fsdp, the ends replicated
emit_ "$tmp/1f1b" topologies/cpu-1x4.json 1f1b 1
f1b=("${mpirun[@]}" -np 4 "$tmp/1f1b/train")
resumes_exactly 1f1b "$tmp/p" "${f1b[@]}"
mkdir -p "$tmp/p/w"
"${f1b[@]}" "${long[@]}" --resume "$tmp/a/ckpt.json" --save "$tmp/p/w/ckpt.json" >"$tmp/out" 2>&1 &&
    "$build/tools/ckpt_compare" "$tmp/p/w/ckpt.json" "$tmp/u/ckpt.json" 1e-4 >"$tmp/cmp" 2>&1 && ok ||
    bad "weipipe resumed under 1f1b: $(tail -2 "$tmp/out") $(tail -2 "$tmp/cmp")"
resumes_exactly fsdp "$tmp/q" "${fsdp[@]}"
"$build/wpgen" export "$tmp/u/ckpt.json" -o "$tmp/hf" --dtype fp32 >"$tmp/out" 2>&1 &&
    python3 - "$tmp/hf" <<'PY' && ok || bad "export of the tied checkpoint: $(tail -2 "$tmp/out")"
import json, struct, sys
d = sys.argv[1]
with open(d + "/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    names = set(json.loads(f.read(n))) - {"__metadata__"}
c = json.load(open(d + "/config.json"))
assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names, sorted(names)[:3]
assert c["tie_word_embeddings"] is True and len(names) == 74, (c.get("tie_word_embeddings"), len(names))
PY
echo "tied: $pass passed, $fail failed ($((SECONDS - t0)) s)"
[ "$fail" = 0 ]
