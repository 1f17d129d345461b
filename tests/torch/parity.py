"""PyTorch parity of the CPU model: reads what tests/torch/dump.c wrote (weights, tokens,
targets, and the C model's loss, log-sum-exp of the logits and gradients), redoes the forward and backward with the
PyTorch model of llama.py, and compares. Tolerances (fp32 against fp32): loss within a relative
1e-5; each token's log-sum-exp of the logits within 1e-5 * its largest; every gradient element within 1e-4 * |torch| + 1e-4 *
max|torch over the tensor| (its scale: a relative 1e-4 on the tensor). The float64 run is the
truth both are measured against, printed for information.
usage: parity.py DUMP.safetensors"""
import sys

import numpy as np
import torch

from llama import config_from_meta, forward, read_safetensors, tensor_names


def run(data, c, dtype):
    P = {n: torch.tensor(data[n], dtype=dtype, requires_grad=True) for n in tensor_names(c)}
    tokens = torch.tensor(data["tokens"], dtype=torch.int64)
    targets = torch.tensor(data["targets"], dtype=torch.int64)
    loss, logits = forward(P, c, tokens, targets)
    loss.backward()
    lse = torch.logsumexp(logits.double(), dim=-1)
    return loss.item(), lse.detach().numpy(), {n: P[n].grad.double().numpy() for n in P}


def main():
    torch.set_num_threads(2)
    data, meta = read_safetensors(sys.argv[1])
    c = config_from_meta(meta)
    loss32, lse32, g32 = run(data, c, torch.float32)
    loss64, lse64, g64 = run(data, c, torch.float64)
    failures = 0

    def check(ok, msg):
        nonlocal failures
        print(("ok    " if ok else "FAIL  ") + msg)
        failures += 0 if ok else 1

    closs = float(data["loss"][0])
    rel = abs(closs - loss32) / abs(loss32)
    check(rel <= 1e-5, f"loss: C {closs:.9f} torch {loss32:.9f} (rel {rel:.2e}; "
                       f"float64 {loss64:.9f}, C rel {abs(closs - loss64) / loss64:.2e})")
    err = np.abs(data["lse"] - lse32).max() / np.abs(lse32).max()
    check(err <= 1e-5, f"log-sum-exp of the logits: max diff {err:.2e} of the largest "
                       f"(torch fp32 vs float64 {np.abs(lse32 - lse64).max() / np.abs(lse64).max():.2e})")
    worst = 0.0
    for n in tensor_names(c):
        got, ref, truth = data["grad." + n].astype(np.float64), g32[n], g64[n]
        scale = np.abs(ref).max()
        tol = 1e-4 * np.abs(ref) + 1e-4 * scale
        ratio = (np.abs(got - ref) / tol).max()
        worst = max(worst, ratio)
        e_c = np.abs(got - truth).max() / np.abs(truth).max()
        e_t = np.abs(ref - truth).max() / np.abs(truth).max()
        check(ratio <= 1, f"grad {n}: max|diff| {np.abs(got - ref).max():.2e} (scale {scale:.2e}, "
                          f"error/tolerance {ratio:.3f}; vs float64: C {e_c:.1e}, torch {e_t:.1e})")
    kind = ("tied" if c["tie_word_embeddings"] else "untied") + (", llama3 RoPE scaling" if c.get("rope_scaling") else "")
    if c["head_dim"] * c["num_attention_heads"] != c["hidden_size"]:
        kind += f", head_dim {c['head_dim']}"
    print(f"parity: {kind} model, "
          f"{len(tensor_names(c))} gradients, worst error/tolerance {worst:.3f}, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
