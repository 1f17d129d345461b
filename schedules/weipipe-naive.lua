-- about: weights circulate in a ring, forward then backward (WeiPipe §3.1)
-- weipipe-naive (WeiPipe §3.1): the weights circulate around the ring of each replica; every
-- rank runs all of its micro-batches forward through each chunk as it passes, then backward
-- through each chunk as it passes again; gradients follow the backward weights to the owners.
local weipipe = require("weipipe")

return {
  build = function(plan, ctx)
    weipipe.build(plan, ctx, {
      rounds = function(N) return 1 end,
      round_mbs = function(j, N)
        local all = {}
        for i = 0, N - 1 do all[#all + 1] = i end
        return all
      end,
    })
  end,
}
