#!/usr/bin/env bash
# On paper, no run: the sizes of real models on one 8-GPU node. For llama2-7b (a preset) and
# llama3-8b (its published config.json, written here) on topologies/dgx-h100.json, every strategy
# of `wpgen list` whose plan fits is emitted and its plan.json read (sizes.py): what each rank
# writes in a checkpoint of its own shard (fp32 masters and AdamW's two moments, 12 bytes per
# owned parameter), that the owners together hold the model once per replica (counted from the
# config, not from wpgen), that no rank owns more than twice its share, and that every transfer and
# collective of the step, and each rank's part of a checkpoint gather, once cut in pieces as the
# communication layers cut them (common/comm_book.c), passes no piece over INT_MAX elements.
# usage: tests/sizes/test_sizes.sh BUILD_DIR
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/llama3-8b.json" <<'JSON'
{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
  "use_cache": true, "vocab_size": 128256
}
JSON
strategies=$("$build/wpgen" list | awk '/^Strategies/{s=1; next} /^Topologies/{s=0} s && /^  [a-z0-9]/ {print $1}' | grep -vx auto)
[ -n "$strategies" ] || { echo "no strategies from wpgen list"; exit 1; }
plans=()
for m in llama2-7b "$tmp/llama3-8b.json"; do
    for s in $strategies; do
        d=$tmp/$(basename "$m" .json)-$s
        "$build/wpgen" emit -t topologies/dgx-h100.json -m "$m" -s "$s" -o "$d" >"$tmp/out" 2>&1
        rc=$?
        if [ $rc = 0 ]; then plans+=("$d/plan.json")
        elif [ $rc = 1 ]; then echo "$(basename "$m" .json) $s: does not fit ($(grep -m1 -i "fit\|memory" "$tmp/out" | cut -c1-100))"
        else echo "FAIL: $m $s: exit $rc: $(head -2 "$tmp/out")"; exit 1; fi
    done
done
python3 tests/sizes/sizes.py "${plans[@]}"
