-- A tied model's two ends summed through gradient buffers that OPT does not read, which a plan with
-- --grad-precision bf16 keeps in bf16: the two sums would round apart from the owners' fp32. The
-- verifier must reject it (exit 1) by the rule that a tied sum is of fp32 gradients.
return {
  build = function(plan, ctx)
    local M = ctx.opts.ranks * ctx.opts.micro_batches
    local L = ctx.model.layers
    plan:chunks({ L // 2, L - L // 2 })
    for c = 0, 1 do
      plan:owner(c, c)
      plan:place(c, 0, c)
      plan:buffer(c, "m" .. c, "W", { chunk = c, master = true })
      plan:buffer(c, "g" .. c, "D", { chunk = c })
      plan:buffer(c, "d", "D", { chunk = c })
    end
    local t = 0
    for mb = 0, M - 1 do
      plan:fwd(0, t, 0, mb, "m0")
      plan:send(0, t + 1, "A", 1, mb, 1)
      plan:recv(1, t + 1, "A", 1, mb, 0)
      plan:fwd(1, t + 2, 1, mb, "m1")
      plan:bwd(1, t + 3, 1, mb, "m1", "d")
      plan:send(1, t + 4, "G", 1, mb, 0)
      plan:recv(0, t + 4, "G", 1, mb, 1)
      plan:bwd(0, t + 5, 0, mb, "m0", "d")
      t = t + 6
    end
    local g = plan:group({ 0, 1 })
    for c = 0, 1 do plan:tie_allreduce(c, t, "d", g) end
    for c = 0, 1 do
      plan:acc(c, t + 1, "g" .. c, "d")
      plan:opt(c, t + 1, c, "m" .. c, "g" .. c)
    end
  end,
}
