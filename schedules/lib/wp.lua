-- Helpers shared by the strategies: refusing options, chunking, rank arithmetic, and a buffer
-- pool that gives each rank as few buffers as the plan's lifetimes allow.
--
-- A strategy runs in wpgen's sandbox (generator/lua/sandbox.c): Lua's base functions without
-- load, dofile, print and collectgarbage; string, table, math (random from a fixed seed) and
-- utf8; require of the modules here in schedules/lib; no io, os, package or debug; within a
-- limit of memory and of instructions (--lua-max-mib, --lua-max-instructions). wpgen list reads
-- a strategy's description from a "-- about: ..." line in the comment its file starts with.
local wp = {}

-- Refuses the options: wpgen prints one line, "wpgen: FLAG: MSG" (or "wpgen: MSG" when flag is
-- nil), and exits 2. For what the user asked that the strategy cannot do (flag: the flag with
-- its value, "--chunks 7"); a bug of the script is an ordinary error, printed with its traceback.
function wp.bad_option(flag, msg)
  error({ flag = flag, msg = msg }, 0)
end

-- Layers per chunk: as even as possible, the extra layers on the middle chunks (the first chunk
-- also holds the embedding and the last the LM head, so they are kept light).
function wp.split_layers(L, C)
  if C < 1 or C > L then
    error(string.format("cannot cut %d layers into %d chunks (expected 1..%d)", L, C, L), 0)
  end
  local base, extra = L // C, L % C
  local layers = {}
  for k = 1, C do layers[k] = base end
  -- hand out the extra layers from the middle outwards
  local order, lo, hi = {}, (C + 1) // 2, (C + 1) // 2 + 1
  while #order < C do
    if lo >= 1 then order[#order + 1] = lo; lo = lo - 1 end
    if hi <= C and #order < C then order[#order + 1] = hi; hi = hi + 1 end
  end
  for i = 1, extra do layers[order[i]] = layers[order[i]] + 1 end
  return layers
end

-- Ranks per replica and the replica count, checked.
function wp.pipeline(ctx)
  local R = ctx.opts.replicas
  local P = ctx.opts.ranks // R
  return P, R
end

-- Activation passing's pipeline (1f1b, zb1): wp.pipeline's P and R, refused where the P stages
-- would have more than the model's layers. name: the strategy, for the message.
function wp.stages(ctx, name)
  local P, R = wp.pipeline(ctx)
  local L = ctx.model.layers
  if P > L then
    wp.bad_option(nil, string.format("%s: %d pipeline stages need at least %d layers, the model has %d " ..
      "(use --replicas to make the pipeline shorter)", name, P, P, L))
  end
  return P, R
end

-- The chunks: --chunks, or the default (no more than the layers).
function wp.chunk_count(ctx, default)
  local C, L = ctx.opts.chunks, ctx.model.layers
  if C == 0 then C = math.min(default, L) end
  if C > L then
    wp.bad_option(string.format("--chunks %d", C), string.format("expected 1 to %d (the model has %d layers)", L, L))
  end
  return C
end

-- The sum of chunk c's gradient over the replicas: complete in "g<c>" at its owner (local rank
-- `owner` of the replica starting at rank `base`) by the end of turn t, with R replicas of P
-- ranks it is all-reduced among the replicas' owners in the next turn. Returns the turn by whose
-- end the sum is there (t itself with one replica).
function wp.replica_sum(plan, c, base, owner, P, R, t)
  if R > 1 then
    local members = {}
    for q = 0, R - 1 do members[#members + 1] = q * P + owner end
    t = t + 1
    plan:allreduce(base + owner, t, "g" .. c, plan:group(members))
  end
  return t
end

-- The update of chunk c: wp.replica_sum, then AdamW on "m<c>" (OPT runs after the turn's
-- transfers, in the turn of the sum). Returns the turn of the update.
function wp.update(plan, c, base, owner, P, R, t)
  t = wp.replica_sum(plan, c, base, owner, P, R, t)
  plan:opt(base + owner, t, c, "m" .. c, "g" .. c)
  return t
end

-- Whether the plan's model ties its embeddings over several chunks: its last chunk's LM head is
-- then a mirror of the embedding (runtime/common/config.h), whose gradient must be summed with
-- the embedding's before either end is updated (wp.update_tied), else the two masters diverge.
function wp.tied(ctx, C)
  return ctx.model.tied ~= 0 and C > 1
end

-- The update of a tied model's two ends: chunk 0's gradient "g0" at rank e, complete (over the
-- replicas too) by the end of turn te, and the last chunk's, chunk C - 1's, at rank h by the end
-- of th, summed, then both masters updated with the sum. On one rank TIE adds them after both are
-- there; on two, TIE_ALLREDUCE between the two in the next turn (a collective reads its buffer
-- when it is posted): each element becomes a + b in fp32 on both, the same bits. Each replica
-- ties its own pair after the replicas' all-reduces, so every copy gets the same sum. Returns the
-- turn of the updates.
function wp.update_tied(plan, C, e, h, te, th)
  local H = C - 1
  local t = math.max(te, th)
  if e == h then
    plan:tie(e, t, "g0", "g" .. H)
  else
    t = t + 1
    local g = plan:group({ e, h })
    plan:tie_allreduce(e, t, "g0", g)
    plan:tie_allreduce(h, t, "g" .. H, g)
  end
  plan:opt(e, t, 0, "m0", "g0")
  plan:opt(h, t, H, "m" .. H, "g" .. H)
  return t
end

-- A pool of buffers of one kind per rank. Requests carry a lifetime [from, to] in turns; after
-- all requests are in, assign() hands out names so that no two lifetimes on one buffer overlap,
-- greedily in order of start (optimal for intervals). Each request is a table that gets .name.
local Pool = {}
Pool.__index = Pool

function wp.pool(plan, prefix, kind)
  return setmetatable({ plan = plan, prefix = prefix, kind = kind, reqs = {}, count = {} }, Pool)
end

function Pool:request(rank, from, to)
  assert(to >= from, "pool request ends before it starts")
  local r = { rank = rank, from = from, to = to, seq = #self.reqs + 1 }
  self.reqs[#self.reqs + 1] = r
  return r
end

function Pool:assign()
  -- Requests of each rank in order of start, then end, then request order (so plans are
  -- reproducible): buckets by start turn, which is faster than sorting them all in Lua.
  local by_rank, lo, hi = {}, math.huge, -math.huge
  for _, r in ipairs(self.reqs) do
    local b = by_rank[r.rank]
    if not b then b = {}; by_rank[r.rank] = b end
    local l = b[r.from]
    if not l then l = {}; b[r.from] = l end
    l[#l + 1] = r
    lo, hi = math.min(lo, r.from), math.max(hi, r.from)
  end
  local ranks = {}
  for rank in pairs(by_rank) do ranks[#ranks + 1] = rank end
  table.sort(ranks)
  local by_end = function(x, y) if x.to ~= y.to then return x.to < y.to end return x.seq < y.seq end
  for _, rank in ipairs(ranks) do
    local b, free_from = by_rank[rank], {}
    for from = lo, hi do
      local l = b[from]
      if l then
        if #l > 1 then table.sort(l, by_end) end
        for _, r in ipairs(l) do
          local pick
          for i = 1, #free_from do
            if free_from[i] <= r.from then pick = i; break end
          end
          if not pick then pick = #free_from + 1 end
          free_from[pick] = r.to + 1
          r.name = self.prefix .. (pick - 1)
          if pick > (self.count[rank] or 0) then self.count[rank] = pick end
        end
      end
    end
  end
end

-- Declares the pool's buffers on rank `rank`, for requests made on rank `as` (replicas share
-- one layout: requests are made for one replica, buffers declared on all).
function Pool:declare(rank, as)
  for i = 0, (self.count[as] or 0) - 1 do
    self.plan:buffer(rank, self.prefix .. i, self.kind)
  end
end

-- Layers per chunk with the first and the last chunk given first and last layers (0: as
-- split_layers cuts them), the others split_layers' cut of the rest: Megatron's uneven stages
-- (--decoder-first/last-pipeline-num-layers), so that the embedding and the LM head do not make
-- their stages the slowest. generator/search/bounds.c mirrors it (chunk_layers_of).
function wp.split_layers_ends(L, C, first, last)
  local f, l = first or 0, last or 0
  if f == 0 and l == 0 then return wp.split_layers(L, C) end
  local flag = f > 0 and string.format("--first-stage-layers %d", f) or string.format("--last-stage-layers %d", l)
  if C < 2 then wp.bad_option(flag, "expected a pipeline of at least 2 chunks") end
  local m = C - (f > 0 and 1 or 0) - (l > 0 and 1 or 0)
  local rest = L - f - l
  if (m == 0 and rest ~= 0) or rest < m then
    wp.bad_option(flag, string.format("the model's %d layers leave %d for the other %d chunk%s (at least 1 each%s)", L, rest, m,
      m == 1 and "" or "s", m == 0 and "; with 2 chunks the two ends take all the layers" or ""))
  end
  local out = {}
  if f > 0 then out[#out + 1] = f end
  if m > 0 then
    for _, n in ipairs(wp.split_layers(rest, m)) do out[#out + 1] = n end
  end
  if l > 0 then out[#out + 1] = l end
  return out
end

return wp
