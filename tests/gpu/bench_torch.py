"""One training step of the LLaMA-style model of bench_step.cu in PyTorch, timed the same way, for
comparison: hidden 2048, 16 layers, 16 heads, head_dim 128, ffn 5632, vocabulary 32000, micro-batch
1, sequences of 4096 and 16384 tokens. fp32 master weights with bf16 autocast (each product's
weights cast to bf16 per step: what bench_step's bf16 working copy is), fused q/k/v and gate/up
projections as in runtime/cuda, F.scaled_dot_product_attention (causal; flash attention on these
GPUs), the loss on bf16 logits computed by F.cross_entropy in fp32, fused AdamW, the layers under
torch.compile where it works (eager if it fails, said on the line). Prints the line format of
bench_step.cu, with the same model-FLOPs formula (see there) and peak table, and the step's peak
of allocated memory. --checkpoint runs each layer under activation checkpointing
(torch.utils.checkpoint, non-reentrant): its input kept, its activations recomputed in the
backward, as the trainers' --recompute does (tests/gpu/run.sh's long-sequence step compares them).

Run (on a machine with a GPU and PyTorch):
    python3 tests/gpu/bench_torch.py [--seq N]... [--layers N] [--steps N] [--warmup N] [--peak-tflops X] [--no-compile] [--checkpoint]
Without PyTorch or without a CUDA device it says so and exits 0."""
import argparse
import sys

PEAKS = [("H100 PCIe", 756), ("H100 NVL", 835), ("H100", 989), ("H200", 989), ("H800", 989),
         ("GH200", 989), ("A100", 312), ("A800", 312), ("L40S", 362), ("L4", 121), ("A10G", 70),
         ("A10", 125), ("RTX 4090", 165), ("RTX 3090", 71)]

H, HEADS, HD, FFN, VOCAB, EPS, THETA = 2048, 16, 128, 5632, 32000, 1e-5, 10000.0


def build(torch, layers, seq, checkpoint=False):
    nn, F = torch.nn, torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(H))

        def forward(self, x):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * self.weight.to(x.dtype)

    inv = 1.0 / (THETA ** (torch.arange(0, HD, 2, dtype=torch.float32) / HD))
    ang = torch.arange(seq, dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).cuda()
    sin = torch.cat([ang.sin(), ang.sin()], -1).cuda()

    def rope(x):   # x [B, heads, S, hd], rotate-half
        x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
        return (x * cos + torch.cat([-x2, x1], -1) * sin).to(x.dtype)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = RMSNorm(), RMSNorm()
            self.qkv = nn.Linear(H, 3 * H, bias=False)
            self.o = nn.Linear(H, H, bias=False)
            self.gu = nn.Linear(H, 2 * FFN, bias=False)
            self.down = nn.Linear(FFN, H, bias=False)

        def forward(self, x):
            B, S, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, S, 3, HEADS, HD).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(B, S, H))
            g, u = self.gu(self.ln2(x)).chunk(2, -1)
            return x + self.down(F.silu(g) * u)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, H)
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])
            self.norm = RMSNorm()
            self.head = nn.Linear(H, VOCAB, bias=False)

        def forward(self, tok, tgt):
            x = self.embed(tok)
            for layer in self.layers:
                if checkpoint:
                    x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
                else:
                    x = layer(x)
            logits = self.head(self.norm(x))
            return F.cross_entropy(logits.float().view(-1, VOCAB), tgt.view(-1))

    model = Model().cuda()
    for name, p in model.named_parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.02)
    return model


def model_flops(layers, seq):
    """bench_step.cu's formula: 6 N tokens (N: the layers' matrices and the LM head) + causal attention."""
    n_mm = layers * (H * 3 * H + H * H + 3 * FFN * H) + VOCAB * H
    return 6.0 * n_mm * seq + 12.0 * layers * seq * seq * H / 2.0


def bench(torch, seq, layers, steps, warmup, peak, compile_, device, checkpoint=False):
    torch.manual_seed(0)
    model = build(torch, layers, seq, checkpoint)
    how = "eager"
    if compile_:
        try:
            for i, layer in enumerate(model.layers):
                model.layers[i] = torch.compile(layer)
            how = "torch.compile"
        except Exception as e:  # compile unavailable: eager, and say so
            how = f"eager (torch.compile failed: {type(e).__name__})"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    text = torch.randint(0, VOCAB, (1, seq + 1), device="cuda", generator=g)
    tok, tgt = text[:, :-1].contiguous(), text[:, 1:].contiguous()

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(tok, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9, foreach=True)  # the norm, as bench_step's sumsq
        opt.step()
        return loss

    try:
        for _ in range(warmup):
            step()
        if how == "torch.compile":
            torch.cuda.synchronize()
    except Exception as e:
        if how != "torch.compile":
            raise
        print(f"bench_torch: torch.compile failed at run time ({type(e).__name__}: {e}); eager instead", file=sys.stderr)
        return bench(torch, seq, layers, steps, warmup, peak, False, device, checkpoint)
    torch.cuda.reset_peak_memory_stats()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(steps):
        loss = step()
    e1.record()
    torch.cuda.synchronize()
    step_s = e0.elapsed_time(e1) / 1000.0 / steps
    flops = model_flops(layers, seq)
    mfu = f"{100.0 * flops / step_s / (peak * 1e12):.1f}%" if peak else "n/a "
    print(f"bench pytorch seq {seq}: step {step_s:.4f} s, {seq / step_s:.0f} tokens/s, MFU {mfu} (model "
          f"{flops:.3g} FLOP/step, peak {peak:.0f} TFLOP/s bf16, {device}; loss {loss.item():.4f}; {how}"
          f"{', activation checkpointing' if checkpoint else ''}; {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB allocated at most)",
          flush=True)
    del model, opt
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", type=int, action="append")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--checkpoint", action="store_true", help="each layer under activation checkpointing")
    a = ap.parse_args()
    try:
        import torch
        import torch.utils.checkpoint
    except ImportError:
        print("bench_torch: PyTorch is not importable here; nothing run")
        return 0
    if not torch.cuda.is_available():
        print("bench_torch: no CUDA device here; nothing run")
        return 0
    device = torch.cuda.get_device_name(0)
    peak = a.peak_tflops or next((p for n, p in PEAKS if n in device), 0)
    if not peak:
        print(f"bench_torch: no peak known for {device}: MFU not computed (give --peak-tflops)")
    for seq in a.seq or [4096, 16384]:
        try:
            bench(torch, seq, a.layers, a.steps, a.warmup, peak, not a.no_compile, device, a.checkpoint)
        except torch.cuda.OutOfMemoryError:
            print(f"bench pytorch seq {seq}: skipped, out of memory")
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
