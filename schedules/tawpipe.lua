-- about: topology-aware groups, fixed owners, intra-node collectives, inter-node staging (TawPipe)
-- tawpipe (TawPipe, AAAI 2026): ranks grouped by node (or PCIe island), each chunk with one fixed
-- owner; inside a group weights move by BCAST and gradients by REDUCE over the fast links, and
-- between groups one copy of each chunk travels point to point per pass, prefetched while the
-- current chunk computes. Groups, ring order, staging ranks and owners come from the placement
-- solver (generator/place/placement.c). See schedules/lib/tawpipe.lua.
local tawpipe = require("tawpipe")

return {
  build = function(plan, ctx) tawpipe.build(plan, ctx) end,
  options = {
    { name = "rounds", type = "int", min = 1, max = 16384, default = 0,
      search = function(c)   -- the solver's choice (the fewest whose memory fits), and 1, 2, 4, ... up to N
        local v, r = { 0 }, 1
        while r <= c.micro_batches and #v < 16 do v[#v + 1] = r; r = r * 2 end
        return v
      end,
      help = "micro-batch rounds per step (default: the solver's choice, the fewest whose memory fits)" },
    { name = "grouping", type = "choice", values = { "auto", "node", "island", "published" }, default = "auto",
      help = "how ranks are grouped: the solver's choice, by node, by PCIe island, or the paper's published layout" },
  },
  -- the bounds' groups walk (generator/search/bounds.c) runs the placement solver with these
  traits = function(o)
    return { passing = "weights", groups = true, group_rounds = o.rounds, group_mode = o.grouping, one_replica_bound = true }
  end,
  label = tawpipe.label,
}
