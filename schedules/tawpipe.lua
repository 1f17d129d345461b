-- about: topology-aware groups, fixed owners, intra-node collectives, inter-node staging (TawPipe)
-- tawpipe (TawPipe, AAAI 2026): ranks grouped by node (or PCIe island), each chunk with one fixed
-- owner; inside a group weights move by BCAST and gradients by REDUCE over the fast links, and
-- between groups one copy of each chunk travels point to point per pass, prefetched while the
-- current chunk computes. Groups, ring order, staging ranks and owners come from the placement
-- solver (generator/place/placement.c). See schedules/lib/tawpipe.lua.
local tawpipe = require("tawpipe")

return {
  build = function(plan, ctx) tawpipe.build(plan, ctx) end,
}
