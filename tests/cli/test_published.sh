#!/usr/bin/env bash
# The Llama family as published (issue 30): Llama 3.1 8B and Llama 3.2 1B, their config.json files
# as the Hugging Face Hub has them (tests/data/llama-3.1-8b, tests/data/llama-3.2-1b: rope_scaling
# llama3, vocabulary 128256, rope_theta 500000, the 1B tied), plan on a DGX H100 with every
# strategy `wpgen list` shows, each one fitting or saying that it does not (exit 1), never
# refusing the model; the 8B's plans that fit are emitted, and the emitted program carries the
# rope_scaling (plan_desc.c, which compiles, and plan.json). A tied model runs in every strategy
# over several chunks (the head a mirror of the embedding): fsdp and the four weipipe strategies
# sum the two gradients by TIE on every rank (both ends replicated: --replicate-ends, the weipipe
# default for a tied model), 1f1b, zb1 and tawpipe by TIE_ALLREDUCE between the two ranks holding
# the ends; no strategy refuses it. Their config.json
# round trip through a checkpoint is tests/unit/test_published.c.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

topo=topologies/dgx-h100.json
strategies=$("$wpgen" list | awk '/^Strategies/ { f = 1; next } /^Topologies/ { f = 0 } f && /^  [a-z0-9]/ { print $1 }')
[ -n "$strategies" ] && ok || bad "wpgen list shows no strategies"

fits=0
for s in $strategies; do
    [ "$s" = auto ] && continue   # it searches the others, planned here one by one
    "$wpgen" plan -m tests/data/llama-3.1-8b -t "$topo" -s "$s" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    case $rc in
    0) fits=$((fits + 1)); ok
       grep -q "llama-3.1-8b" "$tmp/out" && ok || bad "plan $s: the summary does not name the model"
       d=$tmp/emit-$s
       if "$wpgen" emit -m tests/data/llama-3.1-8b -t "$topo" -s "$s" -o "$d" >/dev/null 2>"$tmp/err"; then
           grep -q '\.rope_scaling = { \.factor = 8\.0f, \.low_freq_factor = 1\.0f,' "$d/plan_desc.c" &&
               grep -q '\.high_freq_factor = 4\.0f, \.original_max_position_embeddings = 8192 }' "$d/plan_desc.c" && ok ||
               bad "emit $s: plan_desc.c lacks the rope_scaling: $(grep -n rope "$d/plan_desc.c")"
           gcc -std=c11 -D_GNU_SOURCE -fsyntax-only -I"$d" -I"$d/runtime" "$d/plan_desc.c" 2>"$tmp/cc" && ok ||
               bad "emit $s: plan_desc.c does not compile: $(head -3 "$tmp/cc")"
           python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; r=m["rope_scaling"]
assert (r["factor"], r["low_freq_factor"], r["high_freq_factor"], r["original_max_position_embeddings"], r["rope_type"]) == (8, 1, 4, 8192, "llama3"), r
assert m["head_dim"] == 128 and m["vocab_size"] == 128256 and m["rope_theta"] == 500000, m' "$d/plan.json" 2>"$tmp/py" && ok ||
               bad "emit $s: plan.json: $(tail -1 "$tmp/py")"
       else
           bad "emit $s: $(head -3 "$tmp/err")"
       fi ;;
    1) grep -q "does not fit" "$tmp/err" && ok || bad "plan $s: exit 1 without 'does not fit': $(head -2 "$tmp/err")" ;;
    *) bad "plan $s of Llama 3.1 8B: exit $rc: $(head -2 "$tmp/err")" ;;
    esac
done
[ "$fits" -ge 4 ] && ok || bad "only $fits strategies fit Llama 3.1 8B on a DGX H100"

# Llama 3.2 1B: fsdp and the weipipe strategies over several chunks with TIE on every rank (both
# ends replicated), the others with TIE_ALLREDUCE between the two ranks holding the ends
tied_fits=0
for s in $strategies; do
    [ "$s" = auto ] && continue
    "$wpgen" plan -m tests/data/llama-3.2-1b -t "$topo" -s "$s" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    case $rc in
    0) tied_fits=$((tied_fits + 1)); ok
       "$wpgen" emit -m tests/data/llama-3.2-1b -t "$topo" -s "$s" -o "$tmp/emit1b-$s" >/dev/null 2>"$tmp/err" &&
           grep -q '\.tied = 1' "$tmp/emit1b-$s/plan_desc.c" && grep -q '\.factor = 32\.0f' "$tmp/emit1b-$s/plan_desc.c" && ok ||
           bad "emit $s of Llama 3.2 1B: $(head -2 "$tmp/err")"
       # over several chunks: the embedding's gradient and the head mirror's tied once per step, on
       # every rank (TIE) or between the two holding them (TIE_ALLREDUCE, a call on each)
       local_ties=$(cat "$tmp/emit1b-$s"/rank_*.c | grep -c 'wp_tie(R, ')
       pair_ties=$(cat "$tmp/emit1b-$s"/rank_*.c | grep -c 'wp_tie_allreduce(R, ')
       case $s in
       fsdp|weipipe-*) grep -q "TIE sums their gradients" "$tmp/out" && [ "$local_ties" = 8 ] && [ "$pair_ties" = 0 ] && ok ||
                      bad "emit $s of Llama 3.2 1B: $local_ties wp_tie and $pair_ties wp_tie_allreduce, expected 8 and 0" ;;
       *) grep -q "TIE_ALLREDUCE sums their gradients" "$tmp/out" && [ "$local_ties" = 0 ] && [ "$pair_ties" = 2 ] && ok ||
              bad "emit $s of Llama 3.2 1B: $local_ties wp_tie and $pair_ties wp_tie_allreduce, expected 0 and 2" ;;
       esac ;;
    1) grep -q "does not fit" "$tmp/err" && ok || bad "plan $s of 3.2 1B: exit 1: $(head -2 "$tmp/err")" ;;
    *) bad "plan $s of Llama 3.2 1B: exit $rc: $(head -2 "$tmp/err")" ;;
    esac
done
n_strategies=$(echo "$strategies" | grep -vcx auto)
[ "$tied_fits" = "$n_strategies" ] && ok || bad "only $tied_fits of $n_strategies strategies plan Llama 3.2 1B"

echo "published models: $pass passed, $fail failed ($fits strategies fit Llama 3.1 8B, $tied_fits Llama 3.2 1B)"
[ "$fail" = 0 ]
