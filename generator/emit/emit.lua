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
    lines[#lines + 1] = fmt("backend     %s%s", P.backend, P.recompute ~= 0 and ", activations recomputed" or "")
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

-- What emit.c renders for every operation, from these formats: "{name}" is replaced by a field of
-- the operation (its numbers, its buffers' names) or by a phrase, itself a format, of which the
-- renderer picks one variant per operation (generator/emit/emit_ops.c lists the fields and says
-- when it picks which). A form is one kind of operation, or one way it reads: call (the C call),
-- why (its comment) and token (schedule.txt's notation).
local FORMS = {
    FWD = { call = "wp_fwd(R, {chunk}, {mb}, {buf});",
            why = "turn {turn}: FWD chunk {chunk} of mb {mb}{loss} with {origin}",
            token = "F{chunk}.{mb}" },
    BWD = { call = "wp_bwd(R, {chunk}, {mb}, {buf}, {buf2}, {first});",
            why = "turn {turn}: BWD chunk {chunk} of mb {mb} with {origin}; gradient {into}",
            token = "B{chunk}.{mb}" },
    BWD_B = { call = "wp_bwd_b(R, {chunk}, {mb}, {buf});",
              why = "turn {turn}: BWD_B chunk {chunk} of mb {mb} with {origin}: input gradient only, BWD_W follows",
              token = "b{chunk}.{mb}" },
    BWD_W = { call = "wp_bwd_w(R, {chunk}, {mb}, {buf2}, {first});",
              why = "turn {turn}: BWD_W chunk {chunk} of mb {mb}: weight gradient {into}",
              token = "w{chunk}.{mb}" },
    SEND_W = { call = "wp_send(R, {buf}, {nchunk}, {shard}, {nshards}, {peer});",
               why = "{carried} to rank {peer} (its turn {from_turn})",
               token = "send {carried}>r{peer}" },
    SEND_D = { call = "wp_send(R, {buf}, {nchunk}, {shard}, {nshards}, {peer});",
               why = "{carried} to rank {peer} (its turn {from_turn}); passed on, not kept",
               token = "send {carried}>r{peer}" },
    SEND_ACT = { call = "wp_send_act(R, {act_id}, {chunk}, {mb}, {peer});",
                 why = "{act} to rank {peer} (its turn {from_turn})",
                 token = "send {letter}{chunk}.{mb}>r{peer}" },
    RECV = { call = "wp_recv(R, {buf}, {nchunk}, {shard}, {nshards}, {peer});",
             why = "{carried} from rank {peer} (its turn {from_turn}){purpose}",
             token = "recv {carried}<r{peer}" },
    RECV_ACT = { call = "wp_recv_act(R, {act_id}, {chunk}, {mb}, {peer});",
                 why = "{act} from rank {peer} (its turn {from_turn})",
                 token = "recv {letter}{chunk}.{mb}<r{peer}" },
    BCAST_ROOT = { call = "wp_bcast(R, {buf}, {nchunk}, {shard}, {nshards}, {group}, {peer});",
                   why = "{carried} to the rest of {group_text}, this rank is the root",
                   token = "bcast {carried}@g{group}:r{peer}" },
    BCAST = { call = "wp_bcast(R, {buf}, {nchunk}, {shard}, {nshards}, {group}, {peer});",
              why = "{carried} from rank {peer} over {group_text}{purpose}",
              token = "bcast {carried}@g{group}:r{peer}" },
    REDUCE_ROOT = { call = "wp_reduce(R, {buf}, {nchunk}, {shard}, {nshards}, {group}, {peer});",
                    why = "{carried} summed over {group_text} into this rank{purpose}",
                    token = "reduce {carried}@g{group}:r{peer}" },
    REDUCE = { call = "wp_reduce(R, {buf}, {nchunk}, {shard}, {nshards}, {group}, {peer});",
               why = "{carried} summed over {group_text} into rank {peer}; passed on, not kept",
               token = "reduce {carried}@g{group}:r{peer}" },
    ALLREDUCE = { call = "wp_allreduce(R, {buf}, {nchunk}, {shard}, {nshards}, {group});",
                  why = "{carried} summed over {group_text}, on every member{purpose}",
                  token = "allreduce {carried}@g{group}" },
    ALLGATHER = { call = "wp_allgather(R, {buf}, {buf2}, {nchunk}, {group});",
                  why = "W{nchunk} gathered from its {gsize} shards over {group_text} into {buf2}{purpose}",
                  token = "allgather W{nchunk}@g{group}" },
    REDUCE_SCATTER = { call = "wp_reduce_scatter(R, {buf}, {buf2}, {nchunk}, {group});",
                       why = "D{nchunk} summed over {group_text}; this rank keeps its shard in {buf2}{purpose}",
                       token = "rscatter D{nchunk}@g{group}" },
    ACC_FIRST = { call = "wp_acc(R, {buf}, {buf2}, {nchunk}, {first});",
                  why = "{buf} = {buf2}: D{nchunk} ({buf} held nothing: written, not added)",
                  token = "acc D{nchunk}" },
    ACC = { call = "wp_acc(R, {buf}, {buf2}, {nchunk}, {first});",
            why = "{buf} += {buf2}: {buf2}'s part of D{nchunk} added{purpose}",
            token = "acc D{nchunk}" },
    COPY = { call = "wp_copy(R, {buf}, {buf2}, {nchunk});",
             why = "{buf} = {buf2}: W{nchunk}{purpose}",
             token = "copy W{nchunk}" },
    OPT_SHARD = { call = "wp_opt(R, {chunk}, {buf}, {buf2});",
                  why = "AdamW on shard {bshard} of {bnshards} of chunk {chunk}, which this rank owns",
                  token = "opt {chunk}" },
    OPT = { call = "wp_opt(R, {chunk}, {buf}, {buf2});",
            why = "AdamW on chunk {chunk}, which this rank owns",
            token = "opt {chunk}" },
    FREE = { call = "wp_free(R, {buf});",
             why = "{buf} is not needed again this step",
             token = "free ({buf})" },
    FREE_HELD = { call = "wp_free(R, {buf});",
                  why = "{buf}{held_note} is not needed again this step",
                  token = "free {letter}{held}" },
}

local PHRASES = {
    -- what a transfer or collective carries: W3, D3, W3[1/4] (shard 1 of 4)
    carried = { whole = "{letter}{nchunk}", shard = "{letter}{nchunk}[{shard}/{nshards}]" },
    -- where the weights a computation uses came from
    origin = {
        master = "W{chunk} ({buf}: this rank's master)",
        bcast = "W{chunk}, which rank {from_rank} broadcast at turn {from_turn}",
        came = "W{chunk}, which came from rank {from_rank} at turn {from_turn}",
        copied = "W{chunk}, copied from its master at turn {src_turn}",
        gathered = "W{chunk}, all-gathered at turn {src_turn}",
        plain = "W{chunk}",
    },
    -- why a received or copied value is there: the next operation of this rank that uses it
    purpose = { use = ", for {use_kind} at turn {use_turn}", none = ", not used again this step" },
    -- a gradient's destination empty (written) or not (added to)
    first = { first = "1", add = "0" },
    into = { first = "into {buf2} (first contribution: written, not added)", add = "added into {buf2}" },
    act = { A = "input of chunk {chunk} for mb {mb}", G = "gradient of chunk {chunk}'s input for mb {mb}" },
    act_id = { A = "WP_ACT", G = "WP_GRAD" },
    loss = { last = " (and the loss)", other = "" },
    group_text = "group {group} ({members})",
    -- a freed buffer's name that does not say which chunk it held
    held_note = { same = "", other = " ({letter}{held})" },
}

-- The word for the next use of a value, by kind of operation.
local USE = {
    FWD = "FWD", BWD = "BWD", BWD_B = "BWD_B", BWD_W = "BWD_W", SEND = "passing on", RECV = "RECV", BCAST = "BCAST",
    REDUCE = "REDUCE", ALLREDUCE = "ALLREDUCE", ALLGATHER = "ALLGATHER", REDUCE_SCATTER = "REDUCE_SCATTER",
    ACC = "ACC", COPY = "COPY", OPT = "OPT", FREE = "FREE (unused)",
}

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

-- The formats of every operation and turn for emit.c (generator/emit/emit_ops.c), once per Lua
-- state. A turn is laid out as {turn}: a comment with the turn's schedule.txt line, then its
-- transfers, compute and local operations, one line each: indent, the call (padded to the
-- widest call of the rank, at most call_width), open, why, close.
function M.op_text()
    local members = {}
    for i, g in ipairs(P.groups) do members[i] = g.text end
    return {
        forms = FORMS, phrases = PHRASES, uses = USE, members = members,
        indent = "    ", call_width = 48, open = "  /* ", close = " */",
        turn = "    /* turn {turn}: {summary} */\n"
            .. "    wp_turn_begin(R, {turn});\n"
            .. "{comm_lines}    wp_turn_compute(R);\n"
            .. "{compute_lines}    wp_turn_wait(R);\n"
            .. "{local_lines}    wp_turn_end(R);",
        turn_sep = "\n\n",
        idle_one = "    /* turn {from}: nothing to do */",
        idle_range = "    /* turns {from}-{to}: nothing to do */",
        summary = "{compute_tokens} | {comm_tokens} | {local_tokens}",
        token_sep = " ", no_tokens = "-",
        sched_busy = "r{rank} t{turn}: {summary}",
        sched_idle = "r{rank} t{turn}: -",
    }
end

-- The names of a rank's buffers in its C source, in plan order.
-- rank = { rank, node, node_name, slot, replica, stage, nops, bufs = { {name, kind, master, chunk,
-- shard, nshards, bytes} } }
function M.ids(rank)
    buffer_ids(rank.bufs)
    local ids = {}
    for i, b in ipairs(rank.bufs) do ids[i] = b.id end
    return ids
end

-- One rank, its step's body rendered (emit.c): returns its file name and C source.
function M.rank(r, body, nbusy)
    r.id = fmt("%0" .. P.width .. "d", r.rank)
    r.node_text = comment_safe(r.node_name)
    for _, b in ipairs(r.bufs) do
        local what = b.kind == "W" and "weights" or "weight gradient"
        if b.master then what = "master weights (and AdamW state)" end
        local of = b.chunk >= 0 and fmt("of chunk %d", b.chunk) or "sized for the largest chunk"
        if b.nshards > 1 then of = fmt("shard %d of %d %s", b.shard, b.nshards, of) end
        b.about = fmt("%s %s, %s", what, of, human(b.bytes))
    end
    local src = render("rank.c", { r = r, body = body, nbusy = nbusy, plural = plural })
    return "rank_" .. r.id .. ".c", src
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
