"""PyTorch parity of a tied model's gradients through a pipelined plan (tests/torch/test_torch_tied.sh):
the emitted program's first step, run with AdamW's beta1 = 0 and no clipping, leaves the step's
gradient itself as AdamW's first moment (exp_avg = (1 - beta1) g), which its checkpoint holds. This
redoes that step in PyTorch (llama.py) from the initial checkpoint on the same global batch (the
data file's first M*G sequences of S+1 bytes, in file order) and compares every gradient, the
embedding's above all: with the head tied to it, it is the sum of its two uses (the token lookup
and the LM head), which the plan computes in two chunks and sums with TIE. PyTorch's two uses are
taken apart too (the head as a copy of the embedding), to check that each matters: a plan that
dropped either would be off by far more than the tolerance.
Tolerances (fp32 against fp32, the plan's sums in another order than PyTorch's): the loss within a
relative 1e-5; every gradient element within 1e-4 * |torch| + 1e-4 * max|torch over the tensor|.
usage: pipelined_tied.py CONFIG_JSON INIT_CHECKPOINT STEP1_CHECKPOINT DATA_FILE M G S LOSS"""
import json
import os
import sys

import numpy as np
import torch

from llama import forward, read_safetensors, tensor_names


def load_checkpoint(path, suffix=""):
    """{name: array} of a sharded checkpoint (its manifest), each tensor put together from the
    slices its shards hold; suffix ".exp_avg" reads AdamW's first moments instead."""
    m = json.load(open(path))
    d = os.path.dirname(path)
    out = {n: np.zeros(int(np.prod(shape)), dtype=np.float32) for n, shape in m["tensors"].items()}
    for sh in m["shards"]:
        data, _ = read_safetensors(os.path.join(d, sh["file"]))
        for n, (off, count) in sh["slices"].items():
            out[n][off:off + count] = data[n + suffix]
    return {n: out[n].reshape(m["tensors"][n]) for n in out}, m


def main():
    cfg_path, init_path, step_path, data_path = sys.argv[1:5]
    M, G, S = (int(a) for a in sys.argv[5:8])
    c_loss = float(sys.argv[8])
    torch.set_num_threads(2)
    c = json.load(open(cfg_path))
    c.update(seq=S, mbs=G)
    failures = 0

    def check(ok, msg):
        nonlocal failures
        print(("ok    " if ok else "FAIL  ") + msg)
        failures += 0 if ok else 1

    w0, _ = load_checkpoint(init_path)
    grads, manifest = load_checkpoint(step_path, ".exp_avg")
    state = manifest["state"]
    check(float(state["beta1"]) == 0 and float(state["clip"]) == 0,
          f"the step ran with beta1 0 and no clipping (exp_avg is the gradient): beta1 {state['beta1']}, clip {state['clip']}")
    check(c["tie_word_embeddings"] and "lm_head.weight" not in manifest["tensors"],
          "a tied model's checkpoint keeps the embedding only, no lm_head.weight")
    check(sorted(w0) == sorted(tensor_names(c)), f"the checkpoint has the model's {len(tensor_names(c))} tensors")

    # the global batch of step 0, in file order: sequence q is the S+1 bytes at q*S
    raw = np.frombuffer(open(data_path, "rb").read(), dtype=np.uint8).astype(np.int64)
    seqs = np.stack([raw[q * S:q * S + S + 1] for q in range(M * G)])
    tokens, targets = torch.tensor(seqs[:, :S]), torch.tensor(seqs[:, 1:])

    def step(dtype, split):
        """(loss, {name: gradient}); split: the head a separate copy of the embedding, its
        gradient returned as "lm_head.weight" (the two uses apart)"""
        P = {n: torch.tensor(w0[n], dtype=dtype, requires_grad=True) for n in w0}
        cc = dict(c)
        if split:
            P["lm_head.weight"] = torch.tensor(w0["model.embed_tokens.weight"], dtype=dtype, requires_grad=True)
            cc["tie_word_embeddings"] = False
        loss, _ = forward(P, cc, tokens, targets)
        loss.backward()
        return loss.item(), {n: P[n].grad.double().numpy() for n in P}

    loss32, g32 = step(torch.float32, False)
    loss64, g64 = step(torch.float64, False)
    _, apart = step(torch.float64, True)
    rel = abs(c_loss - loss32) / abs(loss32)
    check(rel <= 1e-5, f"loss of the step: plan {c_loss:.9f} torch {loss32:.9f} (rel {rel:.2e}; float64 {loss64:.9f})")

    worst = 0.0
    for n in tensor_names(c):
        got, ref = grads[n].astype(np.float64), g32[n]
        scale = np.abs(ref).max()
        ratio = (np.abs(got - ref) / (1e-4 * np.abs(ref) + 1e-4 * scale)).max()
        worst = max(worst, ratio)
        e_c = np.abs(got - g64[n]).max() / np.abs(g64[n]).max()
        check(ratio <= 1, f"grad {n}: max|diff| {np.abs(got - ref).max():.2e} (scale {scale:.2e}, error/tolerance "
                          f"{ratio:.3f}; vs float64 {e_c:.1e})")

    # the embedding's gradient is the sum of both uses, and neither is negligible
    e = "model.embed_tokens.weight"
    lookup, head = apart[e], apart["lm_head.weight"]
    got = grads[e].astype(np.float64)
    err_sum = np.abs(got - (lookup + head)).max() / np.abs(lookup + head).max()
    err_lookup = np.abs(got - lookup).max() / np.abs(lookup + head).max()
    err_head = np.abs(got - head).max() / np.abs(lookup + head).max()
    check(err_sum <= 1e-4 and err_lookup > 1e-2 and err_head > 1e-2,
          f"the embedding's gradient is the sum of its two uses: off the sum by {err_sum:.1e}, "
          f"off the lookup's alone by {err_lookup:.1e}, off the head's alone by {err_head:.1e} (of the largest)")
    print(f"tied pipelined parity: {len(tensor_names(c))} gradients, worst error/tolerance {worst:.3f}, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
