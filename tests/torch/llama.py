"""The LLaMA decoder in plain PyTorch, written from Hugging Face's LlamaForCausalLM (eager
attention, rotate-half RoPE, repeat_kv for grouped-query attention) as a function of a dict of
tensors named as Hugging Face names them. The PyTorch side of the parity test and of the CPU
benchmark; no dependency on transformers."""
import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    """(tensors as numpy arrays, metadata dict) of a safetensors file."""
    dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        arr = np.frombuffer(data[8 + n + b:8 + n + e], dtype=dtypes[t["dtype"]])
        out[name] = arr.reshape(t["shape"]).copy()
    return out, meta


def config_from_meta(meta):
    ints = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "vocab_size", "tie_word_embeddings", "seq", "mbs"]
    c = {k: int(meta[k]) for k in ints}
    c["rms_norm_eps"] = float(meta["rms_norm_eps"])
    c["rope_theta"] = float(meta["rope_theta"])
    c["head_dim"] = int(meta.get("head_dim", c["hidden_size"] // c["num_attention_heads"]))
    if float(meta.get("rope_factor", 0)) != 0:
        c["rope_scaling"] = {"rope_type": "llama3", "factor": float(meta["rope_factor"]),
                             "low_freq_factor": float(meta["rope_low_freq_factor"]),
                             "high_freq_factor": float(meta["rope_high_freq_factor"]),
                             "original_max_position_embeddings": int(meta["rope_original_max_position_embeddings"])}
    return c


def head_dim(c):
    # LlamaConfig: head_dim when given (heads * head_dim may differ from hidden_size)
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def tensor_names(c):
    names = ["model.embed_tokens.weight"]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        names += [p + "input_layernorm.weight", p + "self_attn.q_proj.weight",
                  p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight",
                  p + "self_attn.o_proj.weight", p + "post_attention_layernorm.weight",
                  p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"]
    names.append("model.norm.weight")
    if not c["tie_word_embeddings"]:
        names.append("lm_head.weight")
    return names


def init_params(c, dtype=torch.float32, seed=0):
    """N(0, 0.02) matrices, norms at 1 (for the benchmark; the values do not matter there)."""
    g = torch.Generator().manual_seed(seed)
    H, Fd, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = head_dim(c)
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    shapes = {"input_layernorm": (H,), "q_proj": (q, H), "k_proj": (kv, H), "v_proj": (kv, H),
              "o_proj": (H, q), "post_attention_layernorm": (H,), "gate_proj": (Fd, H),
              "up_proj": (Fd, H), "down_proj": (H, Fd)}
    P = {}
    for n in tensor_names(c):
        if n.endswith("norm.weight"):
            P[n] = torch.ones(H, dtype=dtype)
        elif n in ("model.embed_tokens.weight", "lm_head.weight"):
            P[n] = torch.randn(V, H, generator=g, dtype=dtype) * 0.02
        else:
            P[n] = torch.randn(shapes[n.split(".")[-2]], generator=g, dtype=dtype) * 0.02
    return P


def rmsnorm(x, w, eps):
    # LlamaRMSNorm: in fp32 (here: in the tensors' dtype), weight times the normalised input
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def llama3_inv_freq(inv_freq, r):
    # Llama 3.1's rule (Meta's reference code; transformers' rope_type "llama3"), in fp32: a
    # wavelength 2 pi / f longer than original / low_freq_factor is stretched by factor, one
    # shorter than original / high_freq_factor kept, and one between the two gets a blend of
    # both, by how far original / wavelength lies from low_freq_factor towards high_freq_factor
    orig, low, high, factor = (r["original_max_position_embeddings"], r["low_freq_factor"],
                               r["high_freq_factor"], r["factor"])
    wavelen = 2 * math.pi / inv_freq
    t = (orig / wavelen - low) / (high - low)
    blend = (1 - t) * inv_freq / factor + t * inv_freq
    out = torch.where(wavelen > orig / low, inv_freq / factor, blend)
    return torch.where(wavelen < orig / high, inv_freq, out)


def rope_cos_sin(S, hd, theta, dtype, scaling=None):
    # LlamaRotaryEmbedding: inv_freq in fp32, then cos/sin of pos * inv_freq over both halves
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    if scaling:
        inv_freq = llama3_inv_freq(inv_freq, scaling)
    freqs = torch.outer(torch.arange(S, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(P, c, tokens, targets):
    """Mean cross-entropy and the logits. tokens, targets: int64 [G, S]."""
    G, S = tokens.shape
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, eps = head_dim(c), c["rms_norm_eps"]
    emb = P["model.embed_tokens.weight"]
    cos, sin = rope_cos_sin(S, hd, c["rope_theta"], emb.dtype, c.get("rope_scaling"))
    mask = torch.full((S, S), float("-inf"), dtype=emb.dtype).triu(1)
    x = emb[tokens]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, P[p + "input_layernorm.weight"], eps)
        q = F.linear(h, P[p + "self_attn.q_proj.weight"]).view(G, S, nh, hd).transpose(1, 2)
        k = F.linear(h, P[p + "self_attn.k_proj.weight"]).view(G, S, nkv, hd).transpose(1, 2)
        v = F.linear(h, P[p + "self_attn.v_proj.weight"]).view(G, S, nkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=1)   # repeat_kv
        v = v.repeat_interleave(nh // nkv, dim=1)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd) + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).reshape(G, S, nh * hd)
        x = x + F.linear(a, P[p + "self_attn.o_proj.weight"])
        h = rmsnorm(x, P[p + "post_attention_layernorm.weight"], eps)
        m = F.silu(F.linear(h, P[p + "mlp.gate_proj.weight"])) * F.linear(h, P[p + "mlp.up_proj.weight"])
        x = x + F.linear(m, P[p + "mlp.down_proj.weight"])
    x = rmsnorm(x, P["model.norm.weight"], eps)
    head = emb if c["tie_word_embeddings"] else P["lm_head.weight"]
    logits = F.linear(x, head)
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
    return loss, logits
