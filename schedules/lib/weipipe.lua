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
--
-- The zero-bubble variants (weipipe-zb1, weipipe-zb2) split each backward into BWD_B (the input
-- gradient, with the backward weights) and BWD_W (the weight gradient, which needs no weights and
-- adds into the gradient chain), and place F, B and W by their own turn formulas (cfg.turns):
-- the backward weight stream then follows the B passes, the gradient chain the W passes.
--
-- --replicate-ends keeps the embedding and the LM head on every rank instead (replicated_ends,
-- below): the ring's chunks are then the plan's chunks 1..C. A tied model (tie_word_embeddings)
-- over more than one chunk always runs so: its head is a mirror of the embedding whose gradient
-- TIE sums with the embedding's on every rank, after their all-reduces.
--
-- M.build runs in phases, each a local function below that decides one thing and records it in
-- the build state `b`: ring (each chunk's owner and its distance to rank 0), streams (where each
-- chunk's forward and backward weights are at every turn), chains (where each chunk's gradient
-- collects, turn by turn, until its owner has it), then ops (buffers named, every operation into
-- the plan on replica 0, the update, and replica 0 copied onto the others) and explain (the note). The rounds and their
-- micro-batches come from the strategy (cfg.rounds, cfg.round_mbs); where each pass of a round
-- is, from cfg.turns (optional; the default is the formulas above):
--   turns.f(j, k, C)  the turn the forward of chunk k in round j runs at rank 0 (rank r: + r)
--   turns.b(j, c, C)  the backward (or, with turns.w, the B pass) of chunk c in round j
--   turns.w(j, c, C)  (split only) the W pass of chunk c in round j
--   turns.period(C)   turns between two rounds of one chunk's passes at rank 0 (at least P for
--                     the streams to circulate without end)
--   turns.restart     start every round's streams from the owner even so: a stream that would
--                     wait at rank 0 between rounds holds a buffer there (period - P turns)
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

-- ring: chunk k's owner, (P - k) mod P, which its streams leave k mod P hops before rank 0 (so
-- that the streams of consecutive chunks reach rank 0 on consecutive turns); and whether the
-- streams circulate without end (C >= P) or start afresh from the owner each round.
local function ring(b)
  local P = b.P
  -- the plan's index of ring chunk k: with replicated ends chunk 0 is the embedding, so the ring's
  -- chunks are 1..C and C + 1 the head
  function b.id(k) return k + b.off end
  function b.owner(k) return (P - k % P) % P end
  function b.hops(k) return k % P end
  b.continuous = b.turns.period(b.C) >= P and not b.turns.restart
end

-- The default turns: WeiPipe's naive and interleaved rounds (the formulas at the top).
local function default_turns()
  return {
    f = function(j, k, C) return j * C + k end,
    b = function(j, c, C) return (j + 1) * C + (C - 1 - c) end,
    period = function(C) return C end,
  }
end

local function starts_of(first, j0, j1)
  local s = {}
  for j = j0, j1 do s[#s + 1] = first(j) end
  return s
end

-- streams: the forward and backward weight streams of every chunk, planned on replica 0's local
-- ranks: their segments (a rank holding the chunk for a run of turns, in a pool buffer but at the
-- owner), and `at[t]`, the segment holding it at turn t (b.streams; b.fwd[k], b.bwd[k]: the
-- streams covering all rounds of chunk k, one, or one per round when not continuous).
local function streams(b)
  local P, C, rounds = b.P, b.C, b.rounds
  b.streams, b.fwd, b.bwd = {}, {}, {}
  local function add_stream(k, starts)
    local depart, pos = positions(P, b.owner(k), b.hops(k), starts, true)
    local st = { chunk = k, depart = depart, segs = segments(depart, pos), at = {} }
    for i, seg in ipairs(st.segs) do
      if i > 1 then seg.buf = b.wpool:request(seg.rank, seg.first - 1, seg.last) end
      for t = seg.first, seg.last do st.at[t] = seg end
    end
    b.streams[#b.streams + 1] = st
    return st
  end
  for k = 0, C - 1 do
    local f = function(j) return b.turns.f(j, k, C) end
    local bw = function(j) return b.turns.b(j, k, C) end
    b.fwd[k], b.bwd[k] = {}, {}
    if b.continuous then
      b.fwd[k][1] = add_stream(k, starts_of(f, 0, rounds - 1))
      b.bwd[k][1] = add_stream(k, starts_of(bw, 0, rounds - 1))
    else
      for j = 0, rounds - 1 do
        b.fwd[k][#b.fwd[k] + 1] = add_stream(k, { f(j) })
        b.bwd[k][#b.bwd[k] + 1] = add_stream(k, { bw(j) })
      end
    end
  end
end

-- The buffer holding chunk k's weights of stream list at (rank, t): a ring buffer, or the
-- owner's master while the stream has not left it.
local function weights_at(b, list, k, rank, t)
  for _, st in ipairs(list) do
    local seg = st.at[t]
    if seg and seg.rank == rank then return seg.buf and seg.buf.name or ("m" .. b.id(k)) end
  end
  error(string.format("internal: no weights of chunk %d at rank %d turn %d", k, rank, t))
end

-- chains: the gradient of each chunk, per round or across all (as its backward weights, or as
-- the W passes when the backward is split): it moves like them but starts at rank 0 (no travel
-- from the owner); each segment's rank adds its backward (W pass) into the segment's buffer (into
-- a second one first when the sum arrives the same turn), and the last segment delivers the sum
-- to the owner unless it is the owner (b.chains). compute[t] is the round whose gradient the
-- segment's rank adds at turn t.
local function chains(b)
  local P, C, rounds = b.P, b.C, b.rounds
  b.chains = {}
  local adds = b.turns.w or b.turns.b
  for c = 0, C - 1 do
    local bw = function(j) return adds(j, c, C) end
    local groups = b.continuous and { starts_of(bw, 0, rounds - 1) } or {}
    if not b.continuous then for j = 0, rounds - 1 do groups[#groups + 1] = { bw(j) } end end
    for gi, starts in ipairs(groups) do
      local depart, pos = positions(P, 0, 0, starts, false)
      local segs = segments(depart, pos)
      local compute = {}       -- turns at which a rank contributes: rank r at s + r, for round j
      for i, s in ipairs(starts) do
        for r = 0, P - 1 do compute[s + r] = b.continuous and i - 1 or gi - 1 end
      end
      for i, seg in ipairs(segs) do
        local last_is_owner = i == #segs and seg.rank == b.owner(c)
        seg.buf = b.dpool:request(seg.rank, seg.first, last_is_owner and seg.last or seg.last + 1)
        if i > 1 and compute[seg.first] then seg.loc = b.dpool:request(seg.rank, seg.first, seg.first) end
      end
      local final = segs[#segs]
      if final.rank ~= b.owner(c) then
        final.deliver = b.dpool:request(b.owner(c), final.last + 1, final.last + 1)
      end
      b.chains[#b.chains + 1] = { chunk = c, segs = segs, compute = compute }
    end
  end
end

-- ops: the pools name the buffers; then, on replica 0's ranks: buffers and owners, the weight
-- transfers, the backwards with the gradient chains (before the forwards: a turn runs its
-- backward first, freeing activations before the forward stores more), the forwards, and each
-- chunk's update at its owner (with replicas: after an all-reduce). Every replica runs the same
-- ring on its own ranks, so plan:copy_replica then makes the others (replica q on ranks q*P +
-- local rank): one replica's Lua instead of R. Ring chunk k is the plan's chunk b.id(k); with
-- replicated ends (b.ends) every rank also runs the embedding and the head on its own
-- micro-batches with its own masters (replicated_ends, below).
local function ops(plan, b, cfg)
  local P, R, C, N, rounds = b.P, b.R, b.C, b.N, b.rounds
  local owner, id = b.owner, b.id
  b.wpool:assign()
  b.dpool:assign()
  do
    local q, base = 0, 0
    local function g(r) return base + r end
    local function mb(r, i) return (base + r) * N + i end
    for r = 0, P - 1 do b.wpool:declare(g(r), r); b.dpool:declare(g(r), r) end
    for k = 0, C - 1 do
      plan:owner(id(k), g(owner(k)))
      plan:buffer(g(owner(k)), "m" .. id(k), "W", { chunk = id(k), master = true })
      plan:buffer(g(owner(k)), "g" .. id(k), "D", { chunk = id(k) })
    end
    local ends = b.ends and b.ends.declare(q, g)

    -- weight transfers
    for _, st in ipairs(b.streams) do
      local segs = st.segs
      for i = 2, #segs do
        local from, to = segs[i - 1], segs[i]
        local src = from.buf and from.buf.name or ("m" .. id(st.chunk))
        plan:send(g(from.rank), to.first - 1, "W", src, g(to.rank))
        plan:recv(g(to.rank), to.first - 1, "W", to.buf.name, g(from.rank))
      end
    end

    -- backward (or the W passes) and the gradient chains
    local last_acc = {}
    for _, ch in ipairs(b.chains) do
      local c = ch.chunk
      for i, seg in ipairs(ch.segs) do
        local rank = g(seg.rank)
        if i > 1 then
          local prev = ch.segs[i - 1]
          plan:send(g(prev.rank), seg.first, "D", prev.buf.name, rank)
          plan:recv(rank, seg.first, "D", seg.buf.name, g(prev.rank))
        end
        for t = seg.first, seg.last do
          local j = ch.compute[t]
          if j then
            local into = (t == seg.first and seg.loc) and seg.loc.name or seg.buf.name
            if b.turns.w then
              for _, i_mb in ipairs(cfg.round_mbs(j, N)) do plan:bwd_w(rank, t, id(c), mb(seg.rank, i_mb), into) end
            else
              local w = weights_at(b, b.bwd[c], c, seg.rank, t)
              for _, i_mb in ipairs(cfg.round_mbs(j, N)) do
                -- the head's backward gives the last ring chunk's output gradient; the embedding's
                -- takes the first ring chunk's input gradient
                if ends and c == C - 1 then ends.head_bwd(rank, t, mb(seg.rank, i_mb)) end
                plan:bwd(rank, t, id(c), mb(seg.rank, i_mb), w, into)
                if ends and c == 0 then ends.embed_bwd(rank, t, mb(seg.rank, i_mb)) end
              end
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
        plan:acc(o, t_acc, "g" .. id(c), final.deliver.name)
      else
        t_acc = final.last
        plan:acc(o, t_acc, "g" .. id(c), final.buf.name)
      end
      if not last_acc[c] or t_acc > last_acc[c] then last_acc[c] = t_acc end
    end

    -- the B passes of a split backward, with the backward weights: after the W passes of their
    -- turn (a W frees its stash and keep before a B makes a keep: one chunk's keep less at the
    -- peak of weipipe-zb1, whose turns pair them) and before the forwards, as a whole backward
    if b.turns.w then
      for c = C - 1, 0, -1 do
        for r = 0, P - 1 do
          for j = 0, rounds - 1 do
            local t = r + b.turns.b(j, c, C)
            local w = weights_at(b, b.bwd[c], c, r, t)
            for _, i_mb in ipairs(cfg.round_mbs(j, N)) do
              -- replicated ends: whole backwards around the B passes, as around BWD above
              if ends and c == C - 1 then ends.head_bwd(g(r), t, mb(r, i_mb)) end
              plan:bwd_b(g(r), t, id(c), mb(r, i_mb), w)
              if ends and c == 0 then ends.embed_bwd(g(r), t, mb(r, i_mb)) end
            end
          end
        end
      end
    end

    -- forwards (with replicated ends: the embedding's before the first ring chunk's, the head's
    -- after the last one's, in the same turn)
    for k = 0, C - 1 do
      for r = 0, P - 1 do
        for j = 0, rounds - 1 do
          local t = r + b.turns.f(j, k, C)
          local w = weights_at(b, b.fwd[k], k, r, t)
          for _, i_mb in ipairs(cfg.round_mbs(j, N)) do
            if ends and k == 0 then ends.embed_fwd(g(r), t, mb(r, i_mb)) end
            plan:fwd(g(r), t, id(k), mb(r, i_mb), w)
            if ends and k == C - 1 then ends.head_fwd(g(r), t, mb(r, i_mb)) end
          end
        end
      end
    end

    -- the update, at each chunk's owner
    for c = 0, C - 1 do wp.update(plan, id(c), base, owner(c), P, R, last_acc[c]) end
  end
  plan:copy_replica()
  if b.ends then b.ends.update() end
end

-- Replicated ends (--replicate-ends, as WeiPipe's own code keeps them): chunk 0 holds only the
-- embedding and chunk C + 1 only the final norm and the LM head, marked replicated (every rank
-- of every replica holds their masters, ir/plan.h), so the ring carries the C middle chunks and
-- none of the vocabulary's weights. Each rank runs the embedding in the turn of its first ring
-- chunk's forward and the head in the turns of the last ring chunk's forward and backward, adding
-- its micro-batches' gradients into its own g0 and g<C+1>; once its last backward of each is
-- done, one all-reduce over all ranks sums each, and every rank updates its masters (the same
-- sum, so the same weights everywhere). The head's all-reduce is posted when the last rank has
-- run its last head backward, so it moves while the ring finishes its backwards.
local function replicated_ends(plan, b)
  local E, H = 0, b.C + 1
  local all, last = {}, { [E] = -1, [H] = -1 }
  for r = 0, b.R * b.P - 1 do all[#all + 1] = r end
  local ends = {}
  function ends.declare(q, g)
    for r = 0, b.P - 1 do
      for _, c in ipairs({ E, H }) do
        plan:owner(c, g(r))
        plan:buffer(g(r), "m" .. c, "W", { chunk = c, master = true })
        plan:buffer(g(r), "g" .. c, "D", { chunk = c })
      end
    end
    return ends
  end
  local function note(c, t) if t > last[c] then last[c] = t end end
  function ends.embed_fwd(rank, t, m) plan:fwd(rank, t, E, m, "m" .. E) end
  function ends.head_fwd(rank, t, m) plan:fwd(rank, t, H, m, "m" .. H) end
  function ends.embed_bwd(rank, t, m) plan:bwd(rank, t, E, m, "m" .. E, "g" .. E); note(E, t) end
  function ends.head_bwd(rank, t, m) plan:bwd(rank, t, H, m, "m" .. H, "g" .. H); note(H, t) end
  function ends.update()
    local group = plan:group(all)
    -- the head's first (its last backward comes earlier), then the embedding's: every rank calls
    -- them in that order, as a group's collectives must be
    local th = last[H] + 1
    local te = math.max(last[E] + 1, th)
    for _, r in ipairs(all) do
      plan:allreduce(r, th, "g" .. H, group)
      -- tied embeddings: the head is a mirror of the embedding (runtime/common/config.h); once
      -- both sums are here, TIE makes each the sum of the two, so both masters stay equal
      if not b.tied then plan:opt(r, th, H, "m" .. H, "g" .. H) end
      plan:allreduce(r, te, "g" .. E, group)
      if b.tied then
        plan:tie(r, te, "g" .. E, "g" .. H)
        plan:opt(r, te, H, "m" .. H, "g" .. H)
      end
      plan:opt(r, te, E, "m" .. E, "g" .. E)
    end
  end
  return ends
end

-- explain: the note of the summary: the ring, the rounds, the buffers in flight.
local function explain(plan, b)
  local P, R, rounds = b.P, b.R, b.rounds
  local wmax, dmax = 0, 0
  for r = 0, P - 1 do
    wmax = math.max(wmax, b.wpool.count[r] or 0)
    dmax = math.max(dmax, b.dpool.count[r] or 0)
  end
  -- K is said only where --pass-micro-batches gave it: the notes of default plans stay as they were
  local K = b.pass_mbs
  local per_pass = K and string.format(" of %d micro-batch%s per weight pass (--pass-micro-batches %d%s)", K, K > 1 and "es" or "", K,
    b.N % K ~= 0 and string.format(", the last of %d", b.N % K) or "") or ""
  plan:note(string.format("%d chunks on a ring of %d ranks%s, %d round%s%s; up to %d weight and %d gradient buffers in flight per rank%s",
    b.C, P, R > 1 and string.format(" (x%d replicas)", R) or "", rounds, rounds > 1 and "s" or "", per_pass, wmax, dmax,
    b.continuous and "" or b.turns.restart and "; each round's weights start from the owner"
      or "; fewer chunks than ranks: each round's weights start from the owner"))
  if b.ends then
    -- calibrate plans the run again from these words: "(--replicate-ends)" names the flag
    plan:note(string.format("embedding and LM head replicated on every rank (--replicate-ends): chunks 0 and %d, their gradients all-reduced over all %d ranks%s",
      b.C + 1, P * R, b.tied and "; tied embeddings: the head mirrors the embedding, TIE sums their gradients" or ""))
  end
end

function M.build(plan, ctx, cfg)
  local P, R = wp.pipeline(ctx)
  local C = wp.chunk_count(ctx, P)
  local layers = wp.split_layers(ctx.model.layers, C)
  -- a tied model (tie_word_embeddings) over several chunks sums its two uses of the embedding on
  -- every rank, where --replicate-ends keeps both ends: it is the default for one
  local tied = ctx.model.tied ~= 0 and C > 1
  local rep = ctx.opts.replicate_ends or tied
  if rep then
    table.insert(layers, 1, 0)
    layers[#layers + 1] = 0
  end
  plan:chunks(layers)
  local b = { P = P, R = R, C = C, N = ctx.opts.micro_batches, off = rep and 1 or 0, tied = ctx.model.tied ~= 0,
              wpool = wp.pool(plan, "w", "W"), dpool = wp.pool(plan, "d", "D") }
  if rep then
    plan:replicate(0)
    plan:replicate(C + 1)
    b.ends = replicated_ends(plan, b)
  end
  b.rounds = cfg.rounds(b.N)
  b.pass_mbs = cfg.pass_mbs
  b.turns = cfg.turns or default_turns()
  ring(b)
  streams(b)
  chains(b)
  ops(plan, b, cfg)
  explain(plan, b)
end

-- The rounds of K micro-batches per weight pass (cfg.rounds, cfg.round_mbs, cfg.pass_mbs for
-- M.build): each rank runs K of its N micro-batches through a chunk while the chunk's weights are
-- there, so the weights go round ceil(N / K) times per step (once forward, once backward each)
-- instead of N (interleave, K = 1) or once (naive, K = N). A turn then runs the K backwards of
-- one round and the K forwards of the next; the turn formulas, the streams and the gradient
-- chains are those of any round (they place rounds, not micro-batches); a rank holds K
-- micro-batches' stashes of every chunk at once. When K does not divide N the last round is
-- shorter (N mod K). `given` is --pass-micro-batches (0: not given, `default` applies): it is
-- recorded in the note; K must be in [1, N].
function M.passes(ctx, default, given)
  local N = ctx.opts.micro_batches
  local K = given > 0 and given or default
  if K > N then
    wp.bad_option(string.format("--pass-micro-batches %d", K),
      string.format("expected 1 to %d (the micro-batches per rank, --micro-batches)", N))
  end
  return {
    rounds = function(n) return (n + K - 1) // K end,
    round_mbs = function(j, n)
      local mbs = {}
      for i = j * K, math.min(n, (j + 1) * K) - 1 do mbs[#mbs + 1] = i end
      return mbs
    end,
    pass_mbs = given > 0 and K or nil,
  }
end

-- What the four weipipe strategies declare (docs/strategies.md, "Declaring a strategy"): the
-- options they share, their traits for the search's bounds and how compare labels them.
M.options = {
  replicate_ends = {
    name = "replicate_ends", type = "bool", default = false, from_notes = "%(%-%-replicate%-ends%)",
    default_words = "on for tied models, off otherwise",   -- M.build turns it on for a tied model
    help = "the embedding and the final norm and LM head on every rank, their gradients all-reduced over all ranks, " ..
      "instead of travelling round the ring with the first and last chunks",
  },
  -- K micro-batches through a chunk per weight pass (M.passes); 0: the strategy's own K
  pass_micro_batches = function(default_words, search)
    return {
      name = "pass_micro_batches", type = "int", min = 1, max = 16384, default = 0, search = search,
      from_notes = "%(%-%-pass%-micro%-batches (%d+)",   -- explain's note, for calibrate
      help = "K micro-batches through a chunk per weight pass: the weights go round ceil(N/K) times per step (default: " ..
        default_words .. ")",
    }
  end,
}

-- The K the search tries for weipipe-interleave: its own (0, K = 1) and 2, 4, ... below N (K = N
-- is weipipe-naive's).
function M.search_k(c)
  local v, k = { 0 }, 2
  while k < c.micro_batches and #v < 16 do v[#v + 1] = k; k = k * 2 end
  return v
end

-- The traits of lib/weipipe.lua's ring (generator/search/bounds.c reads them): weight passing,
-- chunk 0's owner the pipeline's rank 0 and its weights reaching rank r only through the hops
-- 0 -> ... -> r; with the default turns (not split) a rank's last compute is its backward of chunk
-- 0, whose gradient goes on round the ring (ring_tail); K micro-batches per pass where the
-- strategy takes --pass-micro-batches (ring_rounds: the bounds' turn-by-turn walk of the ring).
function M.traits(t)
  return function(o)
    return {
      passing = "weights", split_backward = t.split or false, all_forward = t.all_forward or false,
      ring = true, ring_tail = not t.split, ring_rounds = t.k_default ~= nil,
      pass_k = o.pass_micro_batches or 0, pass_k_default = t.k_default == "all" and o.micro_batches or 1,
      ends = o.replicate_ends or false,
      recompute_never_faster = not t.split, one_replica_bound = true,
    }
  end
end

-- compare's and -s auto's words for K (/k2: the search moved it off the flags) and the JSON fields.
function M.label(o, how, flags)
  local k = o.pass_micro_batches or 0
  if how == "row" then
    return (k ~= 0 and k ~= (flags.pass_micro_batches or 0)) and ("/k" .. k) or ""
  elseif how == "auto-row" then
    return k ~= 0 and ("/k" .. k) or ""
  elseif how == "picked-after" then
    return k ~= 0 and (", micro-batches per weight pass " .. k) or ""
  elseif how == "json" or how == "auto-json" then
    local t = {}
    if k ~= 0 then t[#t + 1] = { "pass_micro_batches", k } end
    if how == "json" and o.replicate_ends then t[#t + 1] = { "replicate_ends", true } end
    return t
  end
  return ""
end

return M
