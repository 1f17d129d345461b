-- about: zero-bubble weight passing: two passes per turn, F with a B or a W (WeiPipe's WZB1)
-- weipipe-zb1: WeiPipe's first zero-bubble weight pipeline (WZB1), which the paper sketches and
-- leaves unimplemented. The ring of weipipe-interleave (lib/weipipe.lua: every rank keeps its own
-- micro-batches, the weights travel r -> r+1, each chunk's gradient follows its last pass round
-- the ring to the owner), with the backward split into a B pass (input gradient, needs the
-- weights: the backward weight stream follows the B passes) and a W pass (weight gradient, needs
-- no weights: the gradient chain follows the W passes), and every turn holding two passes.
--
-- A rank's micro-batches go in pairs (a, b); pair p, rank r, turn r + 3Cp + ...:
--     0 .. C-1     forward of a, chunk k          with the W pass of the previous pair's b
--     C .. 2C-1    forward of b, chunk k          with the B pass of a, chunk C-1-k
--     2C .. 3C-1   B pass of b, chunk C-1-k       with the W pass of a, chunk C-1-k
-- and the last pair's b finishes its W passes alone (with an odd N the last "pair" is a alone).
-- So once the ring is full every turn is F+W, F+B or B+W: two units of work with F = B = W.
--
-- Why it has less bubble than weipipe-interleave: the ring makes rank r run rank r-1's turn one
-- turn later, and a rank's turn t waits for its neighbours' turn t (the transfers of one turn
-- meet there). weipipe-interleave's turns hold F, F+B or B (1, 3 or 2 units), so neighbours in
-- different phases wait for each other; here all but the fill and the drain hold two units, and
-- the bubble is the fill and drain: at most 2(P-1) units in 3NC + 2(P-1), which is
-- (P-1)/(1.5NC+P-1) (C chunks, N micro-batches per rank); weipipe-zb2, with one pass per turn,
-- halves it again.
--
-- Choices the paper leaves open:
--   * the pairing above (a forward with a B or a W, as the paper says, and B with W where the
--     forwards of a pair are done), so rounds of two micro-batches overlap: a rank holds up to
--     two micro-batches' stashes of the whole model and one B-to-W keep (runtime/cpu/model.h)
--     at once (a turn runs its W pass before its B pass, lib/weipipe.lua): 2.41 times one
--     micro-batch's stash, where the paper estimates 1.5 micro-batches' activations, which a keep
--     of half a stash would give; ours is 0.41 of it (docs/strategies.md, "Memory against the
--     papers");
--   * each pass has its stream (forward weights, backward weights) or chain (gradient) one hop
--     per turn, and every micro-batch's streams start afresh from the chunk's owner (the pairs'
--     passes are not evenly spaced, so a stream cannot circulate without end);
--   * owners as weipipe's: chunk k at rank (P-k) mod P.
local weipipe = require("weipipe")

-- Micro-batch j of a rank is pair j // 2, a (even j) or b (odd j).
local function pair(j) return j // 2, j % 2 end

return {
  build = function(plan, ctx)
    weipipe.build(plan, ctx, {
      rounds = function(N) return N end,
      round_mbs = function(j, N) return { j } end,
      turns = {
        f = function(j, k, C) local p, x = pair(j); return 3 * C * p + x * C + k end,
        b = function(j, c, C) local p, x = pair(j); return 3 * C * p + C + x * C + (C - 1 - c) end,
        w = function(j, c, C) local p, x = pair(j); return 3 * C * p + 2 * C + x * C + (C - 1 - c) end,
        period = function(C) return C end,
        restart = true,
      },
    })
  end,
  options = { weipipe.options.replicate_ends },
  traits = weipipe.traits({ split = true }),
  label = weipipe.label,
}
