-- about: test strategy: data parallel, gradients all-reduced in --buckets B buckets as their backward ends (tests/cli/test_declare.sh)
-- buckets: the proof that a strategy with an option of its own needs no line of C (issue 27):
-- plain data parallelism (every rank a replica holding the whole model), the model cut into B
-- chunks ("buckets", as PyTorch DDP buckets its gradients); on the last micro-batch each bucket's
-- gradient is all-reduced in the turn after its backward, while the backward of the next bucket
-- computes, and updated there. --buckets B is declared below (type, range, default, help, the
-- values the search tries) and reaches build as ctx.opts.buckets; the label says it in compare.
local wp = require("wp")

return {
  build = function(plan, ctx)
    local P, N, L = ctx.opts.ranks, ctx.opts.micro_batches, ctx.model.layers
    if ctx.opts.replicas ~= P then
      wp.bad_option(string.format("--replicas %d", ctx.opts.replicas), string.format("buckets: expected %d (every rank is a replica)", P))
    end
    if ctx.opts.chunks ~= 0 then
      wp.bad_option(string.format("--chunks %d", ctx.opts.chunks), "buckets: the chunks are its --buckets")
    end
    local B = ctx.opts.buckets
    if B > L then wp.bad_option(string.format("--buckets %d", B), string.format("expected at most the model's %d layers", L)) end
    if B > 1 and ctx.model.tied ~= 0 then wp.bad_option(string.format("--buckets %d", B), "the model ties its embedding and LM head: one bucket") end
    plan:chunks(wp.split_layers(L, B))
    local all = {}
    for r = 0, P - 1 do all[#all + 1] = r end
    local everyone = plan:group(all)
    for r = 0, P - 1 do
      for c = 0, B - 1 do
        plan:owner(c, r)
        plan:buffer(r, "m" .. c, "W", { chunk = c, master = true })
        plan:buffer(r, "g" .. c, "D", { chunk = c })
      end
      local t = 0
      for i = 0, N - 1 do
        local mb = r * N + i
        for c = 0, B - 1 do plan:fwd(r, t, c, mb, "m" .. c); t = t + 1 end
        for c = B - 1, 0, -1 do
          plan:bwd(r, t, c, mb, "m" .. c, "g" .. c)
          t = t + 1
          if i == N - 1 then   -- its last backward is done: all-reduced while the next bucket's runs
            plan:allreduce(r, t, "g" .. c, everyone)
            plan:opt(r, t, c, "m" .. c, "g" .. c)
          end
        end
      end
    end
    plan:note(string.format("buckets: data parallel over %d ranks, gradients all-reduced in %d bucket%s", P, B, B > 1 and "s" or ""))
  end,
  options = {
    { name = "buckets", type = "int", min = 1, max = 64, default = 1, search = { 1, 2, 4 },
      from_notes = "in (%d+) bucket",
      help = "chunks of the model whose gradients are all-reduced one by one, each as soon as its last backward ends" },
  },
  label = function(o, how, flags)
    if how == "row" or how == "auto-row" then return o.buckets ~= (flags.buckets or 1) and ("/b" .. o.buckets) or ""
    elseif how == "picked-after" then return string.format(", %d bucket%s", o.buckets, o.buckets > 1 and "s" or "")
    elseif how == "json" or how == "auto-json" then return { { "buckets", o.buckets } }
    end
    return ""
  end,
}
