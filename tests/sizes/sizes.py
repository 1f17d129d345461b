"""The size arithmetic of tests/sizes/test_sizes.sh, from emitted plan.json files: per rank, the
parameters it owns (its fp32 master buffers, 4 bytes each) and so what it writes in a checkpoint
of its own shard (12 bytes a parameter: the weight and AdamW's m and v), and the elements of every
transfer and collective of its step (the buffer an operation names, or a micro-batch's
activations), cut into pieces of at most INT_MAX elements as common/comm_book.c cuts them.
usage: sizes.py PLAN.json..."""
import json
import sys

INT_MAX = 2**31 - 1
DTYPE_BYTES = {"fp32": 4, "bf16": 2}
COMM = {"SEND", "RECV", "BCAST", "REDUCE", "ALLGATHER", "REDUCE_SCATTER", "ALLREDUCE"}


def pieces(n, limit=INT_MAX):
    """cb_pieces and cb_piece: the lengths of the pieces of n elements."""
    count = (n - 1) // limit + 1 if n else 1
    return [min(limit, n - k * limit) for k in range(count)] if n else [0]


def model_params(m):
    """The model's parameters from its config, as Hugging Face's LlamaForCausalLM counts them."""
    h, f, v, heads, kv = m["hidden_size"], m["intermediate_size"], m["vocab_size"], m["num_attention_heads"], m["num_key_value_heads"]
    hd = h // heads
    layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 3 * h * f + 2 * h
    return v * h + m["num_hidden_layers"] * layer + h + (0 if m["tie_word_embeddings"] else v * h)


def main():
    failed = 0
    print(f"{'model':10} {'strategy':19} {'ranks':>5} {'repl':>4} {'owned/rank (M)':>15} {'ckpt GB/rank':>12} "
          f"{'largest op (M elems)':>20} {'pieces':>6} {'gather part (M)':>15}")
    for path in sys.argv[1:]:
        p = json.load(open(path))
        m = p["model"]
        total = model_params(m)
        act = m["seq_len"] * m["micro_batch_size"] * m["hidden_size"]   # a micro-batch's activations
        owned, largest, worst_piece, most_pieces = [], 0, 0, 0
        for r in p["ranks"]:
            bufs = {b["name"]: b for b in r["buffers"]}
            own = 0
            for b in r["buffers"]:
                if b["master"]:
                    assert b["dtype"] == "fp32" and b["bytes"] % 4 == 0, f"{path}: rank {r['rank']}: master {b}"
                    own += b["bytes"] // 4
            owned.append(own)
            for ops in r["turns"].values():
                for op in ops:
                    w = op.split()
                    if w[0] not in COMM:
                        continue
                    if w[1] in ("A", "G"):   # a micro-batch's activations or their gradient
                        n = act
                    else:                    # the buffer named: a weight, a gradient (the full one of a collective)
                        name = w[3] if w[2] == "->" and w[0] == "ALLGATHER" else w[1] if w[1] in bufs else w[2]
                        b = bufs[name]
                        n = b["bytes"] // DTYPE_BYTES[b["dtype"]]
                    ps = pieces(n)
                    assert sum(ps) == n, (n, ps)
                    largest = max(largest, n)
                    worst_piece = max(worst_piece, max(ps))
                    most_pieces = max(most_pieces, len(ps))
        # the checkpoint gather of today's format: each rank's weights, m and v, one part each
        gather_part = max(owned)
        gather_pieces = len(pieces(gather_part))
        share = total * p["replicas"] / len(owned)
        name = "-".join(path.split("/")[-2].split("-")[:2])   # the plan's folder: MODEL-STRATEGY
        print(f"{name:10} {p['strategy']:19} {p['nranks']:>5} {p['replicas']:>4} {max(owned) / 1e6:>15.1f} "
              f"{12 * max(owned) / 1e9:>12.2f} {largest / 1e6:>20.1f} {most_pieces:>6} {gather_part / 1e6:>15.1f}")
        checks = [
            (sum(owned) == total * p["replicas"], f"the owners hold {sum(owned)} parameters, the model has {total} x {p['replicas']} replicas"),
            (max(owned) <= 2 * share, f"a rank owns {max(owned)} parameters, more than twice its share {share:.0f}"),
            (worst_piece <= INT_MAX and gather_part <= INT_MAX * gather_pieces, f"a piece of {worst_piece} elements passes INT_MAX"),
            (largest > 0, "no transfer found"),
        ]
        for ok, what in checks:
            if not ok:
                print(f"FAIL: {path}: {what}")
                failed += 1
    print(f"sizes: {len(sys.argv) - 1} plans, {failed} failures")
    sys.exit(1 if failed or len(sys.argv) < 3 else 0)


main()
