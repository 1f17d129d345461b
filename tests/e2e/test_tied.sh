#!/usr/bin/env bash
# A tied model (tie_word_embeddings: Llama 3.2 1B/3B) under pipelined plans: tiny8's shape with
# tied embeddings, whose last chunk holds a mirror of the embedding as its LM head and whose plan
# sums the two gradients (TIE) before either update. Trained by emitted programs under mpirun
# against the reference trainer (tests/e2e/parity_lib.sh: every step's loss and gradient norm to
# 1e-5, every weight at the end to 1e-4; the reference runs the tied model as one chunk, adding
# both uses into one gradient micro-batch by micro-batch, the plan sums each use over the step
# first and then the two: the same sum in another order, so close, not bit-identical). A mirror
# that drifted from the embedding, or a gradient counted twice in the norm, fails here.
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
echo "tied parity: $pass passed, $fail failed ($((SECONDS - t0)) s)"
[ "$fail" = 0 ]
