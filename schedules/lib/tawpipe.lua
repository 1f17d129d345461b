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
-- --rounds K the rounds (also as WPGEN_TAWPIPE_GROUPING / WPGEN_TAWPIPE_ROUNDS, for tests).
local wp = require("wp")
local M = {}

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

function M.build(plan, ctx)
  local P, R = wp.pipeline(ctx)
  local N = ctx.opts.micro_batches
  local C = wp.chunk_count(ctx, P)
  plan:chunks(wp.split_layers(ctx.model.layers, C))
  -- --grouping (ctx.opts.grouping); WPGEN_TAWPIPE_GROUPING for tests that run other strategies too
  local mode = ctx.opts.grouping or "auto"
  local env_mode = os.getenv("WPGEN_TAWPIPE_GROUPING")
  if mode == "auto" and env_mode and env_mode ~= "" then mode = env_mode end
  local topo = ctx.topo
  local BASE = 2                                   -- local turn -2 is global turn 0 for group 0
  local wpool, dpool = wp.pool(plan, "w", "W"), wp.pool(plan, "d", "D")
  local function bname(b) return type(b) == "string" and b or b.name end

  -- the placement of every replica (replicas may differ in shape on uneven clusters)
  local sols = {}
  for q = 0, R - 1 do
    local ranks = {}
    for i = 0, P - 1 do ranks[#ranks + 1] = q * P + i end
    sols[q] = plan:solve_placement(ranks, mode)
  end

  -- Rounds: the rank's N micro-batches go through in K rounds, one forward and one backward
  -- sweep each. K = 1 moves the least (weights cross once per pass whatever N is) but keeps the
  -- activations of all N micro-batches until their backward; K = N keeps one micro-batch's, and
  -- moves the weights N times. Chosen: the fewest rounds whose memory fits the devices, by an
  -- upper bound of what the verifier accounts (masters with AdamW state and gradient at the
  -- owners, 3 weight and 4 gradient buffers in flight, the workspace, the activations kept).
  -- WPGEN_TAWPIPE_ROUNDS=K overrides.
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
  if (ctx.opts.rounds or 0) > 0 then K = ctx.opts.rounds
  else K = tonumber(os.getenv("WPGEN_TAWPIPE_ROUNDS") or ""); K_why = "set by WPGEN_TAWPIPE_ROUNDS" end
  if not K then
    K = 1
    while K < N and not fits(K) do K = K + 1 end
    K_why = K == 1 and "all micro-batches fit in memory" or "the fewest that fit in memory"
    if not fits(K) then K_why = "not even one micro-batch per round fits" end
  end
  K = math.max(1, math.min(K, N))
  if C == 1 then K = 1; K_why = "one chunk" end    -- nothing circulates between rounds
  if K > 1 then   -- the placement again, its bytes counted for K rounds
    for q = 0, R - 1 do
      local ranks = {}
      for i = 0, P - 1 do ranks[#ranks + 1] = q * P + i end
      sols[q] = plan:solve_placement(ranks, mode, K)
    end
  end
  local function round_mbs(j)
    local t = {}
    for i = j * N // K, (j + 1) * N // K - 1 do t[#t + 1] = i end
    return t
  end
  -- Uses of weights: {chunk, local turn, steps}; a step is the compute of one round on that
  -- chunk: "fwd", "bwd", or "fb" (forward then backward per micro-batch: the last chunk). Round j
  -- runs chunk c forward at jL + c and backward at jL + 2C-2-c (L = 2C-2), so the last chunk's
  -- two meet in one turn, and so do chunk 0's backward of round j and forward of round j+1.
  local L = 2 * C - 2
  local uses, bwds = {}, {}
  if C == 1 then
    local steps = {}
    for j = 0, K - 1 do steps[#steps + 1] = { kind = "fb", round = j } end
    uses[1] = { c = 0, tau = 0, steps = steps }
    bwds[1] = { c = 0, round = 0, tau = 0 }
  else
    for j = 0, K - 1 do
      for c = 0, C - 1 do
        if c == 0 and j > 0 then
          local prev = uses[#uses]               -- chunk 0's backward of round j-1
          prev.steps[#prev.steps + 1] = { kind = "fwd", round = j }
        else
          uses[#uses + 1] = { c = c, tau = j * L + c, steps = { { kind = c == C - 1 and "fb" or "fwd", round = j } } }
        end
      end
      for c = C - 2, 0, -1 do
        uses[#uses + 1] = { c = c, tau = j * L + 2 * C - 2 - c, steps = { { kind = "bwd", round = j } } }
      end
      for c = 0, C - 1 do
        bwds[#bwds + 1] = { c = c, round = j, tau = c == C - 1 and j * L + C - 1 or j * L + 2 * C - 2 - c }
      end
    end
  end

  -- everything is recorded first and emitted once the pools have named the buffers
  local xfers, colls, computes, accs = {}, {}, {}, {}
  local last_acc = {}          -- [q][c] the turn of the last ACC into g<c> at replica q's owner
  local owners = {}            -- [q][c]
  local function xfer(t, from, sbuf, to, rbuf, what)
    xfers[#xfers + 1] = { t = t, from = from, sbuf = sbuf, to = to, rbuf = rbuf, what = what }
  end

  for q = 0, R - 1 do
    local sol = sols[q]
    local groups, staging, owner = sol.groups, sol.staging, sol.owner
    local D = #groups
    local gpos = {}
    for j = 1, D do for _, r in ipairs(groups[j]) do gpos[r] = j - 1 end end
    local gid = {}
    for j = 1, D do if #groups[j] > 1 then gid[j - 1] = plan:group(groups[j]) end end
    local function T(j, tau) return tau + BASE + j end
    local grad_into = {}       -- [c:j][rank] = the buffer a backward of chunk c writes
    owners[q] = owner
    last_acc[q] = {}
    for c = 0, C - 1 do
      plan:owner(c, owner[c])
      plan:buffer(owner[c], "m" .. c, "W", { chunk = c, master = true })
      plan:buffer(owner[c], "g" .. c, "D", { chunk = c })
    end

    -- weights
    local where = {}           -- [j][use index][rank] = buffer (name or pool request)
    for j = 0, D - 1 do where[j] = {} end
    for ui, u in ipairs(uses) do
      local c, tau = u.c, u.tau
      local o = owner[c]
      local j0 = gpos[o]
      for j = 0, D - 1 do
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
          rootbuf = wpool:request(root, T(j, tau - 2), T(j, tau))
          xfer(T(j, tau - 2), sender, sbuf, root, rootbuf, "W")
        end
        at[root] = rootbuf
        if #members > 1 then
          local parts = {}
          for _, m in ipairs(members) do
            if m ~= root then at[m] = wpool:request(m, T(j, tau - 1), T(j, tau)) end
            parts[#parts + 1] = { rank = m, buf = at[m] }
          end
          colls[#colls + 1] = { kind = "bcast", t = T(j, tau - 1), group = gid[j], root = root, parts = parts, c = c }
        end
        -- the compute of this use
        for _, m in ipairs(members) do
          for _, st in ipairs(u.steps) do
            computes[#computes + 1] = { t = T(j, tau), rank = m, c = c, buf = at[m], kind = st.kind, round = st.round }
          end
        end
      end
    end

    -- gradients, per round
    for _, bw in ipairs(bwds) do
      local c, tb = bw.c, bw.tau
      local o = owner[c]
      local j0 = gpos[o]
      for j = 0, D - 1 do
        local members = groups[j + 1]
        local root = j == j0 and o or staging[j + 1]
        local into = {}
        local hold = #members > 1 and 2 or 1       -- turns after tb until the root passes it on
        for _, m in ipairs(members) do
          if m == o then into[m] = "g" .. c
          else into[m] = dpool:request(m, T(j, tb), T(j, tb + (m == root and hold or 1))) end
        end
        grad_into[c .. ":" .. j .. ":" .. bw.round] = into
        if #members > 1 then
          local parts = {}
          for _, m in ipairs(members) do parts[#parts + 1] = { rank = m, buf = into[m] } end
          colls[#colls + 1] = { kind = "reduce", t = T(j, tb + 1), group = gid[j], root = root, parts = parts, c = c }
        end
        local t_acc
        if j == j0 then
          t_acc = #members > 1 and T(j, tb + 1) or T(j, tb)
        else
          t_acc = T(j, tb + hold)
          local r = dpool:request(o, t_acc, t_acc)
          xfer(t_acc, root, into[root], o, r, "D")
          accs[#accs + 1] = { t = t_acc, rank = o, dst = "g" .. c, src = r }
        end
        if not last_acc[q][c] or t_acc > last_acc[q][c] then last_acc[q][c] = t_acc end
      end
    end
    -- which gradient buffer each backward writes
    for _, cmp in ipairs(computes) do
      if cmp.kind ~= "fwd" and not cmp.into and cmp.rank >= q * P and cmp.rank < (q + 1) * P then
        cmp.into = grad_into[cmp.c .. ":" .. gpos[cmp.rank] .. ":" .. cmp.round][cmp.rank]
      end
    end
  end

  wpool:assign()
  dpool:assign()
  for r = 0, ctx.opts.ranks - 1 do wpool:declare(r, r); dpool:declare(r, r) end

  -- emission: compute, transfers, collectives, ACC, then the update
  for _, cmp in ipairs(computes) do
    local w = bname(cmp.buf)
    for _, i in ipairs(round_mbs(cmp.round)) do
      local mb = cmp.rank * N + i
      if cmp.kind ~= "bwd" then plan:fwd(cmp.rank, cmp.t, cmp.c, mb, w) end
      if cmp.kind ~= "fwd" then plan:bwd(cmp.rank, cmp.t, cmp.c, mb, w, bname(cmp.into)) end
    end
  end
  for _, x in ipairs(xfers) do
    plan:send(x.from, x.t, x.what, bname(x.sbuf), x.to)
    plan:recv(x.to, x.t, x.what, bname(x.rbuf), x.from)
  end
  for _, k in ipairs(colls) do
    for _, part in ipairs(k.parts) do
      if k.kind == "bcast" then plan:bcast(part.rank, k.t, bname(part.buf), k.group, k.root)
      else plan:reduce(part.rank, k.t, bname(part.buf), k.group, k.root) end
    end
  end
  for _, a in ipairs(accs) do plan:acc(a.rank, a.t, a.dst, bname(a.src)) end
  for c = 0, C - 1 do
    local t = 0
    for q = 0, R - 1 do t = math.max(t, last_acc[q][c]) end
    if R > 1 then
      local members = {}
      for q = 0, R - 1 do members[#members + 1] = owners[q][c] end
      local g = plan:group(members)
      t = t + 1
      for q = 0, R - 1 do plan:allreduce(owners[q][c], t, "g" .. c, g) end
    end
    for q = 0, R - 1 do plan:opt(owners[q][c], t, c, "m" .. c, "g" .. c) end
  end

  -- what was chosen, and why
  local sol = sols[0]
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
  for r = 0, ctx.opts.ranks - 1 do
    wmax = math.max(wmax, wpool.count[r] or 0)
    dmax = math.max(dmax, dpool.count[r] or 0)
  end
  plan:note(string.format("tawpipe: %d chunks, %d groups %s%s; ring order (chunk@owner): %s",
    C, #sol.groups, sol.by_island and "by PCIe island" or "by node",
    R > 1 and string.format(" in each of %d replicas (gradients all-reduced across them at the owners)", R) or "",
    table.concat(gdesc, " -> ")))
  plan:note(string.format("solver (mode %s, %d placements costed), bytes per step and pipeline: %s", mode, sol.evaluated,
    describe_cost(sol.cost)))
  plan:note(string.format("published layout (groups per node, rank i of group k owns chunk (D*i+k) mod P): %s",
    describe_cost(sol.published)))
  plan:note(string.format("%d micro-batch%s per rank in %d round%s (%s); up to %d circulating weight and %d gradient buffers per rank",
    N, N > 1 and "es" or "", K, K > 1 and "s" or "", K_why, wmax, dmax))
end

return M
