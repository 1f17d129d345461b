-- about: one backward + one forward per turn, two weight streams + one gradient stream (WeiPipe §3.2)
-- weipipe-interleave (WeiPipe §3.2): one micro-batch per round, so once the ring is full every
-- turn runs one backward and one forward; two weight streams (forward, backward) and one
-- gradient stream move one hop per turn. --pass-micro-batches K runs K micro-batches per round
-- (weipipe.passes): the weights go round N/K times instead of N.
local weipipe = require("weipipe")

return {
  build = function(plan, ctx)
    weipipe.build(plan, ctx, weipipe.passes(ctx, 1, ctx.opts.pass_micro_batches or 0))
  end,
  options = {
    weipipe.options.pass_micro_batches("1: one micro-batch per round", weipipe.search_k),
    weipipe.options.replicate_ends,
  },
  traits = weipipe.traits({ k_default = 1 }),
  label = weipipe.label,
}
