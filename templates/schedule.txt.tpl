${P.first_hash}
${P.header_hash}
#
# One line per rank and turn:  rR tT: COMPUTE | TRANSFERS | LOCAL   ("-" for nothing)
#   compute    Fc.m forward of chunk c on micro-batch m; Bc.m backward; bc.m / wc.m its
#              input-gradient and weight-gradient halves (zero-bubble strategies)
#   transfers  Wc weights of chunk c, Dc its weight gradient, Wc[k/n] shard k of n;
#              Ac.m the input of chunk c for micro-batch m, Gc.m its gradient;
#              send X>rP to rank P, recv X<rP from rank P;
#              bcast/reduce X@gG:rK over group G with root rank K, allreduce/allgather X@gG,
#              rscatter X@gG (reduce-scatter)
#   local      acc Dc (gradient added), copy Wc (master weights copied), opt c (AdamW on chunk c),
#              free Wc (buffer released)
# A turn posts its transfers, computes while they move, waits for them, then runs its local
# operations. The rank sources (rank_*.c) say the same with one commented call per operation.

