-- WeiPipe's weight-passing pipelines (PPoPP 2025), naive and interleaved, on P ranks per replica.
--
-- Every rank keeps its own micro-batches for the whole model; weights travel around the ring
-- r -> r+1 instead of activations. Rank r works on micro-batch round j as
--     forward  of chunk k at turn  r + j*C + k
--     backward of chunk c at turn  r + (j+1)*C + (C-1-c)
-- so the forward weights of chunk k pass rank 0 at j*C + k and then one rank per turn, and so do
-- the backward weights (a second stream). The gradient of chunk c follows the backward weights:
-- each rank adds its contribution as it passes, and the sum ends at the chunk's owner, which
-- updates it (with replicas: after an all-reduce among the replicas' owners).
--
-- With C >= P chunks a stream circulates without end (when C > P it waits C-P turns at rank 0
-- between rounds). With C < P a round would need the chunk at rank 0 before the previous round
-- has left the ring, so each round's stream starts afresh from the owner (more traffic).
--
-- naive: one round holding all of a rank's micro-batches (forward all, then backward all).
-- interleave: one micro-batch per round, so a turn runs one backward and one forward.
local wp = require("wp")
local M = {}

-- The positions of a stream that reaches rank 0 at each turn in `starts`: a list of ranks, one per
-- turn from `depart` on. It leaves the owner o (h hops before rank 0) at starts[1] - h.
local function positions(P, o, h, starts, from_owner)
  local pos, t, x = {}, starts[1], 0
  local depart = starts[1]
  if from_owner then
    depart = starts[1] - h
    t, x = depart, o
    pos[1] = x
    while t < starts[1] do t = t + 1; x = (x + 1) % P; pos[#pos + 1] = x end
  else
    pos[1] = 0
  end
  for i, s in ipairs(starts) do
    for r = 1, P - 1 do t = t + 1; pos[#pos + 1] = r end
    if i < #starts then
      t = t + 1; pos[#pos + 1] = 0
      while t < starts[i + 1] do t = t + 1; pos[#pos + 1] = 0 end
    end
  end
  return depart, pos
end

-- Cuts positions into segments: maximal runs on one rank, {rank, first, last}.
local function segments(depart, pos)
  local segs = {}
  for i, x in ipairs(pos) do
    local t = depart + i - 1
    local s = segs[#segs]
    if s and s.rank == x then s.last = t
    else segs[#segs + 1] = { rank = x, first = t, last = t } end
  end
  return segs
end

function M.build(plan, ctx, cfg)
  local P, R = wp.pipeline(ctx)
  local N = ctx.opts.micro_batches
  local C = wp.chunk_count(ctx, P)
  plan:chunks(wp.split_layers(ctx.model.layers, C))
  local rounds = cfg.rounds(N)
  local continuous = C >= P
  local wpool, dpool = wp.pool(plan, "w", "W"), wp.pool(plan, "d", "D")

  local function owner(k) return (P - k % P) % P end
  local function hops(k) return k % P end

  -- Weight streams, planned on replica 0's local ranks; `at[t]` is the segment holding the
  -- chunk at turn t (nil: the owner's master).
  local streams = {}
  local function add_stream(k, starts)
    local depart, pos = positions(P, owner(k), hops(k), starts, true)
    local st = { chunk = k, depart = depart, segs = segments(depart, pos), at = {} }
    for i, seg in ipairs(st.segs) do
      if i > 1 then seg.buf = wpool:request(seg.rank, seg.first - 1, seg.last) end
      for t = seg.first, seg.last do st.at[t] = seg end
    end
    streams[#streams + 1] = st
    return st
  end
  local function starts_of(first, j0, j1)
    local s = {}
    for j = j0, j1 do s[#s + 1] = first(j) end
    return s
  end
  -- fwd[k] / bwd[c]: lists of streams covering all rounds.
  local fwd, bwd = {}, {}
  for k = 0, C - 1 do
    local f = function(j) return j * C + k end
    local b = function(j) return (j + 1) * C + (C - 1 - k) end
    fwd[k], bwd[k] = {}, {}
    if continuous then
      fwd[k][1] = add_stream(k, starts_of(f, 0, rounds - 1))
      bwd[k][1] = add_stream(k, starts_of(b, 0, rounds - 1))
    else
      for j = 0, rounds - 1 do
        fwd[k][#fwd[k] + 1] = add_stream(k, { f(j) })
        bwd[k][#bwd[k] + 1] = add_stream(k, { b(j) })
      end
    end
  end
  -- The buffer holding chunk k's weights of stream list at (rank, t): a ring buffer, or the
  -- owner's master while the stream has not left it.
  local function weights_at(list, k, rank, t)
    for _, st in ipairs(list) do
      local seg = st.at[t]
      if seg and seg.rank == rank then return seg.buf and seg.buf.name or ("m" .. k) end
    end
    error(string.format("internal: no weights of chunk %d at rank %d turn %d", k, rank, t))
  end

  -- Gradient chains: positions like the backward weights, starting at rank 0 (no travel).
  local chains = {}
  for c = 0, C - 1 do
    local b = function(j) return (j + 1) * C + (C - 1 - c) end
    local groups = continuous and { starts_of(b, 0, rounds - 1) } or {}
    if not continuous then for j = 0, rounds - 1 do groups[#groups + 1] = { b(j) } end end
    for _, starts in ipairs(groups) do
      local depart, pos = positions(P, 0, 0, starts, false)
      local segs = segments(depart, pos)
      local compute = {}       -- turns at which a rank contributes: rank r at s + r
      for _, s in ipairs(starts) do for r = 0, P - 1 do compute[s + r] = true end end
      for i, seg in ipairs(segs) do
        local last_is_owner = i == #segs and seg.rank == owner(c)
        seg.buf = dpool:request(seg.rank, seg.first, last_is_owner and seg.last or seg.last + 1)
        if i > 1 and compute[seg.first] then seg.loc = dpool:request(seg.rank, seg.first, seg.first) end
      end
      local final = segs[#segs]
      if final.rank ~= owner(c) then
        final.deliver = dpool:request(owner(c), final.last + 1, final.last + 1)
      end
      chains[#chains + 1] = { chunk = c, segs = segs, compute = compute }
    end
  end

  wpool:assign()
  dpool:assign()

  -- Everything below is emitted once per replica, on ranks q*P + local rank.
  local total_turn = 0
  for q = 0, R - 1 do
    local base = q * P
    local function g(r) return base + r end
    local function mb(r, i) return (base + r) * N + i end
    for r = 0, P - 1 do wpool:declare(g(r), r); dpool:declare(g(r), r) end
    for k = 0, C - 1 do
      plan:owner(k, g(owner(k)))
      plan:buffer(g(owner(k)), "m" .. k, "W", { chunk = k, master = true })
      plan:buffer(g(owner(k)), "g" .. k, "D", { chunk = k })
    end

    -- weight transfers
    for _, st in ipairs(streams) do
      local segs = st.segs
      for i = 2, #segs do
        local from, to = segs[i - 1], segs[i]
        local src = from.buf and from.buf.name or ("m" .. st.chunk)
        plan:send(g(from.rank), to.first - 1, "W", src, g(to.rank))
        plan:recv(g(to.rank), to.first - 1, "W", to.buf.name, g(from.rank))
      end
    end

    -- backward and the gradient chains (emitted before the forwards: a turn runs its
    -- backward first, freeing activations before the forward stores more)
    local last_acc = {}
    for _, ch in ipairs(chains) do
      local c = ch.chunk
      for i, seg in ipairs(ch.segs) do
        local rank = g(seg.rank)
        if i > 1 then
          local prev = ch.segs[i - 1]
          plan:send(g(prev.rank), seg.first, "D", prev.buf.name, rank)
          plan:recv(rank, seg.first, "D", seg.buf.name, g(prev.rank))
        end
        for t = seg.first, seg.last do
          if ch.compute[t] then
            local j = (t - seg.rank - (C - 1 - c)) // C - 1
            local w = weights_at(bwd[c], c, seg.rank, t)
            local into = (t == seg.first and seg.loc) and seg.loc.name or seg.buf.name
            for _, i_mb in ipairs(cfg.round_mbs(j, N)) do
              plan:bwd(rank, t, c, mb(seg.rank, i_mb), w, into)
            end
            if into ~= seg.buf.name then plan:acc(rank, t, seg.buf.name, into) end
          end
        end
      end
      local final = ch.segs[#ch.segs]
      local o = g(owner(c))
      local t_acc
      if final.deliver then
        t_acc = final.last + 1
        plan:send(g(final.rank), t_acc, "D", final.buf.name, o)
        plan:recv(o, t_acc, "D", final.deliver.name, g(final.rank))
        plan:acc(o, t_acc, "g" .. c, final.deliver.name)
      else
        t_acc = final.last
        plan:acc(o, t_acc, "g" .. c, final.buf.name)
      end
      if not last_acc[c] or t_acc > last_acc[c] then last_acc[c] = t_acc end
    end

    -- forwards
    for k = 0, C - 1 do
      for r = 0, P - 1 do
        for j = 0, rounds - 1 do
          local t = r + j * C + k
          local w = weights_at(fwd[k], k, r, t)
          for _, i_mb in ipairs(cfg.round_mbs(j, N)) do
            plan:fwd(g(r), t, k, mb(r, i_mb), w)
          end
        end
      end
    end

    -- the update, at each chunk's owner
    for c = 0, C - 1 do
      total_turn = math.max(total_turn, wp.update(plan, c, base, owner(c), P, R, last_acc[c]))
    end
  end

  local wmax, dmax = 0, 0
  for r = 0, P - 1 do
    wmax = math.max(wmax, wpool.count[r] or 0)
    dmax = math.max(dmax, dpool.count[r] or 0)
  end
  plan:note(string.format("%d chunks on a ring of %d ranks%s, %d round%s; up to %d weight and %d gradient buffers in flight per rank%s",
    C, P, R > 1 and string.format(" (x%d replicas)", R) or "", rounds, rounds > 1 and "s" or "", wmax, dmax,
    continuous and "" or "; fewer chunks than ranks: each round's weights start from the owner"))
end

return M
