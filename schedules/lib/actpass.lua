-- Activation-passing pipelines (1F1B, interleaved 1F1B, zero-bubble variants) on the turn model.
--
-- A strategy gives, for each stage of one pipeline, the ORDER of its computes; this library gives
-- each compute the earliest turn the data allows, writes the transfers and the update, and
-- repeats the whole for every replica.
--
--   * Stage s runs on local rank s; chunk c lives on stage stage_of(c) and its W buffer "m<c>" is
--     the stage's master (weights never move). Its gradient collects in "g<c>".
--   * Computes of one stage run one per turn, in the given order.
--   * What a compute produces on one stage for another (the activation A(c+1, i) of a forward,
--     the activation gradient G(c, i) of a backward) is sent in the next turn, overlapping that
--     stage's next compute, and arrives at the end of that turn: the consumer can use it two
--     turns after it was produced. On the same stage it is usable in the next turn.
--   * After a chunk's last backward its gradient is all-reduced among the replicas (the same
--     stage of every pipeline), and the stage updates the chunk.
--
-- Micro-batches: pipeline q runs the M = P*N global micro-batches q*M .. q*M + M - 1; orders name
-- them by their index i in 0..M-1.
--
-- An order is a list of { kind, chunk, mb } with kind
--   "F"  FWD                 needs A(chunk, mb) (chunk > 0)
--   "B"  BWD                 needs the stash of F, and G(chunk+1, mb) (not for the last chunk)
--   "BB" BWD_B               as B, but only the activation gradient
--   "BW" BWD_W               the weight gradient, after BB on the same stage
local wp = require("wp")
local M = {}

-- Gives every op of orders[0..P-1] a turn (op.turn): list scheduling, each op as early as its
-- stage's previous op and its inputs allow. Errors if the orders deadlock.
function M.schedule(orders, P, C)
  -- Where and when each input was made, by chunk*stride + mb: the forward of (c, i) (its output
  -- A(c+1, i) and its stash), the backward or B pass of (c, i) (its input gradient G(c, i)).
  local stride = 0
  for s = 0, P - 1 do
    for _, op in ipairs(orders[s]) do stride = math.max(stride, op.mb + 1) end
  end
  local fwd, bwd, bpass = {}, {}, {}
  local pos, last = {}, {}
  local total, placed = 0, 0
  for s = 0, P - 1 do pos[s], last[s] = 1, -1; total = total + #orders[s] end

  -- The earliest turn for op on stage s given one input made by `made` (nil: not yet made):
  -- on the same stage the next turn; from another stage it is sent in the turn after it was
  -- made and usable in the turn after that.
  local function after(t, made, s)
    if not made then return nil end
    return math.max(t, made.turn + (made.stage == s and 1 or 2))
  end

  repeat
    local progress = false
    for s = 0, P - 1 do
      local order = orders[s]
      while pos[s] <= #order do
        local op = order[pos[s]]
        local c, k = op.chunk, op.chunk * stride + op.mb
        local t = last[s] + 1
        if op.kind == "F" then
          if c > 0 then t = after(t, fwd[k - stride], s) end
        elseif op.kind == "B" or op.kind == "BB" then
          t = after(t, fwd[k], s)
          -- the gradient of this chunk's output, from the next chunk's backward
          if t and c < C - 1 then t = after(t, bwd[k + stride], s) end
        else -- "BW"
          t = after(t, bpass[k], s)
        end
        if not t then break end
        op.turn, op.stage = t, s
        local made = { turn = t, stage = s }
        if op.kind == "F" then fwd[k] = made
        elseif op.kind ~= "BW" then bwd[k] = made end
        if op.kind == "BB" then bpass[k] = made end
        last[s] = t
        pos[s] = pos[s] + 1
        placed = placed + 1
        progress = true
      end
    end
  until not progress
  if placed < total then
    for s = 0, P - 1 do
      local op = orders[s][pos[s]]
      if op then
        error(string.format("the orders deadlock: stage %d waits at %s chunk %d mb %d", s, op.kind, op.chunk, op.mb), 0)
      end
    end
  end
end

-- The most forward stashes (chunk, micro-batch) a stage holds at once under its order.
function M.in_flight(order)
  local n, peak = 0, 0
  for _, op in ipairs(order) do
    if op.kind == "F" then n = n + 1; peak = math.max(peak, n)
    elseif op.kind == "B" or op.kind == "BB" then n = n - 1 end
  end
  return peak
end

-- Builds the plan. cfg:
--   P, R, N      stages per pipeline, replicas, micro-batches per rank
--   layers       layers per chunk (wp.split_layers)
--   stage_of(c)  the stage holding chunk c
--   orders       orders[s] for s = 0..P-1, as above (scheduled here)
--   tied         the model ties its embeddings over the C > 1 chunks (wp.tied)
-- Returns the last turn.
function M.build(plan, cfg)
  local P, R, N = cfg.P, cfg.R, cfg.N
  local C = #cfg.layers
  local Mp = P * N
  local stage_of, orders = cfg.stage_of, cfg.orders
  plan:chunks(cfg.layers)
  M.schedule(orders, P, C)

  -- the turn of each chunk's last weight-gradient compute
  local last_grad = {}
  for s = 0, P - 1 do
    for _, op in ipairs(orders[s]) do
      if op.kind == "B" or op.kind == "BW" then
        last_grad[op.chunk] = math.max(last_grad[op.chunk] or -1, op.turn)
      end
    end
  end

  -- replica 0 (ranks 0 .. P-1); every replica is alike, so plan:copy_replica makes the others
  local final = 0
  do
    local q = 0
    local function rank(s) return q * P + s end
    local function mb(i) return q * Mp + i end
    for c = 0, C - 1 do
      local r = rank(stage_of(c))
      plan:owner(c, r)
      plan:buffer(r, "m" .. c, "W", { chunk = c, master = true })
      plan:buffer(r, "g" .. c, "D", { chunk = c })
    end
    for s = 0, P - 1 do
      plan:place(rank(s), q, s)
      for _, op in ipairs(orders[s]) do
        local c, t, r = op.chunk, op.turn, rank(s)
        local w, g = "m" .. c, "g" .. c
        if op.kind == "F" then
          plan:fwd(r, t, c, mb(op.mb), w)
          -- the output goes on to the next chunk's stage
          if c < C - 1 and stage_of(c + 1) ~= s then
            local to = rank(stage_of(c + 1))
            plan:send(r, t + 1, "A", c + 1, mb(op.mb), to)
            plan:recv(to, t + 1, "A", c + 1, mb(op.mb), r)
          end
        else
          if op.kind == "B" then plan:bwd(r, t, c, mb(op.mb), w, g)
          elseif op.kind == "BB" then plan:bwd_b(r, t, c, mb(op.mb), w)
          else plan:bwd_w(r, t, c, mb(op.mb), g) end
          -- the input gradient goes back to the previous chunk's stage
          if op.kind ~= "BW" and c > 0 and stage_of(c - 1) ~= s then
            local to = rank(stage_of(c - 1))
            plan:send(r, t + 1, "G", c, mb(op.mb), to)
            plan:recv(to, t + 1, "G", c, mb(op.mb), r)
          end
        end
      end
    end
    -- the update: all-reduce over the replicas' copies of the stage, then AdamW. Both in the
    -- turn after the last backward (or in it, with one replica: OPT runs after the compute). A
    -- tied model's two ends are summed first, between the first stage and the last (wp.update_tied).
    local ends = {}
    for c = 0, C - 1 do
      if cfg.tied and (c == 0 or c == C - 1) then
        ends[c] = wp.replica_sum(plan, c, q * P, stage_of(c), P, R, last_grad[c])
      else
        final = math.max(final, wp.update(plan, c, q * P, stage_of(c), P, R, last_grad[c]))
      end
    end
    if cfg.tied then
      final = math.max(final, wp.update_tied(plan, C, rank(stage_of(0)), rank(stage_of(C - 1)), ends[0], ends[C - 1]))
    end
  end
  plan:copy_replica()
  return final
end

-- The summary's words on a tied model (cfg as M.build's), after the strategy's own note.
function M.note_tied(plan, cfg)
  if not cfg.tied then return end
  local C = #cfg.layers
  plan:note(cfg.stage_of(0) == cfg.stage_of(C - 1)
    and "tied embeddings: the head mirrors the embedding, TIE sums their gradients on the one stage holding both"
    or "tied embeddings: the head mirrors the embedding, TIE_ALLREDUCE sums their gradients between the first stage and the last")
end

-- What 1f1b and zb1 declare (docs/strategies.md): uneven stages, Megatron's
-- --decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers: the first and the
-- last chunk (stage, without interleaving) given fewer layers, the rest cut evenly over the
-- others (wp.split_layers_ends). The search tries each end one layer lighter than the even cut.
local function ends_search(c)
  local C = c.chunks ~= 0 and c.chunks or math.min(c.ranks, c.layers)
  local base = c.layers // math.max(C, 1)
  if C >= 3 and base >= 2 then return { 0, base - 1 } end
  return { 0 }
end

M.options = {
  { name = "first_stage_layers", type = "int", min = 1, max = 1 << 20, default = 0, search = ends_search,
    help = "layers of the first chunk (its stage also holds the embedding); the other layers cut evenly over the " ..
      "other chunks (default: the even cut)" },
  { name = "last_stage_layers", type = "int", min = 1, max = 1 << 20, default = 0, search = ends_search,
    help = "layers of the last chunk (its stage also holds the final norm, the LM head and the loss); the other " ..
      "layers cut evenly over the other chunks (default: the even cut)" },
}

-- The chunks' layers of ctx's options.
function M.stage_layers(ctx, L, C)
  return wp.split_layers_ends(L, C, ctx.opts.first_stage_layers, ctx.opts.last_stage_layers)
end

-- Traits for the search's bounds (generator/search/bounds.c): activation passing, stage s holding
-- chunks s, s + P, ...; the ends' layers as the options give them.
function M.traits(t)
  return function(o)
    return { passing = "activations", split_backward = t.split or false, stages_need_layers = t.stages_need_layers or false,
             first_stage_layers = o.first_stage_layers, last_stage_layers = o.last_stage_layers }
  end
end

-- compare's words: /first1, /last1 where the search moved them off the flags.
function M.label(o, how, flags)
  local f, l = o.first_stage_layers or 0, o.last_stage_layers or 0
  local mf = f ~= 0 and f ~= (flags.first_stage_layers or 0)
  local ml = l ~= 0 and l ~= (flags.last_stage_layers or 0)
  if how == "row" or how == "auto-row" then
    return (mf and ("/first" .. f) or "") .. (ml and ("/last" .. l) or "")
  elseif how == "picked-after" then
    return (f ~= 0 and string.format(", first stage %d layer%s", f, f > 1 and "s" or "") or "") ..
      (l ~= 0 and string.format(", last stage %d layer%s", l, l > 1 and "s" or "") or "")
  elseif how == "json" or how == "auto-json" then
    local t = {}
    if f ~= 0 then t[#t + 1] = { "first_stage_layers", f } end
    if l ~= 0 then t[#t + 1] = { "last_stage_layers", l } end
    return t
  end
  return ""
end

return M
