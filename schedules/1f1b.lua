-- about: Megatron 1F1B activation-passing pipeline (interleaved with --chunks v*P)
-- 1f1b: Megatron-LM's one-forward-one-backward activation-passing pipeline (Narayanan et al.,
-- SC'21), the baseline weight passing is measured against.
--
-- Each replica is a pipeline of P stages, stage s on local rank s. The weights stay put: stage s
-- holds chunk s (its master is what it computes with) and the activations of the pipeline's
-- M = P*N micro-batches travel instead, forward from stage to stage and their gradients back.
-- Stage s runs Megatron's order: min(P-s-1, M) warm-up forwards, then one forward and one
-- backward alternately, then the remaining backwards, so it never holds more than P-s
-- micro-batches' activations.
--
-- With --chunks C = v*P (v > 1) it is Megatron's interleaved schedule: stage s holds the v
-- "virtual stages" s, s+P, ..., and runs their forwards and backwards in groups of P
-- micro-batches, which shrinks the bubble by v at the price of v times more activation traffic.
--
-- On the turn model (lib/actpass.lua): one compute per stage per turn; an activation or
-- activation gradient made in turn t is sent in turn t+1, overlapping the sender's next
-- compute, and used by the next stage in turn t+2. Each compute is placed as early as its
-- stage's order and its inputs allow. After a chunk's last backward its gradient is
-- all-reduced among the replicas and the stage updates it.
local wp = require("wp")
local actpass = require("actpass")

-- Megatron's non-interleaved order for stage s of P with M micro-batches.
local function order_1f1b(s, P, M)
  local order = {}
  local function F(i) order[#order + 1] = { kind = "F", chunk = s, mb = i } end
  local function B(i) order[#order + 1] = { kind = "B", chunk = s, mb = i } end
  local warmup = math.min(P - s - 1, M)
  for i = 0, warmup - 1 do F(i) end
  for i = 0, M - warmup - 1 do F(warmup + i); B(i) end
  for i = M - warmup, M - 1 do B(i) end
  return order
end

-- Megatron's interleaved order (forward_backward_pipelining_with_interleaving) for stage s of P
-- with v chunks per stage and M micro-batches (a multiple of P). The k-th forward of a stage is
-- of virtual stage (k mod P*v) // P, micro-batch (k // (P*v))*P + k mod P: groups of P
-- micro-batches go through one virtual stage, then the next. Backwards run the virtual stages
-- in reverse.
local function order_interleaved(s, P, v, M)
  local order, total = {}, M * v
  local function op(kind, k)
    local j = (k % (P * v)) // P
    if kind == "B" then j = v - 1 - j end
    order[#order + 1] = { kind = kind, chunk = j * P + s, mb = (k // (P * v)) * P + k % P }
  end
  -- Warm-up: enough forwards that the first backward's gradient can be back in time.
  local warmup = math.min((P - s - 1) * 2 + (v - 1) * P, total)
  for k = 0, warmup - 1 do op("F", k) end
  for k = 0, total - warmup - 1 do op("F", warmup + k); op("B", k) end
  for k = total - warmup, total - 1 do op("B", k) end
  return order
end

return {
  build = function(plan, ctx)
    local P, R = wp.stages(ctx, "1f1b")
    local N = ctx.opts.micro_batches
    local L = ctx.model.layers
    local C = ctx.opts.chunks ~= 0 and ctx.opts.chunks or P
    if C > L then
      wp.bad_option(string.format("--chunks %d", C), string.format("1f1b cuts the model's %d layers into at most %d chunks", L, L))
    end
    if C % P ~= 0 then
      wp.bad_option(string.format("--chunks %d", C), string.format("1f1b expects a multiple of the %d pipeline stages " ..
        "(%d for plain 1F1B, v*%d for interleaved 1F1B with v chunks per stage)", P, P, P))
    end
    local v = C // P
    local M = P * N
    local orders = {}
    for s = 0, P - 1 do
      orders[s] = v == 1 and order_1f1b(s, P, M) or order_interleaved(s, P, v, M)
    end
    local cfg = {
      P = P, R = R, N = N,
      layers = actpass.stage_layers(ctx, L, C),
      stage_of = function(c) return c % P end,
      orders = orders,
      tied = wp.tied(ctx, C),
    }
    actpass.build(plan, cfg)

    local flight = {}
    for s = 0, P - 1 do flight[#flight + 1] = tostring(actpass.in_flight(orders[s])) end
    plan:note(string.format("%s1F1B: %d stage%s%s, %d micro-batches per pipeline; most forward stashes held per stage: %s",
      v > 1 and string.format("interleaved (%d chunks per stage) ", v) or "", P, P > 1 and "s" or "",
      R > 1 and string.format(" x %d replicas", R) or "", M, table.concat(flight, " ")))
    actpass.note_tied(plan, cfg)
  end,
  -- uneven stages (lib/actpass.lua); the search finds a pipeline of more stages than layers impossible
  options = actpass.options,
  traits = actpass.traits({ stages_need_layers = true }),
  label = actpass.label,
}
