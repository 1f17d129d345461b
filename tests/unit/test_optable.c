/* The operation table (ir/op_table.h) and what is derived from it: every kind has a row whose
 * columns agree with each other (compute has work, transfers are a send, a receive or one
 * collective, only collectives have roots, absent operands are not used); op_names[] is the
 * name column; op_format prints every kind as plans have always printed it; the shard size and
 * the collectives' shapes (sim/collective.h) by hand; the table as Lua sees it.
 *
 * And that no kind is half added: every kind has its simulator cost (compute by cost.c's
 * features, a local operation that touches data by its row's memory passes, a transfer by what
 * it carries), its emitter forms (emit_ops.h OP_FORMS) with their words in emit.lua, and each
 * form's call is a function of the runtime (runtime/common/step.h), or, for a kind that rides the
 * compute after it (RING: its blocks move inside that call), one C comment. The verifier's rules and the
 * emitter's and simulator's switches over kinds have no default, so the compiler (-Werror=switch)
 * lists those. Runs from the repository root (or with WPGEN_HOME set), as test_emit. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "check.h"
#include "tmpdir.h"
#include "common/modelcfg.h"
#include "emit/emit_ops.h"
#include "ir/op_table.h"
#include "lua/bridge.h"
#include "lua/op_table_lua.h"
#include "sim/collective.h"
#include "cost/costs.h"

static void check_rows(void) {
    for (int k = 0; k < OP__COUNT; k++) {
        const OpInfo *in = op_info(k);
        CHECK(in->name && in->name[0], "kind %d has no row", k);
        if (!in->name) continue;
        CHECK(op_names[k] == in->name, "%s: op_names[] is not the table's name column", in->name);
        CHECK(in->format && in->format[0], "%s: no format", in->name);
        CHECK(in->phase < OP_PHASE__COUNT, "%s: phase %d", in->name, in->phase);
        int compute = in->phase == OP_PHASE_COMPUTE, transfer = in->phase == OP_PHASE_TRANSFER, rides = (in->flags & OPF_RIDES) != 0;
        CHECK((compute && !rides) == (in->fwd_units > 0), "%s: work %g in phase %s", in->name, in->fwd_units, op_phase_names[in->phase]);
        CHECK(!compute || (in->label && (rides || in->label[0] == 'F' || in->label[0] == 'B')), "%s: compute needs a label", in->name);
        /* one that rides the compute after it (RING): no work, no buffers, that compute's chunk and micro-batch */
        CHECK(!rides || (compute && in->recompute_units == 0 && in->operand[0] == OPND_NONE && in->operand[1] == OPND_NONE &&
                         (in->flags & OPF_CHUNK) && (in->flags & OPF_MB)),
              "%s: rides a compute: a compute-phase row of no work and no buffers, naming a chunk and a micro-batch", in->name);
        CHECK(in->mem_passes == 0 || in->phase == OP_PHASE_LOCAL, "%s: memory passes outside the local phase", in->name);
        CHECK(transfer == ((in->p2p != P2P_NONE) + (in->coll != COLL_NONE) == 1), "%s: a transfer is a send, a receive or one collective", in->name);
        CHECK(transfer == (in->carries != CARRY_NONE), "%s: transfers, and only they, carry something", in->name);
        CHECK(!in->root || in->coll, "%s: only collectives have roots", in->name);
        CHECK(!(in->flags & OPF_CHUNK) || strstr(in->format, "$c"), "%s: names a chunk its format does not print", in->name);
        for (int o = 0; o < 2; o++) {
            int absent = in->operand[o] == OPND_NONE;
            CHECK(!absent || (!in->use[o] && !in->root_use[o]), "%s: operand %d is used but absent", in->name, o);
            CHECK(absent || in->use[o] || in->root_use[o], "%s: operand %d is there but unused", in->name, o);
            CHECK(in->root || !in->root_use[o], "%s: a root's use without a root", in->name);
            CHECK(!(in->use[o] & USE_ADD) || in->operand[o] == OPND_D, "%s: only gradients are added into", in->name);
        }
    }
    /* every collective has a row of the plan's own chunks' values, once (TIE_ALLREDUCE, the one
     * other, all-reduces the tied embedding's part, which it carries instead of a chunk) */
    int seen[COLL__COUNT] = { 0 };
    for (int k = 0; k < OP__COUNT; k++)
        if (op_info(k)->carries != CARRY_TIED) seen[op_info(k)->coll]++;
    for (int c = 1; c < COLL__COUNT; c++) CHECK(seen[c] == 1, "collective %s has %d rows", op_coll_names[c], seen[c]);
    CHECK(op_info(OP_TIE_ALLREDUCE)->coll == COLL_ALLREDUCE && !op_info(OP_TIE_ALLREDUCE)->root,
          "TIE_ALLREDUCE: an all-reduce without a root");
}

/* A plan with one rank's worth of buffers, enough for op_format. */
static void check_format(void) {
    static PlanBuf bufs[2] = { { .name = "w0" }, { .name = "d1" } };
    PlanRank rank = { .nbufs = 2, .bufs = bufs };
    Plan p = { .nranks = 1, .ranks = &rank };
    struct { Op op; const char *want; } cases[] = {
        { { .kind = OP_FWD, .buf = 0, .buf2 = -1, .chunk = 3, .mb = 5 }, "FWD chunk 3 mb 5 with w0" },
        { { .kind = OP_BWD, .buf = 0, .buf2 = 1, .chunk = 3, .mb = 5 }, "BWD chunk 3 mb 5 with w0 into d1" },
        { { .kind = OP_BWD_B, .buf = 0, .buf2 = -1, .chunk = 0, .mb = 1 }, "BWD_B chunk 0 mb 1 with w0" },
        { { .kind = OP_BWD_W, .buf = -1, .buf2 = 1, .chunk = 0, .mb = 1 }, "BWD_W chunk 0 mb 1 into d1" },
        { { .kind = OP_SEND, .what = WHAT_W, .buf = 0, .buf2 = -1, .peer = 2 }, "SEND W w0 to rank 2" },
        { { .kind = OP_RECV, .what = WHAT_D, .buf = 1, .buf2 = -1, .peer = 0 }, "RECV D d1 from rank 0" },
        { { .kind = OP_SEND, .what = WHAT_A, .buf = -1, .buf2 = -1, .chunk = 2, .mb = 7, .peer = 3 }, "SEND A chunk 2 mb 7 to rank 3" },
        { { .kind = OP_RECV, .what = WHAT_G, .buf = -1, .buf2 = -1, .chunk = 1, .mb = 0, .peer = 1 }, "RECV G chunk 1 mb 0 from rank 1" },
        { { .kind = OP_BCAST, .buf = 0, .buf2 = -1, .group = 4, .peer = 1 }, "BCAST w0 group 4 root 1" },
        { { .kind = OP_REDUCE, .buf = 1, .buf2 = -1, .group = 4, .peer = 1 }, "REDUCE d1 group 4 root 1" },
        { { .kind = OP_ALLREDUCE, .buf = 1, .buf2 = -1, .group = 0 }, "ALLREDUCE d1 group 0" },
        { { .kind = OP_ALLGATHER, .buf = 0, .buf2 = 1, .group = 2 }, "ALLGATHER w0 -> d1 group 2" },
        { { .kind = OP_REDUCE_SCATTER, .buf = 1, .buf2 = 0, .group = 2 }, "REDUCE_SCATTER d1 -> w0 group 2" },
        { { .kind = OP_TIE_ALLREDUCE, .buf = 1, .buf2 = -1, .group = 3 }, "TIE_ALLREDUCE d1 group 3" },
        { { .kind = OP_ACC, .buf = 1, .buf2 = 0 }, "ACC d1 += w0" },
        { { .kind = OP_COPY, .buf = 0, .buf2 = 1 }, "COPY w0 = d1" },
        { { .kind = OP_OPT, .buf = 0, .buf2 = 1, .chunk = 6 }, "OPT chunk 6 w0 with d1" },
        { { .kind = OP_FREE, .buf = 1, .buf2 = -1 }, "FREE d1" },
        { { .kind = OP_FREE, .buf = -1, .buf2 = -1 }, "FREE -" },
        { { .kind = OP_RING, .buf = -1, .buf2 = -1, .ring_steps = 14, .chunk = 1, .mb = 2, .ring_bytes = { 2, 3 } },
          "RING chunk 1 mb 2: 14 steps, 12884901890 bytes" },   /* 3 << 32 | 2: both words */
    };
    char out[128];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int n = op_format(&p, 0, &cases[i].op, out, sizeof out);
        CHECK(!strcmp(out, cases[i].want), "op_format: \"%s\", expected \"%s\"", out, cases[i].want);
        CHECK(n == (int)strlen(cases[i].want), "op_format returns %d for \"%s\"", n, cases[i].want);
    }
    /* cut to fit, terminated, counting what it would have written, as snprintf */
    char small[8];
    int n = op_format(&p, 0, &cases[1].op, small, sizeof small);
    CHECK(!strcmp(small, "BWD chu") && n == (int)strlen(cases[1].want), "op_format cut: \"%s\" %d", small, n);
}

/* What a transfer changes when it completes, on a member and at the root. */
static void check_changes(void) {
    Op sendw = { .kind = OP_SEND, .what = WHAT_W, .buf = 3, .buf2 = -1, .peer = 1 };
    Op sendd = { .kind = OP_SEND, .what = WHAT_D, .buf = 3, .buf2 = -1, .peer = 1 };
    Op reduce = { .kind = OP_REDUCE, .buf = 2, .buf2 = -1, .peer = 0, .group = 0 };
    Op rs = { .kind = OP_REDUCE_SCATTER, .buf = 2, .buf2 = 5, .group = 0 };
    Op bcast = { .kind = OP_BCAST, .buf = 4, .buf2 = -1, .peer = 0, .group = 0 };
    CHECK(op_written(&sendw, 0) == -1 && op_emptied(&sendw, 0) == -1, "a weight send changes nothing");
    CHECK(op_emptied(&sendd, 0) == 3, "a gradient send passes its buffer on");
    CHECK(op_written(&reduce, 0) == 2 && op_emptied(&reduce, 0) == -1, "reduce: the root's buffer takes the sum");
    CHECK(op_written(&reduce, 1) == -1 && op_emptied(&reduce, 1) == 2, "reduce: the others' buffers are passed on");
    CHECK(op_written(&rs, 1) == 5 && op_emptied(&rs, 1) == 2, "reduce-scatter: the shard written, the whole passed on");
    CHECK(op_written(&bcast, 0) == -1 && op_written(&bcast, 1) == 4, "bcast: every buffer but the root's written");
    CHECK(op_use(&bcast, 0, 0) == USE_READ && op_use(&bcast, 0, 1) == 0, "bcast: the root reads; no second operand");
}

static void check_sizes(void) {
    CHECK(shard_bytes(40, 1) == 40, "one shard is the whole");
    CHECK(shard_bytes(40, 3) == 16, "10 floats in 3 shards: 4 floats each, the last padded (%zu)", shard_bytes(40, 3));
    CHECK(shard_bytes(40, 0) == 40, "0 shards counts as 1");
    CHECK(shard_bytes(0, 4) == 0, "nothing in shards");
    /* collectives over 4 members of 1000 bytes */
    CollShape b = coll_shape(COLL_BCAST, 4, 2, 1000), r = coll_shape(COLL_REDUCE, 4, 2, 1000);
    CollShape ar = coll_shape(COLL_ALLREDUCE, 4, 0, 1000), ag = coll_shape(COLL_ALLGATHER, 4, 0, 1000);
    CHECK(b.nedges == 3 && b.edge_bytes == 1000 && b.lat_steps == 2, "bcast: a chain of 3 whole-buffer edges, tree latency 2");
    CHECK(ar.nedges == 4 && ar.edge_bytes == 1500 && ar.lat_steps == 4, "allreduce: 2*3/4 of the buffer on 4 edges, tree 2*2");
    CHECK(ag.nedges == 4 && ag.edge_bytes == 750 && ag.lat_steps == 3, "allgather: 3/4 on 4 edges, ring latency 3");
    int from, to;
    coll_edge(&b, 4, 0, &from, &to);
    CHECK(from == 2 && to == 3, "bcast edge 0 leaves the root: %d -> %d", from, to);
    coll_edge(&b, 4, 2, &from, &to);
    CHECK(from == 0 && to == 1, "bcast edge 2 wraps around: %d -> %d", from, to);
    coll_edge(&r, 4, 0, &from, &to);
    CHECK(from == 3 && to == 2, "reduce edge 0 flows into the root: %d -> %d", from, to);
    CollShape one = coll_shape(COLL_ALLREDUCE, 1, 0, 1000);
    CHECK(one.nedges == 0 && one.lat_steps == 0, "a group of one moves nothing");
}

static void check_lua(void) {
    lua_State *L = luaL_newstate();
    CHECK(L != NULL, "lua state");
    if (!L) return;
    luaL_openlibs(L);
    op_table_push_lua(L);
    lua_setglobal(L, "ops");
    const char *script =
        "local n = 0 for k, v in pairs(ops) do if type(k) == 'number' then n = n + 1 end end\n"
        "assert(n == ..., 'rows by kind: ' .. n)\n"
        "assert(ops[1] == ops.FWD and ops.FWD.kind == 0 and ops.FWD.phase == 'compute' and ops.FWD.order == 2)\n"
        "assert(ops.BWD.buf2.add and ops.BWD.buf2.kind == 'D' and ops.BWD.buf.read and not ops.BWD.buf.write)\n"
        "assert(ops.SEND.p2p == 'send' and ops.SEND.carries == 'what' and ops.SEND.pass_d and ops.SEND.order == 1)\n"
        "assert(ops.REDUCE.coll == 'reduce' and ops.REDUCE.root and ops.REDUCE.buf.clear and ops.REDUCE.buf.root.write)\n"
        "assert(ops.ACC.phase == 'local' and ops.ACC.mem_passes == 3 and ops.ACC.distinct and ops.ACC.buf.add)\n"
        "assert(ops.OPT.master and ops.OPT.chunk and ops.FREE.buf.kind == 'any' and ops.FREE.buf2 == nil)\n"
        "assert(ops.TIE_ALLREDUCE.coll == 'allreduce' and ops.TIE_ALLREDUCE.carries == 'tied' and ops.TIE_ALLREDUCE.fp32)\n"
        "assert(ops.TIE.fp32 and not ops.ACC.fp32)\n"
        "assert(ops.RING.rides and ops.RING.phase == 'compute' and ops.RING.chunk and ops.RING.mb and not ops.FWD.rides)\n";
    int rc = luaL_loadstring(L, script);
    if (rc == LUA_OK) { lua_pushinteger(L, OP__COUNT); rc = lua_pcall(L, 1, 0, 0); }
    CHECK(rc == LUA_OK, "the table in Lua: %s", rc == LUA_OK ? "" : lua_tostring(L, -1));
    lua_close(L);
}

/* The simulator's cost of every kind. */
static void check_costs(void) {
    WpConfig m;
    char name[64], err[256];
    if (model_load("tiny", &m, name, sizeof name, err, sizeof err)) { CHECK(0, "model tiny: %s", err); return; }
    for (int k = 0; k < OP__COUNT; k++) {
        const OpInfo *in = op_info(k);
        double f[COST__COUNT];
        cost_compute_features(&m, 1, 0, 2, 3, k, 0, WP_FP32, 0, f);
        int compute = in->phase == OP_PHASE_COMPUTE && !(in->flags & OPF_RIDES);
        /* (a RING is costed by its steps and bytes, overlapped with the compute it rides: test_cp_ring) */
        CHECK(compute == (f[COST_OPS] == 1 && f[COST_MM_FLOPS] > 0),
              "%s: %s, and cost/costs.c gives it %g matrix FLOPs in %g operations", in->name, op_phase_names[in->phase],
              f[COST_MM_FLOPS], f[COST_OPS]);
        /* a local operation that reads or changes values goes through memory (FREE only forgets) */
        unsigned touches = (in->use[0] | in->use[1]) & (USE_READ | USE_WRITE | USE_ADD);
        CHECK(in->phase != OP_PHASE_LOCAL || (in->mem_passes > 0) == (touches != 0),
              "%s: a local operation with %g passes through memory", in->name, in->mem_passes);
    }
    /* a transfer by its links: every collective has its pattern in sim/collective.c */
    for (int c = 1; c < COLL__COUNT; c++) {
        CollShape sh = coll_shape(c, 4, 0, 1000);
        CHECK(sh.nedges > 0 && sh.edge_bytes > 0 && sh.lat_steps > 0, "collective %s: no pattern in sim/collective.c",
              op_coll_names[c]);
    }
}

/* The forms each kind is emitted in, their words in emit.lua, and the runtime function each calls. */
static const struct { const char *name; int kind; } forms[] = {
#define X(f, k) { #f, OP_##k },
    OP_FORMS(X)
#undef X
};

static void check_forms(void) {
    int nforms[OP__COUNT] = { 0 };
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) nforms[forms[i].kind]++;
    for (int k = 0; k < OP__COUNT; k++)
        CHECK(nforms[k] > 0, "%s: no emitter form (emit_ops.h OP_FORMS, emit_ops.c form_of, emit.lua FORMS)", op_names[k]);

    char path[4200];
    snprintf(path, sizeof path, "%s/runtime/common/step.h", getenv("WPGEN_HOME"));
    char *step_h = tmp_slurp(path, NULL);
    CHECK(step_h != NULL, "cannot read %s", path);
    lua_State *L = wpgen_lua_new();
    CHECK(L != NULL, "lua state");
    if (!L || !step_h) { if (L) lua_close(L); free(step_h); return; }
    lua_getglobal(L, "require");
    lua_pushstring(L, "emit");
    int rc = lua_pcall(L, 1, 1, 0);
    CHECK(rc == LUA_OK && lua_istable(L, -1), "require 'emit': %s", rc == LUA_OK ? "not a table" : lua_tostring(L, -1));
    if (rc == LUA_OK && lua_istable(L, -1)) {
        lua_getfield(L, -1, "FORMS");
        CHECK(lua_istable(L, -1), "emit.lua: no M.FORMS");
        for (size_t i = 0; lua_istable(L, -1) && i < sizeof forms / sizeof *forms; i++) {
            lua_getfield(L, -1, forms[i].name);
            CHECK(lua_istable(L, -1), "emit.lua FORMS.%s: missing (a form of %s)", forms[i].name, op_names[forms[i].kind]);
            if (lua_istable(L, -1)) lua_getfield(L, -1, "call");
            else lua_pushnil(L);
            const char *call = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
            CHECK(call != NULL, "emit.lua FORMS.%s: no call (the form of %s)", forms[i].name, op_names[forms[i].kind]);
            if (call && (op_info(forms[i].kind)->flags & OPF_RIDES)) {
                /* it moves inside the compute call after it: its "call" is a comment, no function */
                size_t n = strlen(call);
                CHECK(n >= 4 && !strncmp(call, "/*", 2) && strstr(call + 2, "*/") == call + n - 2,
                      "emit.lua FORMS.%s: %s rides the compute after it, so its call is one C comment, not \"%s\"",
                      forms[i].name, op_names[forms[i].kind], call);
            } else if (call) {
                /* "wp_NAME(R, ..." is "void wp_NAME(WpRank *R, ..." in step.h */
                size_t n = strcspn(call, "(");
                char decl[128];
                snprintf(decl, sizeof decl, "void %.*s(WpRank *R", (int)n, call);
                CHECK(!strncmp(call, "wp_", 3) && call[n] == '(' && strstr(step_h, decl),
                      "emit.lua FORMS.%s: its call \"%s\" is no function of runtime/common/step.h (\"%s\")",
                      forms[i].name, call, decl);
            }
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
        /* and its words as the next use of a value (op_text().uses, which emit_ops.c reads for every kind) */
        lua_getfield(L, -1, "USE");
        CHECK(lua_istable(L, -1), "emit.lua: no M.USE");
        for (int k = 0; lua_istable(L, -1) && k < OP__COUNT; k++) {
            lua_getfield(L, -1, op_names[k]);
            CHECK(lua_type(L, -1) == LUA_TSTRING, "emit.lua USE.%s: missing (its words as the next use of a value)", op_names[k]);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_close(L);
    free(step_h);
}

int main(void) {
    if (!getenv("WPGEN_HOME")) {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd) || access("generator/emit/emit.lua", R_OK)) {
            fprintf(stderr, "test_optable: run from the repository root or set WPGEN_HOME\n");
            return 1;
        }
        setenv("WPGEN_HOME", cwd, 1);
    }
    check_rows();
    check_costs();
    check_forms();
    check_format();
    check_changes();
    check_sizes();
    check_lua();
    return check_summary("test_optable");
}
