-- The words and the layout of an emitted plan (wpgen emit). generator/emit/emit.c drives it: M.begin
-- with the plan's shape; M.op_text gives the formats of every operation's line, which emit.c
-- renders in C (generator/emit/emit_ops.c: hundreds of thousands of lines, no Lua value each);
-- M.ids and M.rank once per rank; then M.files for the files that need every rank. It writes
-- what these return. The files' layout is in templates/*.tpl, rendered with Penlight's
-- pl.template: lines starting with "@" are Lua, ${expr} is replaced by the value of expr.
-- What each operation is called and how it is explained lives here, once (FORMS below).
local template = require("pl.template")

local fmt, concat = string.format, table.concat

local M = {}
local P           -- the plan (M.begin)
local tpl = {}    -- compiled templates, by file name
local bodies = {}  -- the shell scripts' plan-free parts (templates/NAME.body), by file name

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

-- job.sbatch's two kinds of value (templates/job.sbatch.tpl), each made safe here and nowhere else.
-- A value on an #SBATCH line: sbatch reads those lines itself, not the shell, and a newline ends
-- the directive (the rest of the name then runs as a command), so the value is sanitized, not
-- refused: every byte outside [A-Za-z0-9._-] becomes "_". Only the job name can hold such a byte
-- (the strategy's name, from its file's name); the counts are integers, left as they are.
local function sbatch_value(v)
    return (tostring(v):gsub("[^A-Za-z0-9._-]", "_"))
end

-- A word for the shell, exactly as given (a path, a node's name): single-quoted, each ' as '\''.
-- A newline inside single quotes is part of the word, not the end of a command. (The rankfile
-- writes node names bare: the topology's loader admits only host names, [A-Za-z0-9._-].)
local function sh_quote(s)
    return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
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

-- Every emitted line (C sources, README, rankfile) is shorter than this; schedule.txt (one line
-- per turn) and plan.json (one line per rank) are data.
local MAX_LINE = 119

-- "0, 1, 2" starting at column col, continued on lines starting at the same column, none longer
-- than MAX_LINE with the " };" that follows the last item (for long C initializers).
local function join(list, col)
    local parts, width = {}, col
    for i, v in ipairs(list) do
        local item = tostring(v) .. (i < #list and "," or "")
        if i > 1 then
            if width + 1 + #item + (i == #list and 3 or 0) > MAX_LINE then
                parts[#parts + 1] = "\n" .. string.rep(" ", col)
                width = col
            else
                parts[#parts + 1] = " "
                width = width + 1
            end
        end
        parts[#parts + 1] = item
        width = width + #item
    end
    return concat(parts)
end

-- text broken at spaces into lines of at most width characters, the lines after the first starting
-- with indent; a word longer than a line stays whole.
local function wrap(text, width, indent)
    local lines = {}
    while #text > width do
        local cut
        for i = width + 1, #indent + 2, -1 do
            if text:sub(i, i) == " " then cut = i; break end
        end
        cut = cut or text:find(" ", width + 1, true)
        if not cut then break end
        lines[#lines + 1] = (text:sub(1, cut - 1):gsub(" +$", ""))
        text = indent .. text:sub(cut + 1):gsub("^ +", "")
    end
    lines[#lines + 1] = text
    return lines
end

-- A C comment of text (one paragraph), on lines of at most 100 characters (prose reads better
-- narrower than code).
local function c_comment(text)
    return concat(wrap("/* " .. comment_safe(text) .. " */", 100, " * "), "\n")
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
-- and runtime/common/step.h declare, the step's parameter and functions, plan.h's labels.
local RESERVED = {}
for w in ([[auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local NULL offsetof size_t ptrdiff_t wchar_t
    max_align_t main R CHUNK MB TO FROM ROOT GROUP WHOLE SHARD WRITE ADD]]):gmatch("%S+") do RESERVED[w] = true end

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

-- ---- the summary (README) and the line other files point to it with ----

local function chunk_text(c, i)
    local extra = {}
    if i == 1 then extra[#extra + 1] = "embedding" end
    if i == #P.chunks then extra[#extra + 1] = "final norm, LM head, loss" end
    local layers = c.nlayers == 1 and fmt("layer %d", c.layer0) or fmt("layers %d-%d", c.layer0, c.layer0 + c.nlayers - 1)
    if c.nlayers == 0 then layers = concat(extra, ", ")
    elseif #extra > 0 then layers = layers .. " + " .. concat(extra, ", ") end
    if c.replicated then return fmt("%-11s %s; replicated on every rank", "chunk " .. (i - 1), layers) end
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
        fmt("batch       %s: %d micro-batches per step (%d per rank), %d turns, %s", P.global_batch, P.total_mbs, P.micro_batches,
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
        P.recompute == 2 and ", activations recomputed, their stashes in host memory"
        or P.recompute ~= 0 and ", activations recomputed" or "")
    for line in tostring(P.notes or ""):gmatch("[^\n]+") do lines[#lines + 1] = "notes       " .. line end
    -- long lines (a model's or a strategy's words) continue under the text of the first
    local out = {}
    for _, l in ipairs(lines) do
        for _, w in ipairs(wrap(comment_safe(l), MAX_LINE, string.rep(" ", 12))) do out[#out + 1] = w end
    end
    return out
end

-- ---- operations: the call, its comment, its token in schedule.txt ----

-- What emit.c renders for every operation, from these formats: "{name}" is replaced by a field of
-- the operation (its numbers, its buffers' names) or by a phrase, itself a format, of which the
-- renderer picks one variant per operation (generator/emit/emit_ops.c lists the fields and says
-- when it picks which). A form is one kind of operation, or one way it reads: call (the C call,
-- its integers labelled with plan.h's macros), why (its comment: what the call does not say) and
-- token (schedule.txt's notation). The comments call a transfer's other end "their turn".
local FORMS = {
    FWD = { call = "wp_fwd(R, CHUNK({chunk}), MB({mb}), {buf});",
            why = "{origin}{loss}",
            token = "F{chunk}.{mb}" },
    BWD = { call = "wp_bwd(R, CHUNK({chunk}), MB({mb}), {buf}, {buf2}, {first});",
            why = "{origin}",
            token = "B{chunk}.{mb}" },
    BWD_B = { call = "wp_bwd_b(R, CHUNK({chunk}), MB({mb}), {buf});",
              why = "{origin}; the input gradient only",
              token = "b{chunk}.{mb}" },
    BWD_W = { call = "wp_bwd_w(R, CHUNK({chunk}), MB({mb}), {buf2}, {first});",
              why = "the weight gradient, after BWD_B",
              token = "w{chunk}.{mb}" },
    SEND_W = { call = "wp_send(R, {buf}, CHUNK({nchunk}), {part}, TO({peer}));",
               why = "{carried}{their_turn}",
               token = "send {carried}>r{peer}" },
    SEND_D = { call = "wp_send(R, {buf}, CHUNK({nchunk}), {part}, TO({peer}));",
               why = "{carried} passed on, not kept{their_turn}",
               token = "send {carried}>r{peer}" },
    SEND_ACT = { call = "wp_send_act(R, {act_id}, CHUNK({chunk}), MB({mb}), TO({peer}));",
                 why = "{act}{their_turn}",
                 token = "send {letter}{chunk}.{mb}>r{peer}" },
    RECV = { call = "wp_recv(R, {buf}, CHUNK({nchunk}), {part}, FROM({peer}));",
             why = "{carried}{purpose}{their_turn}",
             token = "recv {carried}<r{peer}" },
    RECV_ACT = { call = "wp_recv_act(R, {act_id}, CHUNK({chunk}), MB({mb}), FROM({peer}));",
                 why = "{act}{their_turn}",
                 token = "recv {letter}{chunk}.{mb}<r{peer}" },
    BCAST_ROOT = { call = "wp_bcast(R, {buf}, CHUNK({nchunk}), {part}, GROUP({group}), ROOT({peer}));",
                   why = "{carried} from this rank to {members}",
                   token = "bcast {carried}@g{group}:r{peer}" },
    BCAST = { call = "wp_bcast(R, {buf}, CHUNK({nchunk}), {part}, GROUP({group}), ROOT({peer}));",
              why = "{carried}{purpose}",
              token = "bcast {carried}@g{group}:r{peer}" },
    REDUCE_ROOT = { call = "wp_reduce(R, {buf}, CHUNK({nchunk}), {part}, GROUP({group}), ROOT({peer}));",
                    why = "{carried} summed here{purpose}",
                    token = "reduce {carried}@g{group}:r{peer}" },
    REDUCE = { call = "wp_reduce(R, {buf}, CHUNK({nchunk}), {part}, GROUP({group}), ROOT({peer}));",
               why = "{carried} summed into the root, not kept",
               token = "reduce {carried}@g{group}:r{peer}" },
    ALLREDUCE = { call = "wp_allreduce(R, {buf}, CHUNK({nchunk}), {part}, GROUP({group}));",
                  why = "{carried} summed over {members}{purpose}",
                  token = "allreduce {carried}@g{group}" },
    ALLGATHER = { call = "wp_allgather(R, {buf}, {buf2}, CHUNK({nchunk}), GROUP({group}));",
                  why = "W{nchunk} from its {gsize} shards{purpose}",
                  token = "allgather W{nchunk}@g{group}" },
    REDUCE_SCATTER = { call = "wp_reduce_scatter(R, {buf}, {buf2}, CHUNK({nchunk}), GROUP({group}));",
                       why = "D{nchunk} summed; own shard{purpose}",
                       token = "rscatter D{nchunk}@g{group}" },
    TIE_ALLREDUCE = { call = "wp_tie_allreduce(R, {buf}, CHUNK({nchunk}), GROUP({group}));",
                      why = "the tied embedding's part of D{nchunk} summed with its other use's over {members}{purpose}",
                      token = "tie D{nchunk}@g{group}" },
    ACC_FIRST = { call = "wp_acc(R, {buf}, {buf2}, CHUNK({nchunk}), {first});",
                  why = "{buf} = {buf2}: D{nchunk}{purpose}",
                  token = "acc D{nchunk}" },
    ACC = { call = "wp_acc(R, {buf}, {buf2}, CHUNK({nchunk}), {first});",
            why = "{buf} += {buf2}: D{nchunk}{purpose}",
            token = "acc D{nchunk}" },
    COPY = { call = "wp_copy(R, {buf}, {buf2}, CHUNK({nchunk}));",
             why = "{buf} = {buf2}: W{nchunk}{purpose}",
             token = "copy W{nchunk}" },
    TIE = { call = "wp_tie(R, {buf}, {buf2});",
            why = "{buf} and {buf2}'s LM head = their sum: the tied embedding's gradient{purpose}",
            token = "tie D0" },
    OPT_SHARD = { call = "wp_opt(R, CHUNK({chunk}), {buf}, {buf2});",
                  why = "AdamW on this rank's shard {bshard} of {bnshards}",
                  token = "opt {chunk}" },
    OPT = { call = "wp_opt(R, CHUNK({chunk}), {buf}, {buf2});",
            why = "AdamW on this rank's chunk {chunk}",
            token = "opt {chunk}" },
    FREE = { call = "wp_free(R, {buf});",
             why = "not needed again this step",
             token = "free ({buf})" },
    FREE_HELD = { call = "wp_free(R, {buf});",
                  why = "{letter}{held} not needed again this step",
                  token = "free {letter}{held}" },
    -- a RING rides the compute call after it (op_table.h OPF_RIDES): the model's ring attention
    -- moves its K/V blocks inside that call, so it has no call of its own, only its comment. (emit
    -- refuses context-parallel plans until the runtime's ring attention is built: cmd_plan.c.)
    RING = { call = "/* ring R{chunk}.{mb} */",
             why = "chunk {chunk}'s K/V blocks for micro-batch {mb} round the context-parallel group, inside the next call",
             token = "ring{chunk}.{mb}" },
}
M.FORMS = FORMS   -- for tests/unit/test_optable.c: a form for every kind, whose call is the runtime's (a RING's: a comment)

local PHRASES = {
    -- what a transfer or collective carries: W3, D3, W3[1/4] (shard 1 of 4)
    carried = { whole = "{letter}{nchunk}", shard = "{letter}{nchunk}[{shard}/{nshards}]" },
    -- the same as arguments: the shard and the number of shards (plan.h)
    part = { whole = "WHOLE", shard = "SHARD({shard}, {nshards})" },
    -- where the weights a computation uses came from
    origin = {
        master = "W{chunk}, this rank's master",
        bcast = "W{chunk} bcast by rank {from_rank} at turn {from_turn}",
        came = "W{chunk} from rank {from_rank} at turn {from_turn}",
        copied = "W{chunk} copied from its master at turn {src_turn}",
        gathered = "W{chunk} all-gathered at turn {src_turn}",
        plain = "W{chunk}",
    },
    -- why a received or copied value is there: the next operation of this rank that uses it
    purpose = { use = " {use_kind} at turn {use_turn}", none = ", unused this step" },
    -- the turn of the other end of a transfer, said only when it is not this one
    their_turn = { same = "", other = "; their turn {from_turn}" },
    -- a gradient's destination empty (written) or not (added to): plan.h's labels
    first = { first = "WRITE", add = "ADD" },
    act = { A = "input of chunk {chunk}", G = "gradient of chunk {chunk}'s input" },
    act_id = { A = "WP_ACT", G = "WP_GRAD" },
    loss = { last = " + loss", other = "" },   -- the last chunk's forward ends with the loss
    held_note = { same = "", other = " ({letter}{held})" },
}

-- What the next use of a value is for, by kind of operation.
local USE = {
    FWD = "for FWD", BWD = "for BWD", BWD_B = "for BWD_B", BWD_W = "for BWD_W", SEND = "to pass on", RECV = "for RECV",
    BCAST = "to broadcast", REDUCE = "to reduce", ALLREDUCE = "to all-reduce", ALLGATHER = "to all-gather",
    REDUCE_SCATTER = "to reduce-scatter", ACC = "for ACC", COPY = "to copy", TIE = "to tie", TIE_ALLREDUCE = "to tie", OPT = "for OPT", FREE = "unused, freed",
    RING = "for RING",   -- (never said: a RING reads no buffer)
}
M.USE = USE   -- for tests/unit/test_optable.c: words for every kind

-- ---- the strategy lines the operations came from ----

-- Names for the plan's strategy files in comments: the shortest tail of each path that no other
-- file of the plan shares ("NAME.lua", "lib/NAME.lua" beside "NAME.lua").
local function source_names(paths)
    local names = {}
    for i, path in ipairs(paths) do
        local parts = {}
        for part in path:gmatch("[^/]+") do parts[#parts + 1] = part end
        local name
        for k = #parts, 1, -1 do
            name = concat(parts, "/", k, #parts)
            local shared = false
            for j, other in ipairs(paths) do
                if j ~= i and (other == name or other:sub(-#name - 1) == "/" .. name) then shared = true end
            end
            if not shared then break end
        end
        names[i] = comment_safe(name or path)
    end
    return names
end

-- ---- M: what emit.c calls ----

-- The plan's shape: everything but the operations (see emit_push_plan in generator/emit/emit_data.c).
-- emit.c runs several Lua states side by side, each begun with the same plan and given some of
-- the ranks, so nothing a rank's text says may depend on the ranks rendered before it.
function M.begin(plan)
    P = plan
    for _, g in ipairs(P.groups) do g.text = ranks_text(g.ranks) end
    P.source_names, P.source_paths = source_names(P.sources), {}
    for i, path in ipairs(P.sources) do P.source_paths[i] = comment_safe(path) end
    P.first_c = fmt("/* Code generated by wpgen %s from plan %s. DO NOT EDIT. */", P.version, P.hash)
    -- for the shell (job.sbatch's header): single-quoted words
    P.wpgen_sh, P.cwd_sh = sh_quote(P.wpgen), sh_quote(P.cwd)
    local quoted = {}
    for i, name in ipairs(P.nodes) do quoted[i] = sh_quote(name) end
    P.nodes_sh = concat(quoted, " ")
    -- wpgen run: the train flags run.sh runs when given none, and WPGEN_MPIRUN_FLAGS' default then
    local args = {}
    for i, w in ipairs(P.run_args or {}) do args[i] = sh_quote(w) end
    P.run_args_sh = concat(args, " ")
    P.run_mpirun_flags_sh = sh_quote(P.run_mpirun_flags or "")
    P.run_cwd_sh = sh_quote(P.run_args and P.cwd or "")   -- wpgen emit's output names no path of this machine's
    P.first_hash = fmt("# Code generated by wpgen %s from plan %s. DO NOT EDIT.", P.version, P.hash)
    -- the Makefile names no plan: emitted again for another plan with the same backends, it is
    -- the same file, so the objects it built stay valid (emit.c keeps obj/ and unchanged files'
    -- times) and make compiles only what changed
    P.first_build = fmt("# Code generated by wpgen %s. DO NOT EDIT.", P.version)
    -- the summary once, in README; every other file points there
    P.summary = concat(summary_lines(), "\n")
    P.header_c = "/* The plan at a glance (strategy, cluster, model, chunks, traffic, prediction): README */"
    P.header_hash = "# The plan at a glance (strategy, cluster, model, chunks, traffic, prediction): README"
    P.width = math.max(3, #tostring(P.nranks - 1))
    for _, name in ipairs({ "rank.c", "plan.h", "plan_desc.c", "main.c", "Makefile", "README", "rankfile", "job.sbatch",
                            "run.sh", "schedule.txt" }) do
        local path = P.templates .. "/" .. name .. ".tpl"
        local f = assert(io.open(path, "rb"))
        local text = f:read("a")
        f:close()
        local ct, err = template.compile(text, { chunk_name = "@" .. name .. ".tpl", escape = "@",
                                                 inline_escape = "$", inline_brackets = "{}" })
        if not ct then error(name .. ".tpl: " .. tostring(err), 0) end
        tpl[name] = ct
    end
    -- the shell scripts' plan-free parts, as they are (their ${...} are the shell's, not the
    -- template's): appended to the rendered heads
    for _, name in ipairs({ "job.sbatch", "run.sh" }) do
        local f = assert(io.open(P.templates .. "/" .. name .. ".body", "rb"))
        bodies[name] = f:read("a")
        f:close()
    end
end

local function render(name, env)
    env.P, env.fmt, env.concat, env.c_string, env.c_float, env.c_double, env.join, env.human, env.c_comment =
        P, fmt, concat, c_string, c_float, c_double, join, human, c_comment
    env.sbatch_value = sbatch_value
    local out, err = tpl[name]:render(env, _G)
    if not out then error(name .. ".tpl: " .. tostring(err), 0) end
    return out
end

function M.schedule_header()
    return render("schedule.txt", {})
end

-- The formats of every operation and turn for emit.c (generator/emit/emit_ops.c), once per Lua
-- state. A turn is laid out as {turn}: a comment with the turn's schedule.txt line, then its
-- transfers, compute and local operations, one line each as {line}: the call, padded to the
-- widest of the rank (at most call_width), then a comment with the strategy line that made the
-- operation (padded to the widest of the rank) and why. {line_bare} when the plan does not say
-- where an operation came from (plans built in C). {why} and {summary} continue on more lines,
-- at the column they started, rather than make a line longer than max_line.
function M.op_text()
    local members = {}
    for i, g in ipairs(P.groups) do members[i] = g.text end
    return {
        forms = FORMS, phrases = PHRASES, uses = USE, members = members, sources = P.source_names,
        line = "    {call}  /* {where}  {why} */",
        line_bare = "    {call}  /* {why} */",
        call_width = 52, max_line = MAX_LINE,
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

-- Where the step's body goes in rank.c.tpl's text: emit.c writes the body (megabytes) itself, between
-- the parts before and after, rather than have Lua copy it into one string.
local BODY = "\1body\1"

-- One rank, its step's body rendered by emit.c (nbusy turns; has_body: the body is not empty):
-- returns its file name and the text of its file before and after the body.
function M.rank(r, nbusy, has_body)
    r.id = fmt("%0" .. P.width .. "d", r.rank)
    r.head = c_comment(fmt("The training step of rank %d (node %s, replica %d, stage %d): %s in %d of %d turns, "
                           .. "unrolled. plan.h says how to read it.", r.rank, r.node_name, r.replica, r.stage,
                           plural(r.nops, "operation"), nbusy, P.nturns))
    for _, b in ipairs(r.bufs) do
        local what = b.kind == "W" and "weights" or "weight gradient"
        if b.master then what = "master weights (and AdamW state)" end
        local of = b.chunk >= 0 and fmt("of chunk %d", b.chunk) or "sized for the largest chunk"
        if b.nshards > 1 then of = fmt("shard %d of %d %s", b.shard, b.nshards, of) end
        b.about = fmt("%s %s, %s", what, of, human(b.bytes))
    end
    local src = render("rank.c", { r = r, body = has_body and BODY or "", nbusy = nbusy, plural = plural })
    local i, j = src:find(BODY, 1, true)
    if not i then return "rank_" .. r.id .. ".c", src, "" end
    return "rank_" .. r.id .. ".c", src:sub(1, i - 1), src:sub(j + 1)
end

-- The files that need every rank, given as M.rank gets them but without their operations:
-- { {name, text, executable}, ... } in a fixed order.
function M.files(ranks)
    for _, d in ipairs(ranks) do
        buffer_ids(d.bufs)
        d.id = fmt("%0" .. P.width .. "d", d.rank)
    end
    local files = {}
    for _, name in ipairs({ "plan.h", "plan_desc.c", "main.c", "Makefile", "README", "rankfile", "job.sbatch",
                            "run.sh" }) do
        local text = render(name, { ranks = ranks, plural = plural })
        if bodies[name] then text = text .. bodies[name] end
        files[#files + 1] = { name, text, name == "run.sh" }
    end
    -- wpgen run's record: its configuration file and the flags it resolved to (generator/cli/cmd_run.c)
    if P.run_json then files[#files + 1] = { "run.json", P.run_json, false } end
    return files
end

return M
