-- A plan with replicated ends (plan:replicate, ir/plan.h) that verifies, and, chosen by --chunks
-- (a fixture's switch, not chunks), one rule of replicated chunks broken: 1 the embedding computed
-- with a copy of its master instead of the master, 2 rank 1 without the head's master, 3 rank 0
-- sending the head's weights, 4 the LM head's chunk left unmarked (a chunk without layers that is
-- not replicated). --chunks 5: the valid plan. test_cli.sh checks each message.
return {
  build = function(plan, ctx)
    local P, N, break_ = ctx.opts.ranks, ctx.opts.micro_batches, ctx.opts.chunks
    plan:chunks({ 0, ctx.model.layers, 0 })
    plan:replicate(0)
    if break_ ~= 4 then plan:replicate(2) end
    local all = {}
    for r = 0, P - 1 do all[#all + 1] = r end
    local group = plan:group(all)
    plan:owner(1, 0)
    plan:buffer(0, "m1", "W", { chunk = 1, master = true })
    for r = 0, P - 1 do
      for _, c in ipairs({ 0, 2 }) do
        if not (break_ == 2 and r == 1 and c == 2) then
          plan:owner(c, r)
          plan:buffer(r, "m" .. c, "W", { chunk = c, master = true })
        end
        plan:buffer(r, "g" .. c, "D", { chunk = c })
      end
      plan:buffer(r, "w", "W", { chunk = 1 })
      plan:buffer(r, "c", "W", { chunk = 0 })
      plan:buffer(r, "h", "W", { chunk = 2 })
      plan:buffer(r, "d", "D", { chunk = 1 })
    end
    for r = 1, P - 1 do plan:send(0, 0, "W", "m1", r); plan:recv(r, 0, "W", "w", 0) end
    if break_ == 3 then plan:send(0, 0, "W", "m2", 1); plan:recv(1, 0, "W", "h", 0) end
    for r = 0, P - 1 do
      local w = r == 0 and "m1" or "w"
      local emb, head = "m0", (break_ == 2 and r == 1) and "h" or "m2"
      if break_ == 1 then plan:copy(r, 0, "c", "m0"); emb = "c" end
      for i = 0, N - 1 do
        local mb = r * N + i
        plan:fwd(r, 1, 0, mb, emb)
        plan:fwd(r, 1, 1, mb, w)
        plan:fwd(r, 1, 2, mb, head)
        plan:bwd(r, 2, 2, mb, head, "g2")
        plan:bwd(r, 2, 1, mb, w, "d")
        plan:bwd(r, 2, 0, mb, "m0", "g0")
      end
    end
    for r = 1, P - 1 do
      plan:buffer(0, "in" .. r, "D", { chunk = 1 })
      plan:send(r, 3, "D", "d", 0)
      plan:recv(0, 3, "D", "in" .. r, r)
      plan:acc(0, 3, "d", "in" .. r)
    end
    plan:opt(0, 4, 1, "m1", "d")
    for r = 0, P - 1 do
      for _, c in ipairs({ 2, 0 }) do
        plan:allreduce(r, 3, "g" .. c, group)
        if not (break_ == 2 and r == 1 and c == 2) then plan:opt(r, 4, c, "m" .. c, "g" .. c) end
      end
    end
  end,
}
