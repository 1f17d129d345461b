"""The PyTorch side of `make bench-cpu`: forward + backward of the LLaMA model of
tests/torch/llama.py on one micro-batch, the median of several runs, with a given thread count.
With --step, whole training steps instead: forward, backward, global-norm clipping to 1 and AdamW
(weight decay 0.1 except on norms), as build/wp-ref does.
usage: bench_torch.py [--step] THREADS H LAYERS HEADS KV_HEADS FFN VOCAB SEQ MBS [RUNS]"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
import torch  # noqa: E402
from llama import forward, init_params  # noqa: E402


def main():
    args = sys.argv[1:]
    step = "--step" in args
    a = [int(x) for x in args if x != "--step"]
    threads, H, L, nh, nkv, Fd, V, S, G = a[:9]
    runs = a[9] if len(a) > 9 else 5
    torch.set_num_threads(threads)
    c = {"hidden_size": H, "num_hidden_layers": L, "num_attention_heads": nh,
         "num_key_value_heads": nkv, "intermediate_size": Fd, "vocab_size": V,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": 0}
    P = {n: t.requires_grad_() for n, t in init_params(c).items()}
    T = G * S
    tokens = (torch.arange(T) * 7 + 3).remainder(V).view(G, S)
    targets = (torch.arange(T) * 13 + 1).remainder(V).view(G, S)
    decay = [p for n, p in P.items() if not n.endswith("norm.weight")]
    no_decay = [p for n, p in P.items() if n.endswith("norm.weight")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    fwd, bwd, tot = [], [], []
    for r in range(runs + 1):   # run 0 warms up
        for p in P.values():
            p.grad = None
        t0 = time.perf_counter()
        loss, _ = forward(P, c, tokens, targets)
        t1 = time.perf_counter()
        loss.backward()
        if step:
            torch.nn.utils.clip_grad_norm_(P.values(), 1.0)
            opt.step()
        t2 = time.perf_counter()
        if r:
            fwd.append(t1 - t0); bwd.append(t2 - t1); tot.append(t2 - t0)
    med = lambda x: sorted(x)[len(x) // 2] * 1e3
    if step:
        print(f"torch step: threads {torch.get_num_threads()} median step {med(tot):.2f} ms (median of {runs})")
        return
    print(f"torch: threads {torch.get_num_threads()} loss {loss.item():.6f} forward {med(fwd):.2f} ms "
          f"backward {med(bwd):.2f} ms total {med(tot):.2f} ms (median of {runs}; torch {torch.__version__})")


if __name__ == "__main__":
    main()
