-- TawPipe (AAAI 2026): topology-aware weight passing, on P ranks per replica.
--
-- The ranks of a pipeline form D groups (one per node, or per PCIe island: the placement solver
-- in generator/place/placement.c chooses), G ranks each (groups may differ in size). Every chunk has
-- ONE fixed owner, which keeps its master weights ("m<c>"), its gradient ("g<c>") and the
-- optimizer state, and runs OPT. The solver also chooses the order of the groups along the
-- inter-node ring and each group's staging rank.
--
-- Each group runs the micro-batches of all its ranks through the chunks together, each rank its
-- own N micro-batches, group j (ring position) j turns behind group 0, in K rounds (one forward
-- and one backward sweep each; K: the fewest whose activations fit in memory). In local turns
-- tau, round r (L = 2C-2):
--     tau = rL + c          FWD chunk c            (c = 0 .. C-1)
--     tau = rL + C-1        also BWD chunk C-1     (its weights are still there)
--     tau = rL + 2C-2-c     BWD chunk c            (c = C-2 .. 0; chunk 0's shares its turn with
--                                                   the forward of chunk 0 in round r+1)
-- A chunk that a group uses at tau reaches every member by a BCAST at tau-1 from its owner (if the
-- owner is in the group: straight from the master) or from the group's staging rank, which
-- received it over the network, point to point, at tau-2 (the prefetch, while the chunk before
-- computes): group 0 from the owner, group j from group j-1's staging rank (group j0+1 from the
-- owner in group j0), the staging rank forwarding in the same turn as it broadcasts. So one copy
-- of each chunk crosses into each group per pass, and a rank holds one circulating weight buffer
-- plus the prefetch buffer (the staging rank one more: the network's landing buffer).
-- Gradients: BWD into a gradient buffer (the owner: straight into g<c>), REDUCE over the group at
-- tau+1 to the owner or to the staging rank, which SENDs it to the owner at tau+2; the owner ACCs
-- it into g<c>. With R replicas the owners of a chunk ALLREDUCE g<c>, then OPT.
--
-- --grouping node|island|published|auto (default auto) overrides the solver's grouping, and
-- --rounds K the rounds.
--
-- M.build runs in phases, each a local function below that decides one thing and records it in
-- the build state `b`: placement (groups, ring order, staging ranks, owners), rounds (K), uses
-- (the local turns of each chunk's weights and backwards), then per replica layout (groups and
-- owners into the plan), weights (how each use's weights reach every group) and gradients (how
-- each backward's gradient reaches the owner), then ops (buffers named, every operation into the
-- plan, the update) and explain (the notes). Where every replica is laid out as the first (alike),
-- replica 0 alone goes through them and plan:copy_replica makes the others.
local wp = require("wp")
local M = {}

local BASE = 2          -- local turn -2 is global turn 0 for group 0

local function human(b)
  local units = { "B", "KiB", "MiB", "GiB", "TiB" }
  local i = 1
  while b >= 1024 and i < #units do b = b / 1024; i = i + 1 end
  return string.format(i == 1 and "%.0f %s" or "%.2f %s", b, units[i])
end

local function describe_cost(c)
  return string.format("net %s, cross-island %s, intra %s, busiest NIC %s, largest owner %s",
    human(c.net), human(c.xi), human(c.intra), human(c.nic_max), human(c.owner_max))
end

-- A buffer as recorded: a name, or a pool request (named once the pool has assigned).
local function bname(x) return type(x) == "string" and x or x.name end

-- placement: the groups, their order on the ring, each group's staging rank and each chunk's
-- owner, for every replica (replicas may differ in shape on uneven clusters): the solver's, in
-- the grouping asked for, its bytes counted for K rounds (nil: one).
local function placement(plan, b, K)
  for q = 0, b.R - 1 do
    local ranks = {}
    for i = 0, b.P - 1 do ranks[#ranks + 1] = q * b.P + i end
    b.sols[q] = plan:solve_placement(ranks, b.mode, K)
  end
end

-- rounds: K, how many rounds the rank's N micro-batches go through, one forward and one backward
-- sweep each, and why (b.K, b.K_why). K = 1 moves the least (weights cross once per pass whatever
-- N is) but keeps the activations of all N micro-batches until their backward; K = N keeps one
-- micro-batch's, and moves the weights N times. Chosen: the fewest rounds whose memory fits the
-- devices, by an upper bound of what the verifier accounts (masters with AdamW state and gradient
-- at the owners, 3 weight and 4 gradient buffers in flight, the workspace, the activations
-- kept). --rounds K overrides.
local function rounds(b, asked)
  local N, C, P, R, sols = b.N, b.C, b.P, b.R, b.sols
  local function fits(k)
    local n_r = (N + k - 1) // k
    for q = 0, R - 1 do
      local mem = sols[q].mem
      local big, keep = 0, mem.act
      for c = 0, C - 1 do big = math.max(big, mem.chunk[c]); keep = keep + mem.stash[c] end
      local owned = {}
      for c = 0, C - 1 do
        local o = sols[q].owner[c]
        owned[o] = (owned[o] or 0) + 4 * mem.chunk[c]
      end
      for i = 0, P - 1 do
        local r = q * P + i
        if (owned[r] or 0) + 7 * big + mem.workspace + n_r * keep > mem.device then return false end
      end
    end
    return true
  end
  local K, K_why = nil, "set by --rounds"
  if asked > 0 then K = asked end
  if not K then
    K = 1
    while K < N and not fits(K) do K = K + 1 end
    K_why = K == 1 and "all micro-batches fit in memory" or "the fewest that fit in memory"
    if not fits(K) then K_why = "not even one micro-batch per round fits" end
  end
  K = math.max(1, math.min(K, N))
  if C == 1 then K = 1; K_why = "one chunk" end    -- nothing circulates between rounds
  b.K, b.K_why = K, K_why
end

-- uses: when each chunk's weights are used and each backward runs, in local turns (b.uses,
-- b.bwds). A use is {chunk, local turn, steps}; a step is the compute of one round on that chunk:
-- "fwd", "bwd", or "fb" (forward then backward per micro-batch: the last chunk). Round j runs
-- chunk c forward at jL + c and backward at jL + 2C-2-c (L = 2C-2), so the last chunk's two meet
-- in one turn, and so do chunk 0's backward of round j and forward of round j+1.
local function uses(b)
  local C, K = b.C, b.K
  local L = 2 * C - 2
  local us, bwds = {}, {}
  if C == 1 then
    local steps = {}
    for j = 0, K - 1 do steps[#steps + 1] = { kind = "fb", round = j } end
    us[1] = { c = 0, tau = 0, steps = steps }
    bwds[1] = { c = 0, round = 0, tau = 0 }
  else
    for j = 0, K - 1 do
      for c = 0, C - 1 do
        if c == 0 and j > 0 then
          local prev = us[#us]                   -- chunk 0's backward of round j-1
          prev.steps[#prev.steps + 1] = { kind = "fwd", round = j }
        else
          us[#us + 1] = { c = c, tau = j * L + c, steps = { { kind = c == C - 1 and "fb" or "fwd", round = j } } }
        end
      end
      for c = C - 2, 0, -1 do
        us[#us + 1] = { c = c, tau = j * L + 2 * C - 2 - c, steps = { { kind = "bwd", round = j } } }
      end
      for c = 0, C - 1 do
        bwds[#bwds + 1] = { c = c, round = j, tau = c == C - 1 and j * L + C - 1 or j * L + 2 * C - 2 - c }
      end
    end
  end
  b.uses, b.bwds = us, bwds
end

-- layout: replica q's groups (a plan group for each of more than one rank) and its owners (each
-- with the chunk's master and gradient). Returns what the routes of q need: the groups, each
-- rank's group (ring position), the plan groups and T, the global turn of a group's local turn.
local function layout(plan, b, q)
  local sol = b.sols[q]
  local groups, owner = sol.groups, sol.owner
  local rep = { groups = groups, staging = sol.staging, owner = owner, D = #groups, gpos = {}, gid = {} }
  for j = 1, rep.D do for _, r in ipairs(groups[j]) do rep.gpos[r] = j - 1 end end
  for j = 1, rep.D do if #groups[j] > 1 then rep.gid[j - 1] = plan:group(groups[j]) end end
  function rep.T(j, tau) return tau + BASE + j end
  b.owners[q] = owner
  b.last_acc[q] = {}
  for c = 0, b.C - 1 do
    plan:owner(c, owner[c])
    plan:buffer(owner[c], "m" .. c, "W", { chunk = c, master = true })
    plan:buffer(owner[c], "g" .. c, "D", { chunk = c })
  end
  return rep
end

-- weights: for every use, how the chunk reaches each group of replica q: a BCAST over the group
-- at tau-1 from the owner's master (the owner's group) or from the staging rank, which received
-- it point to point at tau-2 from the owner or the previous group's staging rank; then the
-- computes of the use on every member. Recorded in b.xfers, b.colls, b.computes.
local function weights(b, q, rep)
  local groups, staging, owner, gpos, gid, T = rep.groups, rep.staging, rep.owner, rep.gpos, rep.gid, rep.T
  local where = {}           -- [j][use index][rank] = buffer (name or pool request)
  for j = 0, rep.D - 1 do where[j] = {} end
  for ui, u in ipairs(b.uses) do
    local c, tau = u.c, u.tau
    local o = owner[c]
    local j0 = gpos[o]
    for j = 0, rep.D - 1 do
      local at = {}
      where[j][ui] = at
      local members = groups[j + 1]
      local root, rootbuf
      if j == j0 then
        root, rootbuf = o, "m" .. c
      else
        root = staging[j + 1]
        local sender, sbuf
        if j == 0 or j - 1 == j0 then sender, sbuf = o, "m" .. c
        else sender = staging[j]; sbuf = where[j - 1][ui][sender] end
        rootbuf = b.wpool:request(root, T(j, tau - 2), T(j, tau))
        b.xfers[#b.xfers + 1] = { t = T(j, tau - 2), from = sender, sbuf = sbuf, to = root, rbuf = rootbuf, what = "W" }
      end
      at[root] = rootbuf
      if #members > 1 then
        local parts = {}
        for _, m in ipairs(members) do
          if m ~= root then at[m] = b.wpool:request(m, T(j, tau - 1), T(j, tau)) end
          parts[#parts + 1] = { rank = m, buf = at[m] }
        end
        b.colls[#b.colls + 1] = { kind = "bcast", t = T(j, tau - 1), group = gid[j], root = root, parts = parts, c = c }
      end
      -- the compute of this use
      for _, m in ipairs(members) do
        for _, st in ipairs(u.steps) do
          b.computes[#b.computes + 1] = { t = T(j, tau), rank = m, c = c, buf = at[m], kind = st.kind, round = st.round }
        end
      end
    end
  end
end

-- gradients: for every backward, per round, where each member of replica q's groups writes its
-- gradient (the owner: straight into g<c>), the REDUCE over the group at tb+1 to the owner or the
-- staging rank, the staging rank's SEND to the owner and the owner's ACC into g<c>; then which
-- buffer each backward compute writes (replica q's: b.computes[first ..]). Recorded in b.colls, b.xfers, b.accs, b.last_acc.
local function gradients(b, q, rep, first)
  local groups, staging, owner, gpos, gid, T = rep.groups, rep.staging, rep.owner, rep.gpos, rep.gid, rep.T
  local grad_into = {}       -- [c:j:round][rank] = the buffer a backward of chunk c writes
  for _, bw in ipairs(b.bwds) do
    local c, tb = bw.c, bw.tau
    local o = owner[c]
    local j0 = gpos[o]
    for j = 0, rep.D - 1 do
      local members = groups[j + 1]
      local root = j == j0 and o or staging[j + 1]
      local into = {}
      local hold = #members > 1 and 2 or 1       -- turns after tb until the root passes it on
      for _, m in ipairs(members) do
        if m == o then into[m] = "g" .. c
        else into[m] = b.dpool:request(m, T(j, tb), T(j, tb + (m == root and hold or 1))) end
      end
      grad_into[c .. ":" .. j .. ":" .. bw.round] = into
      if #members > 1 then
        local parts = {}
        for _, m in ipairs(members) do parts[#parts + 1] = { rank = m, buf = into[m] } end
        b.colls[#b.colls + 1] = { kind = "reduce", t = T(j, tb + 1), group = gid[j], root = root, parts = parts, c = c }
      end
      local t_acc
      if j == j0 then
        t_acc = #members > 1 and T(j, tb + 1) or T(j, tb)
      else
        t_acc = T(j, tb + hold)
        local r = b.dpool:request(o, t_acc, t_acc)
        b.xfers[#b.xfers + 1] = { t = t_acc, from = root, sbuf = into[root], to = o, rbuf = r, what = "D" }
        b.accs[#b.accs + 1] = { t = t_acc, rank = o, dst = "g" .. c, src = r }
      end
      local last = b.last_acc[q]
      if not last[c] or t_acc > last[c] then last[c] = t_acc end
    end
  end
  -- which gradient buffer each backward writes
  local P = b.P
  for i = first, #b.computes do local cmp = b.computes[i]   -- replica q's only: linear in the replicas
    if cmp.kind ~= "fwd" and not cmp.into and cmp.rank >= q * P and cmp.rank < (q + 1) * P then
      cmp.into = grad_into[cmp.c .. ":" .. gpos[cmp.rank] .. ":" .. cmp.round][cmp.rank]
    end
  end
end

-- ops: the pools name the buffers, then every recorded operation goes into the plan in this
-- order: compute, transfers, collectives, ACC, then the update (with replicas, an ALLREDUCE among
-- the chunk's owners after the last ACC of any replica, then OPT). ranks: the ranks recorded (all
-- of them, or replica 0's when b.copy); the update is for the replicas recorded.
local function ops(plan, b, ranks)
  local N, C, K = b.N, b.C, b.K
  local R = b.copy and 1 or b.R
  b.wpool:assign()
  b.dpool:assign()
  for r = 0, ranks - 1 do b.wpool:declare(r, r); b.dpool:declare(r, r) end
  local function round_mbs(j)
    local t = {}
    for i = j * N // K, (j + 1) * N // K - 1 do t[#t + 1] = i end
    return t
  end
  for _, cmp in ipairs(b.computes) do
    local w = bname(cmp.buf)
    for _, i in ipairs(round_mbs(cmp.round)) do
      local mb = cmp.rank * N + i
      if cmp.kind ~= "bwd" then plan:fwd(cmp.rank, cmp.t, cmp.c, mb, w) end
      if cmp.kind ~= "fwd" then plan:bwd(cmp.rank, cmp.t, cmp.c, mb, w, bname(cmp.into)) end
    end
  end
  for _, x in ipairs(b.xfers) do
    plan:send(x.from, x.t, x.what, bname(x.sbuf), x.to)
    plan:recv(x.to, x.t, x.what, bname(x.rbuf), x.from)
  end
  for _, k in ipairs(b.colls) do
    for _, part in ipairs(k.parts) do
      if k.kind == "bcast" then plan:bcast(part.rank, k.t, bname(part.buf), k.group, k.root)
      else plan:reduce(part.rank, k.t, bname(part.buf), k.group, k.root) end
    end
  end
  for _, a in ipairs(b.accs) do plan:acc(a.rank, a.t, a.dst, bname(a.src)) end
  local ends = {}
  for c = 0, C - 1 do
    local t = 0
    for q = 0, R - 1 do t = math.max(t, b.last_acc[q][c]) end
    if b.R > 1 then
      local members = {}
      for q = 0, b.R - 1 do members[#members + 1] = b.owners[q][c] end
      local g = plan:group(members)
      t = t + 1
      for q = 0, R - 1 do plan:allreduce(b.owners[q][c], t, "g" .. c, g) end
    end
    if b.tied and (c == 0 or c == C - 1) then ends[c] = t
    else
      for q = 0, R - 1 do plan:opt(b.owners[q][c], t, c, "m" .. c, "g" .. c) end
    end
  end
  -- a tied model: each replica sums its embedding's and head mirror's gradients, at their owners,
  -- then updates both (wp.update_tied)
  if b.tied then
    for q = 0, R - 1 do wp.update_tied(plan, C, b.owners[q][0], b.owners[q][C - 1], ends[0], ends[C - 1]) end
  end
end

-- explain: the notes of the summary: the groups and owners chosen (replica 0's), the solver's
-- costs beside the published layout's, the rounds and why, the buffers in flight.
local function explain(plan, b, topo, ranks)
  local C, N, K = b.C, b.N, b.K
  local sol = b.sols[0]
  local gdesc = {}
  for j, g in ipairs(sol.groups) do
    local nd = topo.nodes[topo.node_of[g[1]] + 1]
    local node = nd.name
    if sol.by_island then
      node = string.format("%s/island%d", nd.name, (g[1] - nd.first_device) // (nd.devices // nd.islands))
    end
    local own = {}
    for c = 0, C - 1 do
      for _, r in ipairs(g) do if sol.owner[c] == r then own[#own + 1] = string.format("%d@%d", c, r) end end
    end
    gdesc[#gdesc + 1] = string.format("%s{ranks %d-%d, staging %d, owns %s}", node, g[1], g[#g], sol.staging[j],
      #own > 0 and table.concat(own, " ") or "nothing")
  end
  local wmax, dmax = 0, 0
  for r = 0, ranks - 1 do
    wmax = math.max(wmax, b.wpool.count[r] or 0)
    dmax = math.max(dmax, b.dpool.count[r] or 0)
  end
  plan:note(string.format("tawpipe: %d chunks, %d groups %s%s; ring order (chunk@owner): %s",
    C, #sol.groups, sol.by_island and "by PCIe island" or "by node",
    b.R > 1 and string.format(" in each of %d replicas (gradients all-reduced across them at the owners)", b.R) or "",
    table.concat(gdesc, " -> ")))
  plan:note(string.format("solver (mode %s, %d placements costed), bytes per step and pipeline: %s", b.mode, sol.evaluated,
    describe_cost(sol.cost)))
  plan:note(string.format("published layout (groups per node, rank i of group k owns chunk (D*i+k) mod P): %s",
    describe_cost(sol.published)))
  plan:note(string.format("%d micro-batch%s per rank in %d round%s (%s); up to %d circulating weight and %d gradient buffers per rank",
    N, N > 1 and "es" or "", K, K > 1 and "s" or "", b.K_why, wmax, dmax))
  if b.tied then
    plan:note(string.format("tied embeddings: the head mirrors the embedding, %s sums their gradients at the owners of chunks 0 and %d",
      sol.owner[0] == sol.owner[C - 1] and "TIE" or "TIE_ALLREDUCE", C - 1))
  end
end

-- alike: whether every replica's placement is replica 0's moved by q*P ranks (the solver sees
-- devices only as their nodes and islands, so on a cluster of alike nodes they are). Then replica
-- 0 is built alone and plan:copy_replica makes the others: one replica's Lua instead of R.
local function alike(b)
  local P, s0 = b.P, b.sols[0]
  for q = 1, b.R - 1 do
    local s, d = b.sols[q], q * P
    if #s.groups ~= #s0.groups then return false end
    for j, g in ipairs(s0.groups) do
      if #s.groups[j] ~= #g or s.staging[j] ~= s0.staging[j] + d then return false end
      for i, r in ipairs(g) do if s.groups[j][i] ~= r + d then return false end end
    end
    for c = 0, b.C - 1 do if s.owner[c] ~= s0.owner[c] + d then return false end end
  end
  return true
end

function M.build(plan, ctx)
  local P, R = wp.pipeline(ctx)
  local C = wp.chunk_count(ctx, P)
  plan:chunks(wp.split_layers(ctx.model.layers, C))
  local b = {
    P = P, R = R, C = C, N = ctx.opts.micro_batches, tied = wp.tied(ctx, C), mode = ctx.opts.grouping or "auto", sols = {},
    wpool = wp.pool(plan, "w", "W"), dpool = wp.pool(plan, "d", "D"),
    -- everything is recorded first and emitted once the pools have named the buffers
    xfers = {}, colls = {}, computes = {}, accs = {},
    last_acc = {},           -- [q][c] the turn of the last ACC into g<c> at replica q's owner
    owners = {},             -- [q][c]
  }
  placement(plan, b)
  rounds(b, ctx.opts.rounds or 0)
  if b.K > 1 then placement(plan, b, b.K) end   -- again, its bytes counted for K rounds
  uses(b)
  b.copy = R > 1 and alike(b)
  for q = 0, b.copy and 0 or R - 1 do
    local rep = layout(plan, b, q)
    local first = #b.computes + 1
    weights(b, q, rep)
    gradients(b, q, rep, first)
  end
  if b.copy then
    -- the other replicas' groups, in the order building them would make them (before the
    -- all-reduces' groups), their owners and last ACCs: replica 0's moved
    for q = 1, R - 1 do
      for _, g in ipairs(b.sols[q].groups) do if #g > 1 then plan:group(g) end end
      b.owners[q], b.last_acc[q] = b.sols[q].owner, b.last_acc[0]
    end
  end
  ops(plan, b, b.copy and P or ctx.opts.ranks)
  if b.copy then plan:copy_replica() end
  explain(plan, b, ctx.topo, ctx.opts.ranks)
end

-- compare's and -s auto's words for the rounds (/rounds2 where the search moved them off the flags).
function M.label(o, how, flags)
  local r = o.rounds or 0
  local moved = r ~= 0 and r ~= (flags.rounds or 0)
  if how == "row" or how == "auto-row" then return moved and ("/rounds" .. r) or ""
  elseif how == "picked-after" then return r ~= 0 and (", rounds " .. r) or ""
  elseif how == "json" or how == "auto-json" then return r ~= 0 and { { "rounds", r } } or {}
  end
  return ""
end

return M
