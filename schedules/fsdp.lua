-- about: fully sharded data parallel (ZeRO-3): all-gather weights per chunk, reduce-scatter gradients
-- fsdp: fully sharded data parallelism (ZeRO-3; PyTorch FSDP with one unit per chunk).
--
-- Every rank trains its own N micro-batches (rank gr: global micro-batches gr*N .. gr*N + N-1)
-- through the whole model, like plain data parallelism, but no rank holds the whole model:
-- chunk k's master weights (and AdamW state) are cut into P shards over the P ranks of a
-- replica, rank i holding shard i in "m<k>". Before a chunk computes, the replica all-gathers
-- it into a whole-chunk buffer; after its backward, the gradients are reduce-scattered so that
-- each rank gets the sum of its shard, and each rank updates its shard. With R replicas the
-- shard's gradient is then all-reduced among the R ranks holding the same shard (HSDP).
--
-- On the turn model, with C chunks (turns counted from 0):
--   turn k+1     FWD chunk k for the N micro-batches; all-gather chunk k+1 meanwhile (prefetch)
--   turn 2C-c    BWD chunk c for the N micro-batches; all-gather chunk c-1 meanwhile
--   turn 2C-c+1  reduce-scatter chunk c's gradient (overlapping the backward of chunk c-1),
--                then OPT of the shard (with replicas: all-reduce the shard one turn later)
-- Whole-chunk weights and gradients are double-buffered (w0/w1, d0/d1, chunk c in slot c%2):
-- a collective may not write a buffer that the same turn's compute uses. The last two chunks of
-- the forward are still in w0/w1 when the backward starts, so they are not gathered again.
--
-- Default chunks: one per layer (FSDP's usual wrapping: one unit per transformer block; the
-- first also holds the embedding, the last the final norm and the LM head). --chunks C takes
-- any C from 1 to the number of layers. A tied model over C > 1 chunks has two more, its ends
-- replicated on every rank (below, `ends`): the embedding, and the norm with the head mirror.
--
-- Two variants (--fsdp-variant):
--   gather-once  (the default, above) each chunk is gathered once for the forward of all N
--                micro-batches and once for their backward, and reduce-scattered once: the
--                least traffic, but every micro-batch's activations are held at once.
--   full-shard   PyTorch FSDP FULL_SHARD under gradient accumulation: the N micro-batches one
--                after the other, each a block of 2C+1 turns as above with N = 1: chunks gathered
--                for its forward and again for its backward (but the last two, still there),
--                its gradient reduce-scattered into "g<c>" (the first) or a shard buffer
--                "s<c>" added (ACC) into it (the others); OPT after the last micro-batch. N times the gathers and reduce-scatters,
--                one micro-batch's activations at a time.
--
-- --fsdp-overlap off: every collective in a turn of its own, so compute waits for each gather and
-- each reduce-scatter waits for the compute before it: FSDP whose communication does not overlap
-- its compute (a unit gathered when it is due, not one ahead), as the baseline of WeiPipe's Table 2
-- measured (docs/calibration.md). Per block of micro-batches, in order: gather 0, FWD 0, gather 1,
-- FWD 1, ..., then gather C-1, BWD C-1, reduce-scatter C-1, gather C-2, BWD C-2, ...: every chunk
-- gathered again for its backward, as PyTorch FSDP FULL_SHARD frees each unit after its forward.
local wp = require("wp")

return {
  build = function(plan, ctx)
    local P, R = wp.pipeline(ctx)
    local N = ctx.opts.micro_batches
    local variant = ctx.opts.fsdp_variant or "gather-once"
    if variant ~= "gather-once" and variant ~= "full-shard" then
      wp.bad_option("--fsdp-variant " .. variant, "expected gather-once or full-shard")
    end
    local per_mb = variant == "full-shard"
    local overlap = ctx.opts.fsdp_overlap or "on"
    if overlap ~= "on" and overlap ~= "off" then
      wp.bad_option("--fsdp-overlap " .. overlap, "expected on or off")
    end
    local serial = overlap == "off"
    local L = ctx.model.layers
    local layer_chunks = wp.chunk_count(ctx, L)
    -- a tied model over several chunks: the embedding and the final norm with the LM head (a
    -- mirror of the embedding) are chunks of their own, 0 and C + 1, replicated (every rank holds
    -- and updates a whole master of them: not gathered, their gradients all-reduced over all ranks,
    -- then summed by TIE on every rank), the layers' chunks 1 .. C sharded as below. Sharded, the
    -- two ends would lie on different ranks at different offsets (docs/strategies.md).
    local ends = wp.tied(ctx, layer_chunks)
    local cuts = wp.split_layers(L, layer_chunks)
    if ends then
      table.insert(cuts, 1, 0)
      cuts[#cuts + 1] = 0
    end
    plan:chunks(cuts)
    local C = #cuts
    local E, H = 0, C - 1
    local function rep(c) return ends and (c == E or c == H) end
    if ends then plan:replicate(E); plan:replicate(H) end
    -- the sharded chunks' last: the backward starts with the two the forward left gathered
    local last_sharded = ends and C - 2 or C - 1

    local function w(c) return "w" .. c % 2 end   -- whole weights of chunk c
    local function d(c) return "d" .. c % 2 end   -- chunk c's gradient over this rank's micro-batches
    -- The turns of a block of micro-batches, from its first: a gather one turn before the
    -- compute that uses it, a reduce-scatter one turn after the backward that made it. Overlapped,
    -- each shares its turn with the neighbouring chunk's compute, and the last two chunks of the
    -- forward are kept for the backward; serial (--fsdp-overlap off), each has a turn to itself
    -- and every chunk is gathered again for the backward, as PyTorch FSDP frees every unit but
    -- the root after its forward: per chunk, backward first, gather, BWD, reduce-scatter.
    local function fwd_turn(k) return serial and 2 * k + 1 or k + 1 end
    local function bwd_turn(c) return serial and 2 * C + 3 * (C - 1 - c) + 1 or 2 * C - c end
    local function kept(c) return not serial and c >= last_sharded - 1 end   -- not gathered for the backward
    local block_turns = serial and 5 * C or 2 * C + 1

    -- replica 0 (ranks 0 .. P-1); every replica is alike, so plan:copy_replica makes the others
    do
      local q = 0
      local members = {}
      for i = 0, P - 1 do members[#members + 1] = q * P + i end
      local replica = plan:group(members)     -- member i holds shard i
      local everyone                            -- the replicated ends' all-reduce: every rank of every replica
      if ends then
        local all = {}
        for r = 0, P * R - 1 do all[#all + 1] = r end
        everyone = plan:group(all)
      end

      for i = 0, P - 1 do
        local r = q * P + i
        plan:place(r, q, i)
        for c = 0, C - 1 do
          plan:owner(c, r)
          if rep(c) then
            plan:buffer(r, "m" .. c, "W", { chunk = c, master = true })
            plan:buffer(r, "g" .. c, "D", { chunk = c })
          else
            plan:buffer(r, "m" .. c, "W", { chunk = c, master = true, shard = i, nshards = P })
            plan:buffer(r, "g" .. c, "D", { chunk = c, shard = i, nshards = P })
          end
        end
        for _, name in ipairs({ "w0", "w1" }) do plan:buffer(r, name, "W") end
        for _, name in ipairs({ "d0", "d1" }) do plan:buffer(r, name, "D") end
        if per_mb and N > 1 then
          -- a sharded buffer is of one chunk: one per chunk (a shard each, 1/P of the chunk)
          for c = 0, C - 1 do
            if not rep(c) then plan:buffer(r, "s" .. c, "D", { chunk = c, shard = i, nshards = P }) end
          end
        end
        local shard_group
        if R > 1 then
          local same = {}
          for q2 = 0, R - 1 do same[#same + 1] = q2 * P + i end
          shard_group = plan:group(same)
        end
        -- the rank's own micro-batches, all in one block (gather-once) or a block each
        local blocks = {}
        for j = 0, N - 1 do
          local b = per_mb and j + 1 or 1
          blocks[b] = blocks[b] or {}
          table.insert(blocks[b], r * N + j)
        end
        for b, mbs in ipairs(blocks) do
          local base = (b - 1) * block_turns
          local last = b == #blocks
          -- forward: chunk k gathered the turn before it computes (beside chunk k-1's compute,
          -- or alone when serial)
          for k = 0, C - 1 do
            if rep(k) then
              for _, g in ipairs(mbs) do plan:fwd(r, base + fwd_turn(k), k, g, "m" .. k) end
            else
              plan:allgather(r, base + fwd_turn(k) - 1, "m" .. k, w(k), replica)
              for _, g in ipairs(mbs) do plan:fwd(r, base + fwd_turn(k), k, g, w(k)) end
            end
          end
          -- backward, last chunk first; overlapped, the last two sharded chunks are still
          -- gathered from the forward. With replicas, the shard's all-reduce a turn after its
          -- reduce-scatter (serial: in the next chunk's gather turn, still beside no compute)
          for c = C - 1, 0, -1 do
            local t = base + bwd_turn(c)
            if rep(c) then
              -- a replicated end: its own master, its gradient straight into g<c>, all-reduced
              -- over every rank after the last block (the head's first, as its backward is)
              for _, g in ipairs(mbs) do plan:bwd(r, t, c, g, "m" .. c, "g" .. c) end
              if last then plan:allreduce(r, t + 1, "g" .. c, everyone) end
              -- both ends here once the embedding's is: TIE, then both updates (the head's sum was
              -- there a few turns before)
              if last and c == E then wp.update_tied(plan, C, r, r, t + 1, t + 1) end
            else
              if not kept(c) then plan:allgather(r, t - 1, "m" .. c, w(c), replica) end
              for _, g in ipairs(mbs) do plan:bwd(r, t, c, g, w(c), d(c)) end
              -- this rank's shard of the replica's gradient, while chunk c-1 computes: the first
              -- block's into g<c>, a later one's into s<c>, added into g<c>
              if b > 1 then
                local sb = "s" .. c
                plan:reduce_scatter(r, t + 1, d(c), sb, replica)
                plan:acc(r, t + 1, "g" .. c, sb)
              else
                plan:reduce_scatter(r, t + 1, d(c), "g" .. c, replica)
              end
              if last then
                local u = t + 1
                if shard_group then
                  u = u + 1
                  plan:allreduce(r, u, "g" .. c, shard_group)
                end
                plan:opt(r, u, c, "m" .. c, "g" .. c)
              end
            end
          end
        end
      end
    end
    plan:copy_replica()

    plan:note(string.format("ZeRO-3 over %d rank%s%s, %d chunk%s; each rank runs its %d micro-batch%s through all of them; " ..
      "2 whole-chunk weight and 2 gradient buffers per rank",
      P, P > 1 and "s" or "", R > 1 and string.format(" x %d replicas (gradient shards all-reduced across them)", R) or "",
      C, C > 1 and "s" or "", N, N > 1 and "es" or ""))
    if ends then
      plan:note(string.format("tied embeddings: the embedding (chunk 0) and the norm with the LM head, its mirror (chunk %d), " ..
        "replicated on every rank, their gradients all-reduced over all %d ranks; TIE sums their gradients", H, P * R))
    end
    if serial then
      plan:note("--fsdp-overlap off: each gather and reduce-scatter in a turn of its own, compute waiting for it")
    end
    if per_mb then
      plan:note("variant full-shard: gathered for every micro-batch's forward and backward, reduce-scattered per " ..
        "micro-batch (PyTorch FSDP FULL_SHARD with gradient accumulation)")
    end
  end,
  options = {
    { name = "fsdp_variant", type = "choice", values = { "gather-once", "full-shard" }, default = "gather-once",
      search = { "gather-once", "full-shard" }, from_notes = "variant (full%-shard):",
      help = "gather-once gathers each chunk once per step; full-shard per micro-batch's forward and backward, " ..
        "as PyTorch FSDP FULL_SHARD under gradient accumulation" },
    { name = "fsdp_overlap", type = "choice", values = { "on", "off" }, default = "on", from_notes = "%-%-fsdp%-overlap (off):",
      help = "off puts every gather and reduce-scatter in a turn of its own, compute waiting for it: FSDP without overlap" },
  },
  -- what the search's bounds may assume (generator/search/bounds.c): every rank runs its own
  -- micro-batches through every chunk (weight passing), gathering whole chunks into two weight
  -- and two gradient buffers; gather-once runs them all forward first; one chunk per layer
  traits = function(o)
    local per_mb = o.fsdp_variant == "full-shard"
    return { passing = "weights", all_forward = not per_mb, gathers = true, gather_per_micro_batch = per_mb,
             default_chunks = "layers", recompute_never_faster = true, one_replica_bound = true }
  end,
  label = function(o, how)
    local off = o.fsdp_overlap == "off"
    if how == "name" then return "/" .. o.fsdp_variant .. (off and "/no-overlap" or "")
    elseif how == "auto-row" then return (o.fsdp_variant ~= "gather-once" and "/full-shard" or "") .. (off and "/no-overlap" or "")
    elseif how == "picked" then return " (" .. o.fsdp_variant .. ")" .. (off and " (no overlap)" or "")
    elseif how == "json" then return { { "fsdp_variant", o.fsdp_variant }, { "fsdp_overlap", not off } }
    elseif how == "auto-json" then return {}
    end
    return ""
  end,
}
