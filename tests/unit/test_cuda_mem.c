/* The CUDA backend's start-up memory planning, without a GPU: for every strategy on a few
 * clusters, in bf16 with bf16 and fp32 gradients,
 *   - the activations and stashes wpgen counts per rank (emit_rank_holds, emitted as
 *     WpRankDesc.max_acts/max_stashes) hold at least the verifier's peak of activations kept at
 *     once, and 1F1B's stage s holds P - s stashes (its warm-up), as the schedule says;
 *   - the pool cm_plan lays out from the emitted tables has every part aligned and disjoint,
 *     buffers and masters+AdamW equal to the verifier's accounting of them (to the alignment),
 *     activations/stashes at least its peak, an fp32 staging gradient exactly where some
 *     gradient buffer is bf16, and room for the transfers in another format than their buffers'
 *     that fits every turn's, and none where none moves so (a one-rank plan moves nothing). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "plan_fixture.h"
#include "emit/emit_data.h"
#include "cuda/cuda_mem.h"

static void noop_step(WpRank *R) { (void)R; }

/* The emitted tables of plan p (what plan_desc.c holds), enough for cm_plan. */
typedef struct Desc { WpPlanDesc P; WpChunkDesc *chunks; WpRankDesc *ranks; WpBufDesc **bufs; WpChunk *k; } Desc;

static void desc_make(Desc *d, const Plan *p) {
    memset(d, 0, sizeof *d);
    d->chunks = calloc((size_t)p->nchunks, sizeof *d->chunks);
    d->k = calloc((size_t)p->nchunks, sizeof *d->k);
    d->ranks = calloc((size_t)p->nranks, sizeof *d->ranks);
    d->bufs = calloc((size_t)p->nranks, sizeof *d->bufs);
    for (int c = 0; c < p->nchunks; c++) {
        d->chunks[c] = (WpChunkDesc){ p->chunks[c].layer0, p->chunks[c].nlayers, 0, NULL };
        d->k[c] = wp_chunk_make(&p->model, c, p->chunks[c].layer0, p->chunks[c].nlayers, c == 0, c == p->nchunks - 1);
    }
    for (int r = 0; r < p->nranks; r++) {
        const PlanRank *rk = &p->ranks[r];
        d->bufs[r] = calloc((size_t)rk->nbufs + 1, sizeof **d->bufs);
        for (int b = 0; b < rk->nbufs; b++) {
            const PlanBuf *pb = &rk->bufs[b];
            d->bufs[r][b] = (WpBufDesc){ pb->name, pb->kind == BUF_W ? WP_BUF_W : WP_BUF_D, pb->master, pb->chunk, pb->shard,
                                         pb->nshards, pb->elems, pb->dtype, pb->copy_dtype };
        }
        int acts, stashes, keeps;
        emit_rank_holds(p, r, &acts, &stashes, &keeps);
        d->ranks[r] = (WpRankDesc){ rk->node, rk->replica, rk->stage, rk->nbufs, d->bufs[r], noop_step, acts, stashes, keeps,
                                    plan_rank_xfer_bytes(p, r, WP_XFER_ALIGN), 0 };   /* no peak: the memory plan does not use it */
    }
    d->P = (WpPlanDesc){ .model = p->model, .nranks = p->nranks, .nchunks = p->nchunks, .total_mbs = p->total_mbs,
                         .micro_batches = p->micro_batches, .recompute = p->recompute, .precision = p->precision,
                         .grad_precision = p->grad_precision, .weight_wire_fp32 = p->weight_wire_fp32, .chunks = d->chunks,
                         .ranks = d->ranks };
}

static void desc_free(Desc *d, int nranks) {
    for (int r = 0; r < nranks; r++) free(d->bufs[r]);
    free(d->bufs); free(d->ranks); free(d->chunks); free(d->k);
}

static size_t up(size_t n) { size_t a = (n + CM_ALIGN - 1) / CM_ALIGN * CM_ALIGN; return a ? a : CM_ALIGN; }

typedef struct Range { size_t off, len; } Range;
static int cmp_range(const void *a, const void *b) {
    const Range *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

static void check_rank(const Plan *p, const Desc *d, int r, const char *what) {
    const PlanRank *rk = &p->ranks[r];
    const WpRankDesc *me = &d->P.ranks[r];
    CudaMemPlan m;
    CHECK(cm_plan(&m, &d->P, r, d->k, p->recompute) == 0, "%s rank %d: cm_plan", what, r);
    /* parts disjoint, aligned, inside the pool */
    Range rg[4096]; int n = 0;
    for (int b = 0; b < me->nbufs && n < 4000; b++) {
        const WpBufDesc *bd = &me->bufs[b];
        rg[n++] = (Range){ m.buf[b], bd->floats * wp_dtype_bytes((WpDtype)bd->dtype) };
        if (m.copy[b] != SIZE_MAX) rg[n++] = (Range){ m.copy[b], bd->floats * 2 };
        if (m.adam_m[b] != SIZE_MAX) { rg[n++] = (Range){ m.adam_m[b], bd->floats * 4 }; rg[n++] = (Range){ m.adam_v[b], bd->floats * 4 }; }
        CHECK((m.copy[b] != SIZE_MAX) == (bd->master && bd->copy_dtype != bd->dtype), "%s rank %d buf %s: a copy iff a master in another format", what, r, bd->name);
    }
    rg[n++] = (Range){ m.acts, m.act_bytes * (size_t)m.nacts };
    /* offload: the stashes are pinned host memory, none of the pool's (the verifier's device
     * activations hold none) */
    CHECK(m.stashes_host == (p->recompute == WP_RECOMPUTE_OFFLOAD) && (m.stashes == SIZE_MAX) == m.stashes_host,
          "%s rank %d: stashes in host memory iff offload", what, r);
    if (!m.stashes_host) rg[n++] = (Range){ m.stashes, m.stash_bytes * (size_t)m.nstashes };
    else CHECK(m.stash_bytes * (size_t)m.nstashes + CM_ALIGN * (size_t)m.nstashes >= rk->mem.host,
               "%s rank %d: %d host stashes of %zu bytes hold less than the verifier's host peak of %zu", what, r,
               m.nstashes, m.stash_bytes, rk->mem.host);
    if (m.nkeeps) rg[n++] = (Range){ m.keeps, m.keep_bytes * (size_t)m.nkeeps };
    CHECK((m.nkeeps > 0) == (m.keeps != SIZE_MAX), "%s rank %d: keep slots iff the plan holds keeps", what, r);
    if (m.gstage != SIZE_MAX) rg[n++] = (Range){ m.gstage, m.stage_floats * 4 };
    rg[n++] = (Range){ m.xfer, m.xfer_bytes };
    rg[n++] = (Range){ m.tokens, (size_t)m.ntok * p->model.seq * p->model.mbs * 4 };
    rg[n++] = (Range){ m.targets, (size_t)m.ntok * p->model.seq * p->model.mbs * 4 };
    rg[n++] = (Range){ m.loss, 8 };
    rg[n++] = (Range){ m.sumsq, 8 };
    qsort(rg, (size_t)n, sizeof *rg, cmp_range);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        if (rg[i].off % CM_ALIGN) ok = 0;
        if (i + 1 < n && rg[i].off + rg[i].len > rg[i + 1].off) ok = 0;
        if (rg[i].off + rg[i].len > m.total) ok = 0;
    }
    CHECK(ok, "%s rank %d: the pool's parts are aligned, disjoint and inside it", what, r);
    CHECK(m.b_buffers + m.b_masters + m.b_acts + m.b_staging == m.total, "%s rank %d: the parts sum to the pool", what, r);
    /* buffers and masters as the verifier counted them, up to the alignment of each array */
    size_t want = rk->mem.weights + rk->mem.grads + rk->mem.masters, slack = (size_t)(4 * me->nbufs + 4) * CM_ALIGN;
    size_t got = m.b_buffers + m.b_masters;
    CHECK(got >= want && got <= want + slack, "%s rank %d: buffers+masters %zu bytes, the verifier counts %zu", what, r, got, want);
    /* activations: at least the verifier's peak */
    CHECK(m.b_acts + CM_ALIGN >= rk->mem.acts, "%s rank %d: %d activations and %d stashes (%zu bytes) hold less than the "
          "verifier's peak of %zu bytes", what, r, me->max_acts, me->max_stashes, m.b_acts, rk->mem.acts);
    int bf16_grads = 0;
    for (int b = 0; b < me->nbufs; b++) bf16_grads |= me->bufs[b].kind == WP_BUF_D && me->bufs[b].dtype == WP_BF16;
    CHECK((m.gstage != SIZE_MAX) == bf16_grads, "%s rank %d: an fp32 staging gradient iff a bf16 gradient buffer", what, r);
    /* the stage is the largest segment of a chunk's gradient (a layer's, the head's, the
     * embedding's), as the plan counts it, not a whole chunk */
    CHECK(!bf16_grads || m.stage_floats * sizeof(float) == plan_grad_stage_bytes(p, r),
          "%s rank %d: staging gradient of %zu floats, the plan counts %zu bytes", what, r, m.stage_floats,
          plan_grad_stage_bytes(p, r));
    /* transfer copies: every turn's fit, taken as step_cuda.c's carried_ptr takes them (each
     * operand of a W or D transfer whose buffer works in another format, at the carried format,
     * rounded up; a shard at its largest size), and none where no such operand moves */
    size_t most = 0;
    for (int t = 0; t < p->nturns; t++) {
        size_t need = 0;
        for (int i = rk->turn_start[t]; i < rk->turn_start[t + 1]; i++) {
            const Op *op = &rk->ops[i];
            int w = plan_op_carries(p, r, op);
            if (w != WHAT_W && w != WHAT_D) continue;
            const OpNote *nt = &rk->notes[i];
            int operand[2] = { op->buf, op->buf2 };
            for (int j = 0; j < 2; j++) {
                if (operand[j] < 0) continue;
                const WpBufDesc *bd = &me->bufs[operand[j]];
                if (cm_working(bd) == cm_carried(&d->P, bd)) continue;
                size_t whole = d->k[nt->chunk].nparams;
                /* allgather and reduce-scatter: the shard buffer moves its shard, the whole one the chunk */
                int coll2 = op->kind == OP_ALLGATHER || op->kind == OP_REDUCE_SCATTER;
                int nsh = coll2 ? bd->nshards : nt->nshards;
                size_t n = nsh > 1 ? shard_elems(whole, nsh) : whole;
                need += up(n * wp_dtype_bytes((WpDtype)cm_carried(&d->P, bd)));
            }
        }
        if (need > most) most = need;
    }
    CHECK(m.xfer_bytes >= most, "%s rank %d: transfer copies of %zu bytes, a turn needs %zu", what, r, m.xfer_bytes, most);
    CHECK((m.xfer_bytes > 0) == (most > 0), "%s rank %d: transfer copies (%zu bytes) iff some turn needs them (%zu)",
          what, r, m.xfer_bytes, most);
    CHECK(m.act_bytes == up((size_t)p->model.seq * p->model.mbs * p->model.hidden * 2), "%s rank %d: an activation slot is [T, H] bf16", what, r);
    cm_free(&m);
}

static void check_strategy(const char *s, int nodes, const int *per, int mbs, WpDtype grads, int wire32, int rec) {
    Topology t;
    if (fixture_topology(&t, nodes, per)) { CHECK(0, "topology"); return; }
    WpConfig m = fixture_model(8);
    char err[1024], what[128];
    StrategyOpts o = { .micro_batches = mbs, .replicas = 1, .precision = WP_BF16, .grad_precision = grads,
                       .weight_wire = wire32 ? "fp32" : NULL, .recompute = rec };
    Plan *p = fixture_plan_opts(&t, &m, s, &o, err, sizeof err);
    snprintf(what, sizeof what, "%s on %d ranks (gradients %s, weights on the wire %s%s)", s, t.ndevices, wp_dtype_name(grads),
             wire32 ? "fp32" : "bf16", rec == WP_RECOMPUTE_OFFLOAD ? ", offload" : "");
    CHECK(p != NULL, "%s: %s", what, err);
    if (!p) { topology_free(&t); return; }
    Desc d;
    desc_make(&d, p);
    for (int r = 0; r < p->nranks; r++) {
        check_rank(p, &d, r, what);
        int split = 0;
        for (int i = 0; i < p->ranks[r].nops; i++) split |= p->ranks[r].ops[i].kind == OP_BWD_B;
        CHECK((d.ranks[r].max_keeps > 0) == split, "%s rank %d: %d B-to-W keeps, and %s BWD_B", what, r,
              d.ranks[r].max_keeps, split ? "a" : "no");
    }
    if (!strcmp(s, "1f1b") && nodes == 1)
        for (int r = 0; r < p->nranks; r++) {
            int want = p->nranks - r < p->total_mbs ? p->nranks - r : p->total_mbs;
            CHECK(d.ranks[r].max_stashes == want, "%s: stage %d holds %d stashes, 1F1B's warm-up says %d", what, r,
                  d.ranks[r].max_stashes, want);
        }
    desc_free(&d, p->nranks);
    plan_free(p);
    topology_free(&t);
}

int main(void) {
    fixture_init();
    static const char *strategies[] = { "weipipe-naive", "weipipe-interleave", "1f1b", "fsdp", "tawpipe",
                                        "zb1", "weipipe-zb1", "weipipe-zb2" };
    for (int i = 0; i < 8; i++)
        for (int g = 0; g < 3; g++) {   /* gradients bf16, fp32, fp32 with weights on the wire in fp32 */
            WpDtype gd = g ? WP_FP32 : WP_BF16;
            check_strategy(strategies[i], 1, (int[]){ 4 }, 2, gd, g == 2, 0);
            check_strategy(strategies[i], 2, (int[]){ 2, 2 }, 3, gd, g == 2, 0);
            check_strategy(strategies[i], 1, (int[]){ 1 }, 1, gd, g == 2, 0);
        }
    for (int i = 0; i < 8; i++) {   /* offload: the stashes in pinned host memory */
        check_strategy(strategies[i], 1, (int[]){ 4 }, 2, WP_BF16, 0, WP_RECOMPUTE_OFFLOAD);
        check_strategy(strategies[i], 2, (int[]){ 2, 2 }, 3, WP_BF16, 0, WP_RECOMPUTE_OFFLOAD);
    }
    fixture_done();
    return check_summary("test_cuda_mem");
}
