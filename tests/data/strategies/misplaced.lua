-- A plan that verifies everything but one thing: plan:place puts rank 0 in replica 1000000 of a
-- one-replica plan (the runtime would train it with no gradient norm and checkpoint zeros). The
-- verifier must reject it (exit 1).
return {
  build = function(plan, ctx)
    local P = ctx.opts.ranks
    plan:chunks({ ctx.model.layers })
    plan:owner(0, 0)
    plan:buffer(0, "m0", "W", { chunk = 0, master = true })
    for r = 0, P - 1 do
      plan:buffer(r, "w", "W", { chunk = 0 })
      plan:buffer(r, "d", "D", { chunk = 0 })
    end
    for r = 1, P - 1 do plan:recv(r, 0, "W", "w", 0) ; plan:send(0, 0, "W", "m0", r) end
    for r = 0, P - 1 do
      local w = r == 0 and "m0" or "w"
      for i = 0, ctx.opts.micro_batches - 1 do
        local mb = r * ctx.opts.micro_batches + i
        plan:fwd(r, 1, 0, mb, w)
        plan:bwd(r, 2, 0, mb, w, "d")
      end
    end
    for r = 1, P - 1 do
      plan:buffer(0, "in" .. r, "D", { chunk = 0 })
      plan:send(r, 3, "D", "d", 0)
      plan:recv(0, 3, "D", "in" .. r, r)
      plan:acc(0, 3, "d", "in" .. r)
    end
    plan:opt(0, 4, 0, "m0", "d")
    plan:place(0, 1000000, 0)
  end,
}
