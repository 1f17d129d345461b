/* The emitter's view of a verified plan: its hash, the tables the templates render (the plan's
 * shape once, then one rank at a time) and plan.json, written as it goes. Everything here is a
 * pure function of the plan, so the same plan gives the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include <lua.h>
#include <lauxlib.h>
#include "emit/emit_data.h"
#include "common/hash64.h"
#include "common/step.h"
#include "lua/bridge.h"
#include "emit/backends.h"
#include "common/batch.h"

/* ---- the plan's hash: FNV-1a 64 over every field that defines it, never over struct padding ---- */

typedef struct { uint64_t h; } Fnv;

static void fnv_bytes(Fnv *f, const void *data, size_t n) { f->h = wp_fnv1a(f->h, data, n); }
static void fnv_int(Fnv *f, int64_t v) { fnv_bytes(f, &v, sizeof v); }
static void fnv_float(Fnv *f, float v) { fnv_bytes(f, &v, sizeof v); }
static void fnv_str(Fnv *f, const char *s) {
    size_t n = s ? strlen(s) : 0;
    fnv_int(f, (int64_t)n);   /* the length first, so that "ab","c" and "a","bc" differ */
    fnv_bytes(f, s ? s : "", n);
}

uint64_t plan_hash(const Plan *p) {
    Fnv f = { WP_FNV_OFFSET };
    const WpConfig *m = &p->model;
    int64_t shape[] = { m->hidden, m->layers, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab, m->tied,
                        m->seq, m->mbs };
    for (size_t i = 0; i < sizeof shape / sizeof *shape; i++) fnv_int(&f, shape[i]);
    fnv_float(&f, m->eps);
    fnv_float(&f, m->rope_theta);
    /* only where set: the hashes of unscaled plans stay as they were */
    if (m->rope_scaling.factor != 0) {
        const WpRopeScaling *r = &m->rope_scaling;
        fnv_str(&f, "rope_scaling llama3");
        fnv_float(&f, r->factor); fnv_float(&f, r->low_freq_factor); fnv_float(&f, r->high_freq_factor);
        fnv_int(&f, r->original_max_position_embeddings);
    }
    /* the MLP's tile only where it splits the tokens: the hashes of untiled plans stay as they were */
    if (wp_mlp_tile_tokens(m) < m->seq * m->mbs) { fnv_str(&f, "mlp tile"); fnv_int(&f, wp_mlp_tile_tokens(m)); }
    fnv_str(&f, p->strategy);
    fnv_str(&f, p->topo ? p->topo->name : "");
    /* the formats too: a bf16 plan and an fp32 plan of the same operations are different programs */
    int64_t plan[] = { p->nranks, p->replicas, p->nchunks, p->nturns, p->micro_batches, p->total_mbs, p->recompute,
                       p->precision, p->grad_precision };
    for (size_t i = 0; i < sizeof plan / sizeof *plan; i++) fnv_int(&f, plan[i]);
    for (int c = 0; c < p->nchunks; c++) {
        const PlanChunk *ch = &p->chunks[c];
        fnv_int(&f, ch->layer0); fnv_int(&f, ch->nlayers); fnv_int(&f, ch->nowners);
        for (int i = 0; i < ch->nowners; i++) fnv_int(&f, ch->owners[i]);
        if (ch->replicated) fnv_int(&f, -1);   /* only where set: the hashes of other plans stay as they were */
    }
    if (p->weight_wire_fp32) fnv_str(&f, "weight wire fp32");   /* the same */
    if (wp_cp(&p->model) > 1) { fnv_str(&f, "context parallel"); fnv_int(&f, wp_cp(&p->model)); }   /* the same */
    fnv_int(&f, p->ngroups);
    for (int g = 0; g < p->ngroups; g++) {
        fnv_int(&f, p->groups[g].n);
        for (int i = 0; i < p->groups[g].n; i++) fnv_int(&f, p->groups[g].ranks[i]);
    }
    for (int r = 0; r < p->nranks; r++) {
        const PlanRank *rk = &p->ranks[r];
        fnv_int(&f, rk->node); fnv_int(&f, rk->device); fnv_int(&f, rk->replica); fnv_int(&f, rk->stage);
        fnv_int(&f, rk->nbufs);
        for (int b = 0; b < rk->nbufs; b++) {
            const PlanBuf *pb = &rk->bufs[b];
            fnv_str(&f, pb->name);
            fnv_int(&f, pb->kind); fnv_int(&f, pb->master); fnv_int(&f, pb->chunk);
            fnv_int(&f, pb->shard); fnv_int(&f, pb->nshards);
        }
        fnv_int(&f, rk->nops);
        for (int t = 0; rk->turn_start && t <= p->nturns; t++) fnv_int(&f, rk->turn_start[t]);
        /* Ops are hashed field by field: a single 32-bit mix per op keeps 1,024 ranks fast. */
        for (int i = 0; i < rk->nops; i++) {
            const Op *o = &rk->ops[i];
            int32_t v[] = { o->kind, o->what, o->buf, o->buf2, o->chunk, o->mb, o->peer, o->group };
            fnv_bytes(&f, v, sizeof v);
        }
    }
    return f.h;
}

/* ---- tables for the templates ---- */

static void push_ints(lua_State *L, const int *v, int n) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) { lua_pushinteger(L, v[i]); lua_rawseti(L, -2, i + 1); }
}

void emit_push_plan(lua_State *L, const Plan *p, const EmitInfo *info, const char *hash, const char *tpldir) {
    const Topology *t = p->topo;
    lua_createtable(L, 0, 40);
    lua_set_str(L, "version", WPGEN_VERSION);
    lua_set_str(L, "hash", hash);
    lua_set_str(L, "templates", tpldir);
    /* this wpgen's absolute path: job.sbatch runs it to re-plan after a node is lost */
    char exe[4096];
    ssize_t nexe = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[nexe > 0 ? nexe : 0] = 0;
    lua_set_str(L, "wpgen", nexe > 0 ? exe : "wpgen");
    /* and where it ran: plan.json's "command" names its files (-m, --calibration) from there */
    char cwd[4096];
    lua_set_str(L, "cwd", getcwd(cwd, sizeof cwd) ? cwd : ".");
    lua_set_str(L, "strategy", p->strategy);
    if (p->notes) lua_set_str(L, "notes", p->notes);
    lua_set_str(L, "model_name", info->model_name);
    lua_set_str(L, "topo_name", info->topo_name ? info->topo_name : t->name);
    lua_set_str(L, "backend", info->backend ? info->backend : backend_default(BACKEND_COMPUTE));
    lua_set_str(L, "comm", info->comm ? info->comm : backend_default_comm(info->backend));
    lua_set_int(L, "nranks", p->nranks);
    lua_set_int(L, "nnodes", t->nnodes);
    lua_set_int(L, "replicas", p->replicas);
    lua_set_int(L, "nturns", p->nturns);
    lua_set_int(L, "micro_batches", p->micro_batches);
    lua_set_int(L, "total_mbs", p->total_mbs);
    char gb[96];   /* in the words every tool prints it with (common/batch.h) */
    wp_batch_describe((long)p->total_mbs * p->model.mbs, p->model.seq, gb, sizeof gb);
    lua_set_str(L, "global_batch", gb);
    lua_set_int(L, "recompute", p->recompute);
    lua_set_str(L, "precision", wp_dtype_name(p->precision));
    lua_set_str(L, "grad_precision", wp_dtype_name(p->grad_precision));
    lua_set_str(L, "weight_wire", wp_dtype_name(plan_carried_dtype(p, WHAT_W)));
    lua_set_num(L, "bytes_intra", info->bytes_intra);
    lua_set_num(L, "bytes_inter", info->bytes_inter);
    lua_set_num(L, "step_time_s", info->step_time_s);
    lua_set_num(L, "bubble_ratio", info->bubble_ratio);
    if (info->run_json) {   /* wpgen run: run.json, and run.sh's flags when given none */
        lua_set_str(L, "run_json", info->run_json);
        lua_set_str(L, "run_mpirun_flags", info->run_mpirun_flags ? info->run_mpirun_flags : "");
        lua_createtable(L, info->ntrain_args, 0);
        for (int i = 0; i < info->ntrain_args; i++) { lua_pushstring(L, info->train_args[i]); lua_rawseti(L, -2, i + 1); }
        lua_setfield(L, -2, "run_args");
    }
    lua_set_num(L, "peak_mem", (double)p->peak_mem);
    lua_set_int(L, "peak_rank", p->peak_rank);
    long nops = 0;
    for (int r = 0; r < p->nranks; r++) nops += p->ranks[r].nops;
    lua_set_int(L, "nops", nops);

    /* For topology emulation: the slowest link inside any node, and the network. */
    double intra_bw = 0, intra_lat = 0;
    for (int n = 0; n < t->nnodes; n++) {
        const Link *l = &t->nodes[n].intra;
        if (n == 0 || l->bw < intra_bw) intra_bw = l->bw;
        if (l->lat > intra_lat) intra_lat = l->lat;
    }
    lua_set_num(L, "intra_bw", intra_bw);
    lua_set_num(L, "intra_lat", intra_lat);
    lua_set_num(L, "inter_bw", t->nnodes > 1 ? t->net.bw : 0);
    lua_set_num(L, "inter_lat", t->nnodes > 1 ? t->net.lat : 0);

    const WpConfig *m = &p->model;
    lua_createtable(L, 0, 12);
    lua_set_int(L, "hidden", m->hidden); lua_set_int(L, "layers", m->layers); lua_set_int(L, "heads", m->heads);
    lua_set_int(L, "kv_heads", m->kv_heads); lua_set_int(L, "head_dim", m->head_dim); lua_set_int(L, "ffn", m->ffn);
    lua_set_int(L, "vocab", m->vocab); lua_set_num(L, "eps", m->eps); lua_set_num(L, "rope_theta", m->rope_theta);
    lua_set_int(L, "tied", m->tied); lua_set_int(L, "seq", m->seq); lua_set_int(L, "mbs", m->mbs);
    lua_set_int(L, "mlp_tile", wp_mlp_tile_tokens(m));
    if (m->rope_scaling.factor != 0) {   /* absent (nil) when unscaled */
        const WpRopeScaling *r = &m->rope_scaling;
        lua_createtable(L, 0, 4);
        lua_set_num(L, "factor", r->factor); lua_set_num(L, "low_freq_factor", r->low_freq_factor);
        lua_set_num(L, "high_freq_factor", r->high_freq_factor);
        lua_set_int(L, "original_max_position_embeddings", r->original_max_position_embeddings);
        lua_setfield(L, -2, "rope_scaling");
    }
    /* the special-token ids, for the config.json a checkpoint writes: { bos = {1}, eos = {2, 3}, eos_list = 1 } */
    const WpTokenIds *ti = &m->ids;
    lua_createtable(L, 0, 4);
    lua_createtable(L, ti->nbos, 0);
    if (ti->nbos) { lua_pushinteger(L, ti->bos); lua_rawseti(L, -2, 1); }
    lua_setfield(L, -2, "bos");
    lua_createtable(L, ti->npad, 0);
    if (ti->npad) { lua_pushinteger(L, ti->pad); lua_rawseti(L, -2, 1); }
    lua_setfield(L, -2, "pad");
    lua_createtable(L, ti->neos, 0);
    for (int i = 0; i < ti->neos; i++) { lua_pushinteger(L, ti->eos[i]); lua_rawseti(L, -2, i + 1); }
    lua_setfield(L, -2, "eos");
    lua_set_int(L, "eos_list", ti->eos_list);
    lua_setfield(L, -2, "ids");
    lua_setfield(L, -2, "model");

    lua_createtable(L, p->nchunks, 0);
    for (int c = 0; c < p->nchunks; c++) {
        lua_createtable(L, 0, 3);
        lua_set_int(L, "layer0", p->chunks[c].layer0);
        lua_set_int(L, "nlayers", p->chunks[c].nlayers);
        push_ints(L, p->chunks[c].owners, p->chunks[c].nowners);
        lua_setfield(L, -2, "owners");
        if (p->chunks[c].replicated) { lua_pushboolean(L, 1); lua_setfield(L, -2, "replicated"); }
        lua_rawseti(L, -2, c + 1);
    }
    lua_setfield(L, -2, "chunks");

    lua_createtable(L, p->ngroups, 0);
    for (int g = 0; g < p->ngroups; g++) {
        lua_createtable(L, 0, 1);
        push_ints(L, p->groups[g].ranks, p->groups[g].n);
        lua_setfield(L, -2, "ranks");
        lua_rawseti(L, -2, g + 1);
    }
    lua_setfield(L, -2, "groups");

    lua_createtable(L, t->nnodes, 0);
    for (int n = 0; n < t->nnodes; n++) { lua_pushstring(L, t->nodes[n].name); lua_rawseti(L, -2, n + 1); }
    lua_setfield(L, -2, "nodes");

    lua_createtable(L, p->nsources, 0);
    for (int i = 0; i < p->nsources; i++) { lua_pushstring(L, p->sources[i]); lua_rawseti(L, -2, i + 1); }
    lua_setfield(L, -2, "sources");
}

/* emit_rank_holds's running count. */
typedef struct Holds { int acts, stashes, keeps, max_acts, max_stashes, max_keeps; } Holds;

static void hold(Holds *h, int acts, int stashes, int keeps) {
    h->acts += acts;
    h->stashes += stashes;
    h->keeps += keeps;
    if (h->acts > h->max_acts) h->max_acts = h->acts;
    if (h->stashes > h->max_stashes) h->max_stashes = h->stashes;
    if (h->keeps > h->max_keeps) h->max_keeps = h->keeps;
}

void emit_rank_holds(const Plan *p, int r, int *max_acts, int *max_stashes, int *max_keeps) {
    const PlanRank *rk = &p->ranks[r];
    Holds h = { 0 };
    for (int t = 0; rk->turn_start && t < p->nturns; t++) {
        int o0 = rk->turn_start[t], o1 = rk->turn_start[t + 1], sent = 0;
        /* posting: a receive takes its slot now; a send keeps its slot until the wait */
        for (int i = o0; i < o1; i++) {
            const Op *op = &rk->ops[i];
            int act = op->what == WHAT_A || op->what == WHAT_G;
            if (op->kind == OP_RECV && act) hold(&h, 1, 0, 0);
            else if (op->kind == OP_SEND && act) sent++;
        }
        /* compute: the new slots are taken before the old ones are released */
        for (int i = o0; i < o1; i++) {
            const Op *op = &rk->ops[i];
            int first = op->chunk == 0, last = op->chunk == p->nchunks - 1;
            switch ((OpKind)op->kind) {
            case OP_FWD: hold(&h, !last, 1, 0); hold(&h, -!first, 0, 0); break;
            case OP_BWD: hold(&h, !first, 0, 0); hold(&h, -!last, -1, 0); break;
            /* BWD_B leaves its stash for BWD_W and adds a keep; BWD_W ends both */
            case OP_BWD_B: hold(&h, !first, 0, 1); hold(&h, -!last, 0, 0); break;
            case OP_BWD_W: hold(&h, 0, -1, -1); break;
            /* the others hold no slot of activations (a transfer's, above). No default: a new kind
             * is a -Wswitch error until it says what it holds. */
            case OP_SEND: case OP_RECV: case OP_BCAST: case OP_REDUCE: case OP_ALLREDUCE: case OP_ALLGATHER:
            case OP_REDUCE_SCATTER: case OP_TIE_ALLREDUCE: case OP_ACC: case OP_COPY: case OP_TIE: case OP_OPT:
            case OP_FREE: case OP_RING: case OP__COUNT: break;
            }
        }
        hold(&h, -sent, 0, 0);   /* the wait: what was sent has left */
    }
    *max_acts = h.max_acts;
    *max_stashes = h.max_stashes;
    *max_keeps = h.max_keeps;
}

void emit_push_rank(lua_State *L, const Plan *p, int r) {
    const PlanRank *rk = &p->ranks[r];
    const Topology *t = p->topo;
    lua_createtable(L, 0, 10);
    lua_set_int(L, "rank", r);
    lua_set_int(L, "node", rk->node);
    lua_set_str(L, "node_name", t->nodes[rk->node].name);
    lua_set_int(L, "slot", rk->device - t->nodes[rk->node].first_device);
    lua_set_int(L, "replica", rk->replica);
    lua_set_int(L, "stage", rk->stage);
    lua_set_int(L, "nops", rk->nops);
    int max_acts, max_stashes, max_keeps;
    emit_rank_holds(p, r, &max_acts, &max_stashes, &max_keeps);
    lua_set_int(L, "max_acts", max_acts);
    lua_set_int(L, "max_stashes", max_stashes);
    lua_set_int(L, "max_keeps", max_keeps);
    lua_set_int(L, "xfer_bytes", (lua_Integer)plan_rank_xfer_bytes(p, r, WP_XFER_ALIGN));
    /* its device's peak at the plan's precision: the trainer's MFU divides by the ranks' sum */
    lua_set_num(L, "peak_flops", topology_peak_flops(&t->types[t->nodes[rk->node].type], p->precision == WP_FP32));

    lua_createtable(L, rk->nbufs, 0);
    for (int b = 0; b < rk->nbufs; b++) {
        const PlanBuf *pb = &rk->bufs[b];
        lua_createtable(L, 0, 8);
        lua_set_str(L, "name", pb->name);
        lua_set_str(L, "kind", pb->kind == BUF_W ? "W" : "D");
        lua_pushboolean(L, pb->master); lua_setfield(L, -2, "master");
        lua_set_int(L, "chunk", pb->chunk);
        lua_set_int(L, "shard", pb->shard);
        lua_set_int(L, "nshards", pb->nshards);
        lua_set_int(L, "bytes", (lua_Integer)pb->bytes);
        lua_set_int(L, "elems", (lua_Integer)pb->elems);
        lua_set_str(L, "dtype", wp_dtype_name((WpDtype)pb->dtype));
        lua_set_str(L, "copy_dtype", wp_dtype_name((WpDtype)pb->copy_dtype));
        lua_rawseti(L, -2, b + 1);
    }
    lua_setfield(L, -2, "bufs");
}

/* ---- plan.json: one top-level key per line, each chunk, group and rank on one line ---- */

static int put_value_prec(FILE *f, const char *key, json_t *v, int last, int prec) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(prec));
    json_decref(v);
    if (!s) return -1;
    int rc = fprintf(f, "  \"%s\": %s%s\n", key, s, last ? "" : ",") < 0 ? -1 : 0;
    free(s);
    return rc;
}

static int put_value(FILE *f, const char *key, json_t *v, int last) { return put_value_prec(f, key, v, last, 17); }

/* The fewest significant digits that read back as the same float (1e-05, not 9.99999975e-06),
 * and all of an integer's (10000.0, not 1e+04). */
static int float_digits(float v) {
    char s[32];
    int d0 = 1;
    float a = v < 0 ? -v : v;
    if (a < 1e15f && a == (float)(long long)a)
        for (float x = a; x >= 10; x /= 10) d0++;
    for (int d = d0; d < 17; d++) {
        snprintf(s, sizeof s, "%.*g", d, (double)v);
        if (strtof(s, NULL) == v) return d;
    }
    return 17;
}

/* An array, one element per line. */
static int put_lines(FILE *f, const char *key, json_t *arr) {
    int rc = fprintf(f, "  \"%s\": [\n", key) < 0 ? -1 : 0;
    size_t n = json_array_size(arr);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *s = json_dumps(json_array_get(arr, i), JSON_COMPACT | JSON_ENCODE_ANY);
        if (!s || fprintf(f, "    %s%s\n", s, i + 1 < n ? "," : "") < 0) rc = -1;
        free(s);
    }
    json_decref(arr);
    if (rc == 0 && fprintf(f, "  ],\n") < 0) rc = -1;
    return rc;
}

static json_t *int_array(const int *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

int emit_json_head(FILE *f, const Plan *p, const EmitInfo *info, const char *hash) {
    const WpConfig *m = &p->model;
    char gen[64];
    snprintf(gen, sizeof gen, "wpgen %s", WPGEN_VERSION);
    json_t *model = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:i, s:i}",
                              "name", info->model_name ? info->model_name : "", "hidden_size", m->hidden,
                              "num_hidden_layers", m->layers, "num_attention_heads", m->heads,
                              "num_key_value_heads", m->kv_heads, "intermediate_size", m->ffn, "vocab_size", m->vocab,
                              "rms_norm_eps", (double)m->eps, "rope_theta", (double)m->rope_theta,
                              "tie_word_embeddings", m->tied, "seq_len", m->seq, "micro_batch_size", m->mbs);
    /* head_dim: it may differ from hidden / heads; rope_scaling only where set, as in config.json */
    if (model && json_object_set_new(model, "head_dim", json_integer(m->head_dim))) { json_decref(model); model = NULL; }
    if (model && json_object_set_new(model, "mlp_tile_tokens", json_integer(wp_mlp_tile_tokens(m)))) { json_decref(model); model = NULL; }
    const WpRopeScaling *r = &m->rope_scaling;
    json_t *rs = r->factor != 0 ? json_pack("{s:f, s:f, s:f, s:i, s:s}", "factor", (double)r->factor, "low_freq_factor",
                                            (double)r->low_freq_factor, "high_freq_factor", (double)r->high_freq_factor,
                                            "original_max_position_embeddings", r->original_max_position_embeddings,
                                            "rope_type", "llama3") : NULL;
    if (model && rs && json_object_set_new(model, "rope_scaling", rs)) { json_decref(model); model = NULL; }
    json_t *nodes = json_array();
    for (int n = 0; n < p->topo->nnodes; n++) json_array_append_new(nodes, json_string(p->topo->nodes[n].name));
    json_t *chunks = json_array();
    for (int c = 0; c < p->nchunks; c++) {
        json_t *cj = json_pack("{s:i, s:i, s:o}", "layer0", p->chunks[c].layer0, "layers", p->chunks[c].nlayers, "owners",
                               int_array(p->chunks[c].owners, p->chunks[c].nowners));
        if (cj && p->chunks[c].replicated) json_object_set_new(cj, "replicated", json_true());
        json_array_append_new(chunks, cj);
    }
    json_t *groups = json_array();
    for (int g = 0; g < p->ngroups; g++) json_array_append_new(groups, int_array(p->groups[g].ranks, p->groups[g].n));
    if (!model || !nodes || !chunks || !groups) {
        json_decref(model); json_decref(nodes); json_decref(chunks); json_decref(groups);
        return -1;
    }
    int rc = fprintf(f, "{\n") < 0 ? -1 : 0;
    if (!rc) rc = put_value(f, "generated_by", json_string(gen), 0);
    if (!rc) rc = put_value(f, "plan_hash", json_string(hash), 0);
    if (!rc) rc = put_value(f, "strategy", json_string(p->strategy), 0);
    if (!rc && info->argc > 0) {
        /* what wpgen replan runs again for another topology and output: the command without its
         * -t and -o (which replan gives anew), so that the same plan emitted anywhere is the same
         * bytes and names no path of this machine's but what the user typed */
        json_t *cmd = json_array();
        for (int i = 0; i < info->argc; i++) {
            if ((!strcmp(info->argv[i], "-t") || !strcmp(info->argv[i], "-o")) && i + 1 < info->argc) { i++; continue; }
            json_array_append_new(cmd, json_string(info->argv[i]));
        }
        rc = put_value(f, "command", cmd, 0);
    }
    if (!rc && p->notes) rc = put_value(f, "notes", json_string(p->notes), 0);
    if (!rc) rc = put_value(f, "backend", json_string(info->backend ? info->backend : backend_default(BACKEND_COMPUTE)), 0);
    if (!rc) rc = put_value(f, "comm", json_string(info->comm ? info->comm : backend_default_comm(info->backend)), 0);
    /* enough digits for every float of the model */
    float reals[] = { m->eps, m->rope_theta, r->factor, r->low_freq_factor, r->high_freq_factor };
    int digits = 1;
    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++)
        if (float_digits(reals[i]) > digits) digits = float_digits(reals[i]);
    if (!rc) rc = put_value_prec(f, "model", json_incref(model), 0, digits);
    if (!rc) rc = put_value(f, "topology", json_string(info->topo_name ? info->topo_name : p->topo->name), 0);
    if (!rc) rc = put_value(f, "nodes", json_incref(nodes), 0);
    if (!rc && info->topo_path) {
        /* the topology as given (before --calibration): job.sbatch re-plans from it, minus the
         * nodes it lost (wpgen replan --without), keeping the figures a probe or calibration gave */
        json_t *given = json_load_file(info->topo_path, 0, NULL);
        if (given) rc = put_value_prec(f, "topology_json", given, 0, 15);
    }
    if (!rc) rc = put_value(f, "nranks", json_integer(p->nranks), 0);
    if (!rc) rc = put_value(f, "replicas", json_integer(p->replicas), 0);
    if (!rc) rc = put_value(f, "micro_batches_per_rank", json_integer(p->micro_batches), 0);
    if (!rc) rc = put_value(f, "micro_batches", json_integer(p->total_mbs), 0);
    if (!rc) rc = put_value(f, "recompute", json_boolean(p->recompute), 0);
    if (!rc) rc = put_value(f, "offload_activations", json_boolean(p->recompute == WP_RECOMPUTE_OFFLOAD), 0);
    if (!rc) rc = put_value(f, "context_parallel", json_integer(wp_cp(&p->model)), 0);
    if (!rc) rc = put_value(f, "precision", json_string(wp_dtype_name(p->precision)), 0);
    if (!rc) rc = put_value(f, "grad_precision", json_string(wp_dtype_name(p->grad_precision)), 0);
    if (!rc) rc = put_value(f, "weight_wire", json_string(wp_dtype_name(plan_carried_dtype(p, WHAT_W))), 0);
    if (!rc) rc = put_value(f, "turns", json_integer(p->nturns), 0);
    if (!rc) rc = put_value(f, "bytes_intra_node", json_real(info->bytes_intra), 0);
    if (!rc) rc = put_value(f, "bytes_inter_node", json_real(info->bytes_inter), 0);
    if (!rc && info->step_time_s > 0) rc = put_value(f, "predicted_step_time_s", json_real(info->step_time_s), 0);
    if (!rc && info->step_time_s > 0) rc = put_value(f, "predicted_bubble_ratio", json_real(info->bubble_ratio), 0);
    if (!rc) rc = put_value(f, "peak_mem_bytes", json_integer((json_int_t)p->peak_mem), 0);
    if (!rc) rc = put_value(f, "peak_mem_rank", json_integer(p->peak_rank), 0);
    if (!rc) rc = put_lines(f, "chunks", json_incref(chunks));
    if (!rc) rc = put_lines(f, "groups", json_incref(groups));
    if (!rc && fprintf(f, "  \"ranks\": [\n") < 0) rc = -1;
    json_decref(model); json_decref(nodes); json_decref(chunks); json_decref(groups);
    return rc;
}

/* {"rank":.., "node":.., ..., "buffers":[...], "turns":{"T":["op", ...], ...}}: empty turns left
 * out. The head comes from Jansson; the operations, a few hundred thousand short strings made of
 * names that are C identifiers, are written straight out. */
int emit_json_rank(FILE *f, const Plan *p, int r) {
    const PlanRank *rk = &p->ranks[r];
    json_t *bufs = json_array();
    for (int b = 0; b < rk->nbufs; b++) {
        const PlanBuf *pb = &rk->bufs[b];
        json_array_append_new(bufs, json_pack("{s:s, s:s, s:b, s:i, s:i, s:i, s:I, s:s}", "name", pb->name, "kind",
                                              pb->kind == BUF_W ? "W" : "D", "master", pb->master, "chunk", pb->chunk,
                                              "shard", pb->shard, "nshards", pb->nshards, "bytes", (json_int_t)pb->bytes,
                                              "dtype", wp_dtype_name((WpDtype)pb->dtype)));
    }
    json_t *o = json_pack("{s:i, s:s, s:i, s:i, s:i, s:I, s:o}", "rank", r, "node", p->topo->nodes[rk->node].name,
                          "device", rk->device, "replica", rk->replica, "stage", rk->stage,
                          "peak_mem_bytes", (json_int_t)rk->peak_mem, "buffers", bufs);
    char *head = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!head) return -1;
    head[strlen(head) - 1] = 0;   /* the closing brace: the turns follow */
    int rc = fprintf(f, "    %s,\"turns\":{", head) < 0 ? -1 : 0;
    free(head);
    char line[256];
    const char *sep = "";
    for (int t = 0; t < p->nturns && rc == 0; t++) {
        int t0 = rk->turn_start[t], t1 = rk->turn_start[t + 1];
        if (t0 == t1) continue;
        if (fprintf(f, "%s\"%d\":[", sep, t) < 0) rc = -1;
        for (int i = t0; i < t1 && rc == 0; i++) {
            op_format(p, r, &rk->ops[i], line, sizeof line);
            if ((i > t0 && putc(',', f) == EOF) || putc('"', f) == EOF || fputs(line, f) == EOF || putc('"', f) == EOF)
                rc = -1;
        }
        if (rc == 0 && fputc(']', f) == EOF) rc = -1;
        sep = ",";
    }
    if (rc == 0 && fprintf(f, "}}%s\n", r + 1 < p->nranks ? "," : "") < 0) rc = -1;
    return rc;
}

int emit_json_tail(FILE *f) {
    return fprintf(f, "  ]\n}\n") < 0 ? -1 : 0;
}
