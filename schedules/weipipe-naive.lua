-- about: weights circulate in a ring, forward then backward (WeiPipe §3.1)
-- weipipe-naive (WeiPipe §3.1): the weights circulate around the ring of each replica; every
-- rank runs all of its micro-batches forward through each chunk as it passes, then backward
-- through each chunk as it passes again; gradients follow the backward weights to the owners.
-- --pass-micro-batches K runs K of them per pass instead of all (weipipe.passes): the same plan
-- as weipipe-interleave's with that K.
local weipipe = require("weipipe")

return {
  build = function(plan, ctx)
    weipipe.build(plan, ctx, weipipe.passes(ctx, ctx.opts.micro_batches, ctx.opts.pass_micro_batches or 0))
  end,
  options = {
    weipipe.options.pass_micro_batches("all, one round"),
    weipipe.options.replicate_ends,
  },
  traits = weipipe.traits({ k_default = "all", all_forward = true }),
  label = weipipe.label,
}
