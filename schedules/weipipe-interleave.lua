-- about: one backward + one forward per turn, two weight streams + one gradient stream (WeiPipe §3.2)
-- weipipe-interleave (WeiPipe §3.2): one micro-batch per round, so once the ring is full every
-- turn runs one backward and one forward; two weight streams (forward, backward) and one
-- gradient stream move one hop per turn.
local weipipe = require("weipipe")

return {
  build = function(plan, ctx)
    weipipe.build(plan, ctx, {
      rounds = function(N) return N end,
      round_mbs = function(j, N) return { j } end,
    })
  end,
}
