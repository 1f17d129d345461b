/* The CUDA backend's start-up memory plan (cuda_mem.h): offsets in one device pool, by part. */
#include <stdint.h>
#include <stdlib.h>
#include "cuda/cuda_mem.h"

int cm_carried(const WpPlanDesc *P, const WpBufDesc *b) {
    if (b->kind != WP_BUF_W) return P->grad_precision;
    return P->weight_wire_fp32 ? WP_FP32 : P->precision;
}

int cm_working(const WpBufDesc *b) {
    return b->master ? b->copy_dtype : b->dtype;
}

/* Reserves bytes at the end of the pool (aligned) and returns their offset. */
static size_t take(CudaMemPlan *m, size_t *part, size_t bytes) {
    size_t off = m->total;
    size_t room = (bytes + CM_ALIGN - 1) / CM_ALIGN * CM_ALIGN;
    if (room == 0) room = CM_ALIGN;
    m->total += room;
    *part += room;
    return off;
}

int cm_plan(CudaMemPlan *m, const WpPlanDesc *P, int rank, const WpChunk *chunks, int recompute) {
    const WpRankDesc *me = &P->ranks[rank];
    const WpConfig *c = &P->model;
    *m = (CudaMemPlan){ 0 };
    size_t nb = (size_t)me->nbufs + 1;
    m->buf = calloc(nb, sizeof *m->buf);
    m->copy = calloc(nb, sizeof *m->copy);
    m->adam_m = calloc(nb, sizeof *m->adam_m);
    m->adam_v = calloc(nb, sizeof *m->adam_v);
    if (!m->buf || !m->copy || !m->adam_m || !m->adam_v) { cm_free(m); return -1; }

    size_t stash = 0, keep = 0;
    for (int k = 0; k < P->nchunks; k++) {
        if (chunks[k].nparams > m->max_params) m->max_params = chunks[k].nparams;
        if (wp_grad_stage_floats(c, &chunks[k]) > m->stage_floats) m->stage_floats = wp_grad_stage_floats(c, &chunks[k]);
        size_t s = wp_stash_bytes(c, &chunks[k], recompute, WP_BF16);
        if (s > stash) stash = s;
        if (me->max_keeps > 0) {
            size_t kb = wp_keep_bytes(c, &chunks[k], recompute, WP_BF16);
            if (kb > keep) keep = kb;
        }
    }
    int bf16_grads = 0;
    for (int b = 0; b < me->nbufs; b++) {
        const WpBufDesc *d = &me->bufs[b];
        m->buf[b] = take(m, &m->b_buffers, d->floats * wp_dtype_bytes((WpDtype)d->dtype));
        m->copy[b] = m->adam_m[b] = m->adam_v[b] = SIZE_MAX;
        if (d->master && d->copy_dtype != d->dtype)
            m->copy[b] = take(m, &m->b_buffers, d->floats * wp_dtype_bytes((WpDtype)d->copy_dtype));
        if (d->kind == WP_BUF_D && d->dtype == WP_BF16) bf16_grads = 1;
    }
    for (int b = 0; b < me->nbufs; b++) {
        const WpBufDesc *d = &me->bufs[b];
        if (!d->master) continue;
        m->adam_m[b] = take(m, &m->b_masters, d->floats * sizeof(float));
        m->adam_v[b] = take(m, &m->b_masters, d->floats * sizeof(float));
    }
    /* the masters' fp32 weights count as masters, not as working buffers */
    for (int b = 0; b < me->nbufs; b++) {
        const WpBufDesc *d = &me->bufs[b];
        if (!d->master) continue;
        size_t w = (d->floats * sizeof(float) + CM_ALIGN - 1) / CM_ALIGN * CM_ALIGN;
        if (w == 0) w = CM_ALIGN;
        m->b_buffers -= w;
        m->b_masters += w;
    }

    size_t T = (size_t)c->mbs * c->seq;
    m->act_bytes = T * (size_t)c->hidden * 2;
    m->nacts = me->max_acts;
    m->stash_bytes = stash;
    m->nstashes = me->max_stashes;
    m->act_bytes = (m->act_bytes + CM_ALIGN - 1) / CM_ALIGN * CM_ALIGN;
    m->stash_bytes = (m->stash_bytes + CM_ALIGN - 1) / CM_ALIGN * CM_ALIGN;
    m->acts = take(m, &m->b_acts, m->act_bytes * (size_t)m->nacts);
    m->stashes_host = recompute == WP_RECOMPUTE_OFFLOAD;
    m->stashes = m->stashes_host ? SIZE_MAX : take(m, &m->b_acts, m->stash_bytes * (size_t)m->nstashes);
    m->nkeeps = me->max_keeps;
    m->keep_bytes = (keep + CM_ALIGN - 1) / CM_ALIGN * CM_ALIGN;
    m->keeps = m->nkeeps ? take(m, &m->b_acts, m->keep_bytes * (size_t)m->nkeeps) : SIZE_MAX;

    m->gstage = bf16_grads ? take(m, &m->b_staging, m->stage_floats * sizeof(float)) : SIZE_MAX;
    /* transfers in another format than their buffers': what wpgen counted for the buffers that move so */
    m->xfer_bytes = me->xfer_bytes;
    m->xfer = take(m, &m->b_staging, me->xfer_bytes);
    m->ntok = P->total_mbs < CM_TOKEN_RING ? P->total_mbs : CM_TOKEN_RING;
    if (m->ntok < 1) m->ntok = 1;
    m->tokens = take(m, &m->b_staging, (size_t)m->ntok * T * sizeof(int));
    m->targets = take(m, &m->b_staging, (size_t)m->ntok * T * sizeof(int));
    m->loss = take(m, &m->b_staging, sizeof(double));
    m->sumsq = take(m, &m->b_staging, sizeof(double));
    return 0;
}

void cm_free(CudaMemPlan *m) {
    free(m->buf);
    free(m->copy);
    free(m->adam_m);
    free(m->adam_v);
    m->buf = m->copy = m->adam_m = m->adam_v = NULL;
}
