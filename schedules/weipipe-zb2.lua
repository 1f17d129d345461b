-- about: zero-bubble weight passing: forward, B and W in sequence, one pass per turn (WeiPipe's WZB2)
-- weipipe-zb2: WeiPipe's second zero-bubble weight pipeline (WZB2), which the paper sketches and
-- leaves unimplemented. The ring of weipipe-interleave (lib/weipipe.lua: every rank keeps its own
-- micro-batches, the weights travel r -> r+1, each chunk's gradient follows its last pass round
-- the ring to the owner), with the backward split into a B pass (input gradient, needs the
-- weights) and a W pass (weight gradient, needs none), and one pass per turn:
--
--   round j (one micro-batch per rank), rank r, turn r + 3Cj + ...
--     forward     k            chunk k = 0 .. C-1        forward weight stream
--     B pass      C + (C-1-c)  chunk c = C-1 .. 0        backward weight stream
--     W pass      2C + (C-1-c) chunk c = C-1 .. 0        the gradient chain, which collects
--                                                        each rank's W and ends at the owner
--
-- Why it has (almost) no bubble: the ring makes rank r run rank r-1's turn one turn later, and
-- a rank's turn t waits for its neighbours' turn t (the transfers of one turn meet there). When
-- every turn holds the same work, that costs nothing but the fill: with F = B = W (the papers'
-- unit) each of the 3NC turns of a rank is one unit and the step is 3NC + P - 1 units, so the
-- bubble is (P-1)/(3NC+P-1) (C chunks, N micro-batches per rank), ZB-H1's (P-1)/(3M+P-1) for
-- M = NC. weipipe-interleave's turns hold F, F+B or B (1, 3 or 2 units), and neighbours at
-- different phases wait for each other: about 2(P-1) units per rank at P = 4, more at P = 8.
--
-- Choices the paper leaves open:
--   * the order of a round is F of every chunk, then B of every chunk (in reverse), then W of
--     every chunk (in reverse), one per turn; rounds do not overlap. So a rank holds one
--     micro-batch's stash of the whole model, and between its B and W passes the B-to-W keep of
--     every chunk (runtime/cpu/model.h): 1.41 times one micro-batch's stash (docs/strategies.md,
--     "Memory against the papers"), where ZB-H1's stage 0 holds P micro-batches of 1/P of the
--     model, one micro-batch's stash;
--   * the gradient chain follows the W passes, not the B passes: the paper's "last rank gathers
--     the gradients" is the chain's last hop (rank P-1), which hands the sum to the chunk's owner
--     (weipipe's owners: chunk k at rank (P-k) mod P, so chunk 0's is rank 0, next to rank P-1:
--     it updates chunk 0 first, ready for the next step's first forward);
--   * three weight-sized streams move one hop per turn as in weipipe-interleave, but a turn is a
--     third as long: the same bytes per second of compute, so a slow link hides less of them;
--   * fewer chunks than ranks (C < P/3) start each round's streams from the owner, as
--     lib/weipipe.lua does.
local weipipe = require("weipipe")

return {
  build = function(plan, ctx)
    weipipe.build(plan, ctx, {
      rounds = function(N) return N end,
      round_mbs = function(j, N) return { j } end,
      turns = {
        f = function(j, k, C) return 3 * C * j + k end,
        b = function(j, c, C) return 3 * C * j + C + (C - 1 - c) end,
        w = function(j, c, C) return 3 * C * j + 2 * C + (C - 1 - c) end,
        period = function(C) return 3 * C end,
        restart = true,
      },
    })
  end,
  options = { weipipe.options.replicate_ends },
  traits = weipipe.traits({ split = true }),
  label = weipipe.label,
}
