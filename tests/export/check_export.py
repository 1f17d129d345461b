"""Loads a wpgen export with transformers' LlamaForCausalLM.from_pretrained on the CPU and
compares its logits on the batch of tests/torch/dump.c (run on the same checkpoint) with ours:
each token's log-sum-exp of the logits and the mean cross-entropy, which together depend on
every logit. fp32 export: within 1e-4 (float32 sums in another order). bf16 export (--bf16):
the model in bf16 as published checkpoints load, computed in fp32 (.float()), so only the
weights' rounding differs from our fp32 forward: log-sum-exp within 0.05, the loss within 1%;
and its weights must be the fp32 export's rounded to nearest even, exactly.
usage: check_export.py EXPORT_DIR DUMP.safetensors [--bf16 FP32_EXPORT_DIR]"""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import LlamaForCausalLM


def load(path, dtype):
    model, info = LlamaForCausalLM.from_pretrained(path, torch_dtype=dtype, attn_implementation="eager",
                                                   output_loading_info=True)
    missing = [k for k in info["missing_keys"] if not k.endswith("rotary_emb.inv_freq")]
    assert not missing and not info["unexpected_keys"], f"{path}: missing {missing}, unexpected {info['unexpected_keys']}"
    return model.eval()


def main():
    out, dump = sys.argv[1], sys.argv[2]
    bf16 = len(sys.argv) > 3 and sys.argv[3] == "--bf16"
    cfg = json.load(open(os.path.join(out, "config.json")))
    assert cfg["torch_dtype"] == ("bfloat16" if bf16 else "float32"), cfg["torch_dtype"]
    d = load_file(dump)
    tokens, targets = d["tokens"].long(), d["targets"].long()
    model = load(out, torch.bfloat16 if bf16 else torch.float32)
    if bf16:
        ref = load(sys.argv[4], torch.float32)
        want = {k: v.to(torch.bfloat16) for k, v in ref.state_dict().items()}
        for k, v in model.state_dict().items():
            assert v.dtype == torch.bfloat16 and torch.equal(v, want[k]), f"{k}: not the fp32 weights rounded to bf16"
        model = model.float()
    with torch.no_grad():
        logits = model(tokens).logits.double()
    lse = torch.logsumexp(logits, dim=-1)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()
    dl = (lse - d["lse"].double()).abs().max().item()
    ours = d["loss"].item()
    tol_lse, tol_loss = (0.05, 0.01 * abs(ours)) if bf16 else (1e-4, 1e-4)
    print(f"{out}: {'bf16' if bf16 else 'fp32'}: loss {loss:.6f} (ours {ours:.6f}), log-sum-exp within {dl:.2e} "
          f"(tolerance {tol_lse:g})")
    assert dl <= tol_lse and abs(loss - ours) <= tol_loss, "logits differ from ours"


main()
