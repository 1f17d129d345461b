"""PyTorch parity of ring attention (runtime/cpu/attention_block.c through tests/ring_fixture.h):
reads what tests/torch/ring_dump.c wrote and redoes it with full causal attention in PyTorch,
explicit softmax, Hugging Face's repeat_kv for grouped-query heads. Compared: the ring's output,
its log-sum-exp and every element of dq, dk and dv (the backward through the blocks); the two
blocks alone against attention of their queries on their keys (causal for the diagonal block,
unmasked for the full one). Tolerances (fp32 against fp32, as tests/torch/parity.py states its):
outputs and lse within 1e-5 * the tensor's largest; gradients within 1e-4 * |torch| + 1e-4 *
max|torch over the tensor|. The float64 run is the truth, printed for information.
usage: ring_parity.py DUMP.safetensors"""
import math
import sys

import numpy as np
import torch

from llama import read_safetensors


def attention(q, k, v, causal):
    """out [n, heads*hd], lse [heads, n] of q [n, heads, hd] on k, v [m, kv, hd]."""
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)   # repeat_kv: head h reads kv head h // rep
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("nhd,mhd->hnm", q, k) / math.sqrt(q.shape[2])
    if causal:
        n, m = q.shape[0], k.shape[0]
        mask = torch.ones(n, m, dtype=torch.bool).tril(m - n)
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    out = torch.einsum("hnm,mhd->nhd", torch.softmax(s, dim=-1), v)
    return out.reshape(q.shape[0], -1), lse


def split(qkv, heads, kv, hd):
    S = qkv.shape[0]
    q = qkv[:, :heads * hd].reshape(S, heads, hd)
    k = qkv[:, heads * hd:(heads + kv) * hd].reshape(S, kv, hd)
    v = qkv[:, (heads + kv) * hd:].reshape(S, kv, hd)
    return q, k, v


def run(data, heads, kv, hd, dtype):
    qkv = torch.tensor(data["qkv"], dtype=dtype, requires_grad=True)
    out, lse = attention(*split(qkv, heads, kv, hd), causal=True)
    out.backward(torch.tensor(data["dout"], dtype=dtype))
    return out.detach().double().numpy(), lse.detach().double().numpy(), qkv.grad.double().numpy()


def main():
    torch.set_num_threads(2)
    data, meta = read_safetensors(sys.argv[1])
    C, heads, kv, hd = (int(meta[k]) for k in ("C", "heads", "kv_heads", "head_dim"))
    S = data["qkv"].shape[0]
    L = S // (2 * C)
    failures = 0

    def check(ok, msg):
        nonlocal failures
        print(("ok    " if ok else "FAIL  ") + msg)
        failures += 0 if ok else 1

    def close(name, got, ref, truth):
        err = np.abs(got - ref).max() / np.abs(ref).max()
        check(err <= 1e-5, f"{name}: max diff {err:.2e} of the largest (C vs float64 "
                           f"{np.abs(got - truth).max() / np.abs(truth).max():.1e})")

    out32, lse32, g32 = run(data, heads, kv, hd, torch.float32)
    out64, lse64, g64 = run(data, heads, kv, hd, torch.float64)
    close("ring out", data["out"], out32, out64)
    close("ring lse", data["lse"], lse32, lse64)
    qd, kd = heads * hd, kv * hd
    for name, lo, hi in (("dq", 0, qd), ("dk", qd, qd + kd), ("dv", qd + kd, qd + 2 * kd)):
        got, ref, truth = data["dqkv"][:, lo:hi].astype(np.float64), g32[:, lo:hi], g64[:, lo:hi]
        scale = np.abs(ref).max()
        ratio = (np.abs(got - ref) / (1e-4 * np.abs(ref) + 1e-4 * scale)).max()
        check(ratio <= 1, f"ring {name}: max|diff| {np.abs(got - ref).max():.2e} (scale {scale:.2e}, "
                          f"error/tolerance {ratio:.3f}; C vs float64 {np.abs(got - truth).max() / np.abs(truth).max():.1e})")
    q, k, v = split(torch.tensor(data["qkv"], dtype=torch.float64), heads, kv, hd)
    for name, rows, causal in (("diag", slice(0, L), True), ("full", slice(L, 2 * L), False)):
        o, l = attention(q[rows], k[:L], v[:L], causal)
        close(f"{name} block out", data[name + ".out"], o.numpy(), o.numpy())
        close(f"{name} block lse", data[name + ".lse"], l.numpy(), l.numpy())
    print(f"ring parity: C={C} S={S} heads={heads} kv_heads={kv} head_dim={hd}: "
          + ("all match" if not failures else f"{failures} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
