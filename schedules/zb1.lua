-- about: zero-bubble ZB-H1 activation passing: backward split into B and W, 1F1B's micro-batches in flight, a third of its bubble
-- zb1: ZB-H1 of "Zero Bubble Pipeline Parallelism" (Qi et al., ICLR 2024), the strongest
-- activation-passing baseline of the WeiPipe and zero-bubble papers' tables.
--
-- As 1f1b (schedules/1f1b.lua): each replica is a pipeline of P stages, stage s holds chunk s and
-- the activations travel. The backward is split in two (BWD_B: the input gradient, which the
-- previous stage waits for; BWD_W: the weight gradient, which nobody waits for), and the W
-- passes fill the bubbles 1F1B leaves. With F, B and W taking one unit each, 1F1B's bubble is
-- (P-1)(F+B+W) per stage and ZB-H1's (P-1)(F+B-W): a third of it, so with M micro-batches per
-- pipeline the bubble ratios are (P-1)/(M+P-1) and (P-1)/(3M+P-1) (M >= P).
--
-- The order of stage s (phases below):
--   warm-up   P-s forwards (1F1B's P-s-1, and the first forward of its steady state)
--   ramp      s times: a B, then a forward. The W passes wait: a stage later in the pipeline
--             gets its first gradient sooner, and holding its W passes back is what lets every
--             stage run its last ones while the final gradients travel upstream.
--   steady    B, W, F until the forwards run out, then B, W until the B passes do
--   drain     the remaining W passes
-- A micro-batch's activations live from its F to its W, so every stage holds at most P
-- micro-batches (P-s from the warm-up, s more from the ramp): 1F1B's stage 0 holds P too. The
-- memory is 1F1B's only if a micro-batch waiting for its W holds no more than one waiting for
-- its B, as the paper counts a GPT layer; here it holds 1.41 times as much (docs/strategies.md,
-- "Memory against the papers"), and the last stage holds P of them after its ramp.
--
-- Choices the paper leaves open (ZB-H1 is drawn, not specified, in its figure 3):
--   * the steady state's order is B, W, F (after B, the W of the oldest micro-batch, then the
--     next forward); B, F, W gives the same bubble but holds one more micro-batch from stage 1 on;
--   * between BWD_B and BWD_W a stage keeps the stash and what the B pass keeps for W
--     (runtime/cpu/model.h: three output gradients per layer, dqkv over the stash's qkv, on the
--     last stage a copy of the LM head's weight); the verifier counts both. Holding fewer W
--     passes back on the last stages saves memory but not bubble (one fewer from stage 2 on:
--     the last stage's peak 6.22 -> 5.64 GiB on 1x8 A800 llama-h1024, the bubble at P = 4,
--     N = 1 with free communication 0.20 -> 0.25), so the paper's delays stay;
--   * M < P (fewer micro-batches than stages) runs the same phases, shortened; the formula's
--     bound does not apply there (the pipeline is never full);
--   * plain ZB-H1 only: one chunk per stage (--chunks P).
-- Turns, transfers and the update come from lib/actpass.lua, as for 1f1b.
local wp = require("wp")
local actpass = require("actpass")

-- The order of stage s of P with M micro-batches: the phases above.
local function order_zbh1(s, P, M)
  local order = {}
  local nf, nb, nw = 0, 0, 0
  local function F() if nf < M then order[#order + 1] = { kind = "F", chunk = s, mb = nf }; nf = nf + 1 end end
  local function B() if nb < nf then order[#order + 1] = { kind = "BB", chunk = s, mb = nb }; nb = nb + 1 end end
  local function W() if nw < nb then order[#order + 1] = { kind = "BW", chunk = s, mb = nw }; nw = nw + 1 end end
  -- warm-up
  for _ = 1, P - s do F() end
  -- ramp
  for _ = 1, s do B(); F() end
  -- steady
  while nb < M do B(); W(); F() end
  -- drain
  while nw < M do W() end
  return order
end

return {
  build = function(plan, ctx)
    local P, R = wp.stages(ctx, "zb1")
    local N = ctx.opts.micro_batches
    local L = ctx.model.layers
    local C = ctx.opts.chunks ~= 0 and ctx.opts.chunks or P
    if C ~= P then
      wp.bad_option(string.format("--chunks %d", C), string.format("zb1 runs one chunk per stage (%d)", P))
    end
    local M = P * N
    local orders = {}
    for s = 0, P - 1 do orders[s] = order_zbh1(s, P, M) end
    local cfg = {
      P = P, R = R, N = N,
      layers = actpass.stage_layers(ctx, L, C),
      stage_of = function(c) return c end,
      orders = orders,
      tied = wp.tied(ctx, C),
    }
    actpass.build(plan, cfg)

    -- the most micro-batches a stage holds at once (from F to W)
    local held = {}
    for s = 0, P - 1 do
      local n, peak = 0, 0
      for _, op in ipairs(orders[s]) do
        if op.kind == "F" then n = n + 1; peak = math.max(peak, n) elseif op.kind == "BW" then n = n - 1 end
      end
      held[#held + 1] = tostring(peak)
    end
    plan:note(string.format("ZB-H1: %d stage%s%s, %d micro-batches per pipeline; most micro-batches held per stage (forward to W): %s",
      P, P > 1 and "s" or "", R > 1 and string.format(" x %d replicas", R) or "", M, table.concat(held, " ")))
    actpass.note_tied(plan, cfg)
  end,
  options = actpass.options,
  traits = actpass.traits({ split = true }),
  label = actpass.label,
}
