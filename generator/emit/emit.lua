-- The words and the layout of an emitted plan (wpgen emit). generator/emit/emit.c drives it: M.begin
-- with the plan's shape, then M.rank once per rank (its operations, with what the verifier
-- learnt about each), then M.files for the files that need every rank. It writes what these
-- return. The files' layout is in templates/*.tpl, rendered with Penlight's
-- pl.template: lines starting with "@" are Lua, ${expr} is replaced by the value of expr.
-- What each operation is called and how it is explained lives here, once (OPS below).
local template = require("pl.template")

local fmt, concat = string.format, table.concat

local M = {}
local P           -- the plan (M.begin)
local tpl = {}    -- compiled templates, by file name

-- ---- text helpers ----

-- Text from the outside world (strategy notes, model and topology names) inside a C comment.
local function comment_safe(s)
    return (tostring(s):gsub("%*/", "* /"):gsub("[%c]", " "))
end

-- A C string literal. Octal escapes (never hex, which would swallow following digits) and \?
-- so that no trigraph can form under -std=c11.
local function c_string(s)
    return '"' .. tostring(s):gsub('[%c"\\?]', function(ch)
        if ch == '"' or ch == "\\" or ch == "?" then return "\\" .. ch end
        return fmt("\\%03o", ch:byte())
    end) .. '"'
end

-- A float as a C float constant that reads back as the same float, with the fewest digits
-- (10000.0f, 1e-05f; never 9.99999975e-06f).
local function c_float(x)
    if x == math.floor(x) and math.abs(x) < 1e15 then return fmt("%.1ff", x) end
    local s
    for digits = 1, 9 do
        s = fmt("%." .. digits .. "g", x)
        if string.unpack("f", string.pack("f", tonumber(s))) == x then break end
    end
    return s .. "f"
end

-- A double, shortest first: 1e-06, not 9.9999999999999995e-07.
local function c_double(x)
    local s
    for digits = 1, 17 do
        s = fmt("%." .. digits .. "g", x)
        if tonumber(s) == x then break end
    end
    return s
end

local function human(b)
    local units = { "B", "KiB", "MiB", "GiB", "TiB" }
    local i = 1
    while b >= 1024 and i < #units do b = b / 1024; i = i + 1 end
    return i == 1 and fmt("%.0f %s", b, units[i]) or fmt("%.2f %s", b, units[i])
end

local function plural(n, word) return fmt("%d %s%s", n, word, n == 1 and "" or "s") end

-- "0, 1, 2" with a line break every `per` items (for long C initializers).
local function join(list, per, indent)
    local parts = {}
    for i, v in ipairs(list) do
        parts[#parts + 1] = tostring(v)
        if per and i % per == 0 and i < #list then parts[#parts] = parts[#parts] .. ",\n" .. indent
        elseif i < #list then parts[#parts] = parts[#parts] .. ", " end
    end
    return concat(parts)
end

-- Members of a group, short: "ranks 0-7", "ranks 0, 8, 16", "32 ranks".
local function ranks_text(list)
    local n = #list
    local contiguous = true
    for i = 2, n do if list[i] ~= list[i - 1] + 1 then contiguous = false end end
    if n == 1 then return "rank " .. list[1] end
    if contiguous then return fmt("ranks %d-%d", list[1], list[n]) end
    if n <= 6 then return "ranks " .. concat(list, ", ") end
    return fmt("%d ranks", n)
end

-- ---- buffer names ----

-- Names the emitted code may not take for a buffer's enum constant: C keywords, what stddef.h
-- and runtime/common/step.h declare, the step's parameter and functions.
local RESERVED = {}
for w in ([[auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local NULL offsetof size_t ptrdiff_t wchar_t
    max_align_t main R]]):gmatch("%S+") do RESERVED[w] = true end

local function clashes(name)
    return RESERVED[name] or name:match("^[Ww][Pp]_") or name:match("^Wp") or name:match("^step_rank_")
        or name:match("^__") or name:match("^_%u")
end

-- Enum names of a rank's buffers: the plan's names, prefixed with B_ only where they would clash.
local function buffer_ids(bufs)
    local taken = {}
    for _, b in ipairs(bufs) do if not clashes(b.name) then taken[b.name] = true end end
    for i, b in ipairs(bufs) do
        if clashes(b.name) then
            local id = "B_" .. b.name
            while taken[id] do id = id .. "_" .. (i - 1) end
            taken[id] = true
            b.id = id
        else
            b.id = b.name
        end
    end
end

-- ---- the summary every file starts with ----

local function chunk_text(c, i)
    local extra = {}
    if i == 1 then extra[#extra + 1] = "embedding" end
    if i == #P.chunks then extra[#extra + 1] = "final norm, LM head, loss" end
    local layers = c.nlayers == 1 and fmt("layer %d", c.layer0) or fmt("layers %d-%d", c.layer0, c.layer0 + c.nlayers - 1)
    if #extra > 0 then layers = layers .. " + " .. concat(extra, ", ") end
    local owners = {}
    for k = 1, math.min(#c.owners, 8) do owners[k] = c.owners[k] end
    local who = (#c.owners == 1 and "rank " or "ranks ") .. concat(owners, ", ")
    if #c.owners > 8 then who = who .. fmt(", ... (%d owners)", #c.owners) end
    return fmt("%-11s %s; owner%s %s", "chunk " .. (i - 1), layers, #c.owners == 1 and "" or "s", who)
end

local function summary_lines()
    local m = P.model
    local per = P.nranks // P.replicas
    local lines = {
        fmt("strategy    %s", P.strategy),
        fmt("cluster     %s: %s on %s, %s of %d", P.topo_name, plural(P.nranks, "rank"), plural(P.nnodes, "node"),
            plural(P.replicas, "replica"), per),
        fmt("model       %s: H=%d, %d layers, %d heads (%d kv), ffn %d, vocab %d, seq %d, %s per micro-batch",
            P.model_name, m.hidden, m.layers, m.heads, m.kv_heads, m.ffn, m.vocab, m.seq, plural(m.mbs, "sequence")),
        fmt("batch       %d micro-batches per step (%d per rank), %d turns, %s", P.total_mbs, P.micro_batches,
            P.nturns, plural(P.nops, "operation")),
    }
    local shown = math.min(#P.chunks, 64)
    for i = 1, shown do lines[#lines + 1] = chunk_text(P.chunks[i], i) end
    if shown < #P.chunks then lines[#lines + 1] = fmt("...         %d more chunks (plan.json)", #P.chunks - shown) end
    lines[#lines + 1] = fmt("traffic     %s inside nodes, %s between nodes per step", human(P.bytes_intra), human(P.bytes_inter))
    if P.step_time_s > 0 then
        lines[#lines + 1] = fmt("predicted   %.4g s per step, bubble %.1f%% (wpgen's simulator, on this topology)",
            P.step_time_s, 100 * P.bubble_ratio)
    end
    lines[#lines + 1] = fmt("memory      peak %s (rank %d)", human(P.peak_mem), P.peak_rank)
    lines[#lines + 1] = fmt("backend     %s (compute), %s (communication)%s", P.backend, P.comm,
        P.recompute ~= 0 and ", activations recomputed" or "")
    for line in tostring(P.notes or ""):gmatch("[^\n]+") do lines[#lines + 1] = "notes       " .. line end
    for i, l in ipairs(lines) do lines[i] = comment_safe(l) end
    return lines
end

local function header_c(lines)
    local out = { "/*" }
    for _, l in ipairs(lines) do out[#out + 1] = " * " .. l end
    out[#out + 1] = " */"
    return concat(out, "\n")
end

local function header_hash(lines)
    local out = {}
    -- No backslash at the end: make would continue the comment onto the next line.
    for _, l in ipairs(lines) do out[#out + 1] = ("# " .. l):gsub("\\+$", "") end
    return concat(out, "\n")
end

-- ---- operations: the call, its comment, its token in schedule.txt ----

local R         -- the rank being rendered (M.rank)
local IDS, KINDS = {}, {}   -- its buffers' enum names and kinds ("W", "D"), by plan index
local ORIGIN = {}           -- origin() by buffer and source operation: many computations share one
local CARRIED = { W = {}, D = {} }   -- "W3", "D3" by chunk

local function bid(i) return IDS[i] end
local function bkind(i) return KINDS[i] end

-- What a transfer or collective carries: W3, D3, W3[1/4] (shard 1 of 4).
local function carried(op, letter)
    letter = letter or bkind(op.buf)
    if (op.nshards or 1) > 1 then return fmt("%s%d[%d/%d]", letter, op.nchunk, op.shard, op.nshards) end
    local s = CARRIED[letter][op.nchunk]
    if not s then s = letter .. op.nchunk; CARRIED[letter][op.nchunk] = s end
    return s
end

local function group_text(g) return fmt("group %d (%s)", g, P.groups[g + 1].text) end

-- Why a received or copied value is there: the next operation of this rank that uses it.
local USE = {
    FWD = "FWD", BWD = "BWD", BWD_B = "BWD_B", BWD_W = "BWD_W", SEND = "passing on", BCAST = "BCAST",
    REDUCE = "REDUCE", ALLREDUCE = "ALLREDUCE", ALLGATHER = "ALLGATHER", REDUCE_SCATTER = "REDUCE_SCATTER",
    ACC = "ACC", COPY = "COPY", OPT = "OPT", FREE = "FREE (unused)",
}
local function purpose(op)
    local u = op.use and R.ops[op.use]
    if not u then return ", not used again this step" end
    return fmt(", for %s at turn %d", USE[u.kind], u.turn)
end

-- Where the weights a computation uses came from.
local function origin_text(op)
    local b = R.bufs[op.buf + 1]
    local w = "W" .. op.chunk
    if b.master then return w .. fmt(" (%s: this rank's master)", b.id) end
    local src = op.src and R.ops[op.src]
    if op.from_rank then
        if src and src.kind == "BCAST" then
            return fmt("%s, which rank %d broadcast at turn %d", w, op.from_rank, op.from_turn)
        end
        return fmt("%s, which came from rank %d at turn %d", w, op.from_rank, op.from_turn)
    end
    if src and src.kind == "COPY" then return fmt("%s, copied from its master at turn %d", w, src.turn) end
    if src and src.kind == "ALLGATHER" then return fmt("%s, all-gathered at turn %d", w, src.turn) end
    return w
end

local function origin(op)
    local key = op.buf * 16777216 + (op.src or 0)
    local s = ORIGIN[key]
    if not s then s = origin_text(op); ORIGIN[key] = s end
    return s
end

local function first_text(op, dst)
    return op.first and fmt("into %s (first contribution: written, not added)", dst) or fmt("added into %s", dst)
end

local function act_text(op)
    return op.what == "A" and fmt("input of chunk %d for mb %d", op.chunk, op.mb)
        or fmt("gradient of chunk %d's input for mb %d", op.chunk, op.mb)
end

local function flag(b) return b and 1 or 0 end

-- kind = { phase, call(op), comment(op), token(op) }; phase: "comm", "compute" or "local".
local OPS = {
    FWD = { "compute",
        function(o) return fmt("wp_fwd(R, %d, %d, %s);", o.chunk, o.mb, bid(o.buf)) end,
        function(o)
            local last = o.chunk == #P.chunks - 1 and " (and the loss)" or ""
            return fmt("turn %d: FWD chunk %d of mb %d%s with %s", o.turn, o.chunk, o.mb, last, origin(o))
        end,
        function(o) return fmt("F%d.%d", o.chunk, o.mb) end },
    BWD = { "compute",
        function(o) return fmt("wp_bwd(R, %d, %d, %s, %s, %d);", o.chunk, o.mb, bid(o.buf), bid(o.buf2), flag(o.first)) end,
        function(o)
            return fmt("turn %d: BWD chunk %d of mb %d with %s; gradient %s", o.turn, o.chunk, o.mb, origin(o),
                       first_text(o, bid(o.buf2)))
        end,
        function(o) return fmt("B%d.%d", o.chunk, o.mb) end },
    BWD_B = { "compute",
        function(o) return fmt("wp_bwd_b(R, %d, %d, %s);", o.chunk, o.mb, bid(o.buf)) end,
        function(o)
            return fmt("turn %d: BWD_B chunk %d of mb %d with %s: input gradient only, BWD_W follows", o.turn,
                       o.chunk, o.mb, origin(o))
        end,
        function(o) return fmt("b%d.%d", o.chunk, o.mb) end },
    BWD_W = { "compute",
        function(o) return fmt("wp_bwd_w(R, %d, %d, %s, %d);", o.chunk, o.mb, bid(o.buf2), flag(o.first)) end,
        function(o)
            return fmt("turn %d: BWD_W chunk %d of mb %d: weight gradient %s", o.turn, o.chunk, o.mb, first_text(o, bid(o.buf2)))
        end,
        function(o) return fmt("w%d.%d", o.chunk, o.mb) end },
    SEND = { "comm",
        function(o)
            if o.what == "A" or o.what == "G" then
                return fmt("wp_send_act(R, %s, %d, %d, %d);", o.what == "A" and "WP_ACT" or "WP_GRAD", o.chunk, o.mb, o.peer)
            end
            return fmt("wp_send(R, %s, %d, %d, %d, %d);", bid(o.buf), o.nchunk, o.shard, o.nshards, o.peer)
        end,
        function(o)
            local what = (o.what == "A" or o.what == "G") and act_text(o) or carried(o, o.what)
            local s = fmt("%s to rank %d (its turn %d)", what, o.peer, o.from_turn)
            if o.what == "D" then s = s .. "; passed on, not kept" end
            return s
        end,
        function(o)
            if o.what == "A" or o.what == "G" then return fmt("send %s%d.%d>r%d", o.what, o.chunk, o.mb, o.peer) end
            return fmt("send %s>r%d", carried(o, o.what), o.peer)
        end },
    RECV = { "comm",
        function(o)
            if o.what == "A" or o.what == "G" then
                return fmt("wp_recv_act(R, %s, %d, %d, %d);", o.what == "A" and "WP_ACT" or "WP_GRAD", o.chunk, o.mb, o.peer)
            end
            return fmt("wp_recv(R, %s, %d, %d, %d, %d);", bid(o.buf), o.nchunk, o.shard, o.nshards, o.peer)
        end,
        function(o)
            if o.what == "A" or o.what == "G" then
                return fmt("%s from rank %d (its turn %d)", act_text(o), o.peer, o.from_turn)
            end
            return fmt("%s from rank %d (its turn %d)%s", carried(o, o.what), o.peer, o.from_turn, purpose(o))
        end,
        function(o)
            if o.what == "A" or o.what == "G" then return fmt("recv %s%d.%d<r%d", o.what, o.chunk, o.mb, o.peer) end
            return fmt("recv %s<r%d", carried(o, o.what), o.peer)
        end },
    BCAST = { "comm",
        function(o) return fmt("wp_bcast(R, %s, %d, %d, %d, %d, %d);", bid(o.buf), o.nchunk, o.shard, o.nshards, o.group, o.peer) end,
        function(o)
            if o.peer == R.rank then return fmt("%s to the rest of %s, this rank is the root", carried(o), group_text(o.group)) end
            return fmt("%s from rank %d over %s%s", carried(o), o.peer, group_text(o.group), purpose(o))
        end,
        function(o) return fmt("bcast %s@g%d:r%d", carried(o), o.group, o.peer) end },
    REDUCE = { "comm",
        function(o) return fmt("wp_reduce(R, %s, %d, %d, %d, %d, %d);", bid(o.buf), o.nchunk, o.shard, o.nshards, o.group, o.peer) end,
        function(o)
            if o.peer == R.rank then return fmt("%s summed over %s into this rank%s", carried(o), group_text(o.group), purpose(o)) end
            return fmt("%s summed over %s into rank %d; passed on, not kept", carried(o), group_text(o.group), o.peer)
        end,
        function(o) return fmt("reduce %s@g%d:r%d", carried(o), o.group, o.peer) end },
    ALLREDUCE = { "comm",
        function(o) return fmt("wp_allreduce(R, %s, %d, %d, %d, %d);", bid(o.buf), o.nchunk, o.shard, o.nshards, o.group) end,
        function(o) return fmt("%s summed over %s, on every member%s", carried(o), group_text(o.group), purpose(o)) end,
        function(o) return fmt("allreduce %s@g%d", carried(o), o.group) end },
    ALLGATHER = { "comm",
        function(o) return fmt("wp_allgather(R, %s, %s, %d, %d);", bid(o.buf), bid(o.buf2), o.nchunk, o.group) end,
        function(o)
            return fmt("W%d gathered from its %d shards over %s into %s%s", o.nchunk, #P.groups[o.group + 1].ranks,
                       group_text(o.group), bid(o.buf2), purpose(o))
        end,
        function(o) return fmt("allgather W%d@g%d", o.nchunk, o.group) end },
    REDUCE_SCATTER = { "comm",
        function(o) return fmt("wp_reduce_scatter(R, %s, %s, %d, %d);", bid(o.buf), bid(o.buf2), o.nchunk, o.group) end,
        function(o)
            return fmt("D%d summed over %s; this rank keeps its shard in %s%s", o.nchunk, group_text(o.group),
                       bid(o.buf2), purpose(o))
        end,
        function(o) return fmt("rscatter D%d@g%d", o.nchunk, o.group) end },
    ACC = { "local",
        function(o) return fmt("wp_acc(R, %s, %s, %d, %d);", bid(o.buf), bid(o.buf2), o.nchunk, flag(o.first)) end,
        function(o)
            if o.first then return fmt("%s = %s: D%d (%s held nothing: written, not added)", bid(o.buf), bid(o.buf2), o.nchunk, bid(o.buf)) end
            return fmt("%s += %s: %s's part of D%d added%s", bid(o.buf), bid(o.buf2), bid(o.buf2), o.nchunk, purpose(o))
        end,
        function(o) return fmt("acc D%d", o.nchunk) end },
    COPY = { "local",
        function(o) return fmt("wp_copy(R, %s, %s, %d);", bid(o.buf), bid(o.buf2), o.nchunk) end,
        function(o) return fmt("%s = %s: W%d%s", bid(o.buf), bid(o.buf2), o.nchunk, purpose(o)) end,
        function(o) return fmt("copy W%d", o.nchunk) end },
    OPT = { "local",
        function(o) return fmt("wp_opt(R, %d, %s, %s);", o.chunk, bid(o.buf), bid(o.buf2)) end,
        function(o)
            local b = R.bufs[o.buf + 1]
            if b.nshards > 1 then
                return fmt("AdamW on shard %d of %d of chunk %d, which this rank owns", b.shard, b.nshards, o.chunk)
            end
            return fmt("AdamW on chunk %d, which this rank owns", o.chunk)
        end,
        function(o) return fmt("opt %d", o.chunk) end },
    FREE = { "local",
        function(o) return fmt("wp_free(R, %s);", bid(o.buf)) end,
        function(o)
            local held = o.held and bkind(o.buf) .. o.held
            if held and held ~= bid(o.buf) then return fmt("%s (%s) is not needed again this step", bid(o.buf), held) end
            return fmt("%s is not needed again this step", bid(o.buf))
        end,
        function(o) return o.held and fmt("free %s%d", bkind(o.buf), o.held) or fmt("free (%s)", bid(o.buf)) end },
}

-- Where each kind's lines and schedule tokens go in a turn.
for _, info in pairs(OPS) do info.phase = info[1] == "comm" and 1 or info[1] == "compute" and 2 or 3 end

-- ---- M: what emit.c calls ----

-- The plan's shape: everything but the operations (see emit_push_plan in generator/emit/emit_data.c).
-- emit.c runs several Lua states side by side, each begun with the same plan and given some of
-- the ranks, so nothing a rank's text says may depend on the ranks rendered before it.
function M.begin(plan)
    P = plan
    for _, g in ipairs(P.groups) do g.text = ranks_text(g.ranks) end
    local lines = summary_lines()
    P.first_c = fmt("/* Code generated by wpgen %s from plan %s. DO NOT EDIT. */", P.version, P.hash)
    P.first_hash = fmt("# Code generated by wpgen %s from plan %s. DO NOT EDIT.", P.version, P.hash)
    P.header_c = header_c(lines)
    P.header_hash = header_hash(lines)
    P.summary = concat(lines, "\n")
    P.width = math.max(3, #tostring(P.nranks - 1))
    for _, name in ipairs({ "rank.c", "plan.h", "plan_desc.c", "main.c", "Makefile", "README", "rankfile", "schedule.txt" }) do
        local path = P.templates .. "/" .. name .. ".tpl"
        local f = assert(io.open(path, "rb"))
        local text = f:read("a")
        f:close()
        local ct, err = template.compile(text, { chunk_name = "@" .. name .. ".tpl", escape = "@",
                                                 inline_escape = "$", inline_brackets = "{}" })
        if not ct then error(name .. ".tpl: " .. tostring(err), 0) end
        tpl[name] = ct
    end
end

local function render(name, env)
    env.P, env.fmt, env.concat, env.c_string, env.c_float, env.c_double, env.join, env.human =
        P, fmt, concat, c_string, c_float, c_double, join, human
    local out, err = tpl[name]:render(env, _G)
    if not out then error(name .. ".tpl: " .. tostring(err), 0) end
    return out
end

function M.schedule_header()
    return render("schedule.txt", {})
end

-- One rank: returns its file name, its C source and its lines of schedule.txt.
-- rank = { rank, node, node_name, replica, stage, bufs = { {name, kind, master, chunk, shard,
-- nshards, bytes} }, ops = { {kind, turn, what, buf, buf2, chunk, mb, peer, group, nchunk,
-- from_rank, from_turn, first, shard, nshards, src, use, held} } } (absent fields: none).
function M.rank(rank)
    R = rank
    buffer_ids(R.bufs)
    IDS, KINDS, ORIGIN, CARRIED = {}, {}, {}, { W = {}, D = {} }
    for i, b in ipairs(R.bufs) do IDS[i - 1], KINDS[i - 1] = b.id, b.kind end
    R.id = fmt("%0" .. P.width .. "d", R.rank)
    R.node_text = comment_safe(R.node_name)

    -- Every operation's line; the calls padded so that the comments line up.
    local ops = R.ops
    local calls, width = {}, 0
    for i = 1, #ops do
        local o = ops[i]
        local c = OPS[o.kind][2](o)
        calls[i] = c
        if #c > width then width = #c end
    end
    width = math.min(width, 48)
    local pad = "    %-" .. width .. "s  /* %s */\n"

    -- Turn by turn: the lines of each phase joined into one string (the template lays them out),
    -- the tokens of schedule.txt, and a comment for each stretch of idle turns.
    local turns, sched = {}, {}
    local lines, tokens, count = { {}, {}, {} }, { {}, {}, {} }, { 0, 0, 0 }   -- by phase: comm, compute, local
    local i, n, last_busy = 1, #ops, -1
    local function idle(from, to)
        turns[#turns + 1] = { gap = to > from and fmt("turns %d-%d: nothing to do", from, to)
                                              or fmt("turn %d: nothing to do", from) }
    end
    local function joined(list, k, sep) return k > 0 and concat(list, sep, 1, k) or (sep == "" and "" or "-") end
    for t = 0, P.nturns - 1 do
        if i <= n and ops[i].turn == t then
            count[1], count[2], count[3] = 0, 0, 0
            while i <= n and ops[i].turn == t do
                local o = ops[i]
                local info = OPS[o.kind]
                local phase = info.phase
                local k = count[phase] + 1
                count[phase] = k
                lines[phase][k] = fmt(pad, calls[i], info[3](o))
                tokens[phase][k] = info[4](o)
                i = i + 1
            end
            if t > last_busy + 1 then idle(last_busy + 1, t - 1) end
            last_busy = t
            local summary = fmt("%s | %s | %s", joined(tokens[2], count[2], " "), joined(tokens[1], count[1], " "),
                                joined(tokens[3], count[3], " "))
            turns[#turns + 1] = { turn = t, summary = summary, comm = joined(lines[1], count[1], ""),
                                  compute = joined(lines[2], count[2], ""), locals = joined(lines[3], count[3], "") }
            sched[#sched + 1] = fmt("r%d t%d: %s", R.rank, t, summary)
        else
            sched[#sched + 1] = fmt("r%d t%d: -", R.rank, t)
        end
    end
    if last_busy < P.nturns - 1 then idle(last_busy + 1, P.nturns - 1) end
    sched[#sched + 1] = ""

    local nbusy = 0
    for _, e in ipairs(turns) do if e.turn then nbusy = nbusy + 1 end end
    for _, b in ipairs(R.bufs) do
        local what = b.kind == "W" and "weights" or "weight gradient"
        if b.master then what = "master weights (and AdamW state)" end
        local of = b.chunk >= 0 and fmt("of chunk %d", b.chunk) or "sized for the largest chunk"
        if b.nshards > 1 then of = fmt("shard %d of %d %s", b.shard, b.nshards, of) end
        b.about = fmt("%s %s, %s", what, of, human(b.bytes))
    end
    local src = render("rank.c", { r = R, turns = turns, nbusy = nbusy, plural = plural })
    return "rank_" .. R.id .. ".c", src, concat(sched, "\n")
end

-- The files that need every rank, given as M.rank gets them but without their operations:
-- { {name, text}, ... } in a fixed order.
function M.files(ranks)
    for _, d in ipairs(ranks) do
        buffer_ids(d.bufs)
        d.id = fmt("%0" .. P.width .. "d", d.rank)
    end
    local files = {}
    for _, name in ipairs({ "plan.h", "plan_desc.c", "main.c", "Makefile", "README", "rankfile" }) do
        files[#files + 1] = { name, render(name, { ranks = ranks, plural = plural }) }
    end
    return files
end

return M
