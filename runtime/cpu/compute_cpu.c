/* The CPU compute backend's side of common/compute.h: buffers as host fp32 arrays, masters copied
 * as they are, AdamW through cpu/adamw.c. Its host threads: threads.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/compute_cpu.h"
#include "cpu/adamw.h"
#include "common/hostmem.h"

/* MPI moves large messages only inside MPI calls: the model calls this between layers. */
static void progress_comm(void *comm) {
    comm_progress(comm);
}

/* What the ranks the plan puts on this rank's node will allocate in host memory, from the plan
 * (the same sizes compute_setup allocates below and train.c's init_masters reads into), checked
 * against the machine's available memory before anything is allocated (common/hostmem.h). */
static void check_host_memory(WpRank *R) {
    const WpPlanDesc *P = R->plan;
    int maxl = 1, here = 0;
    size_t maxp = 1, model = 0;
    for (int c = 0; c < P->nchunks; c++) {
        if (P->chunks[c].nlayers > maxl) maxl = P->chunks[c].nlayers;
        if (R->chunks[c].nparams > maxp) maxp = R->chunks[c].nparams;
        model += R->chunks[c].nparams;
    }
    int bf16 = P->precision == WP_BF16 || P->grad_precision == WP_BF16;
    double bufs = 0, moments = 0, work = 0, init = 0;
    for (int r = 0; r < P->nranks; r++) {
        const WpRankDesc *d = &P->ranks[r];
        if (d->node != R->me->node) continue;
        here++;
        int owner = 0;
        for (int b = 0; b < d->nbufs; b++) {
            const WpBufDesc *u = &d->bufs[b];
            bufs += (double)((u->dtype == WP_BF16 ? (u->floats + 1) / 2 : u->floats) + 1) * sizeof(float);
            if (u->master) { moments += 2.0 * (u->floats + 1) * sizeof(float); owner = 1; }
        }
        work += (double)wp_scratch_bytes(&R->cfg, maxl) + (bf16 ? 2.0 * maxp * sizeof(float) : 0);
        if (R->recompute == WP_RECOMPUTE_OFFLOAD) {   /* wp_scratch_set_offload's staging */
            WpChunk big = wp_chunk_make(&R->cfg, 0, 0, maxl, 1, 1);
            work += (double)wp_workspace_part_floats(&R->cfg, &big, WP_RECOMPUTE_OFFLOAD, WP_WS_OFFLOAD) * sizeof(float);
        }
        if (owner) init += (double)model * sizeof(float);   /* init_masters: the whole model, once */
    }
    char what[320], err[1024], s1[32], s2[32], s3[32], s4[32];
    snprintf(what, sizeof what, "%d rank%s on node %d: buffers %s, AdamW's moments %s, workspaces %s, the initial weights %s",
             here, here == 1 ? "" : "s", R->me->node, wp_size_str(bufs, s1, sizeof s1), wp_size_str(moments, s2, sizeof s2),
             wp_size_str(work, s3, sizeof s3), wp_size_str(init, s4, sizeof s4));
    if (wp_host_mem_check((uint64_t)(bufs + moments + work + init), what, err, sizeof err)) comm_abort(R->comm, 2, "%s", err);
}

void compute_setup(WpRank *R) {
    check_host_memory(R);
    WpCompute *D = rank_calloc(R, 1, sizeof *D, "the compute backend's state");
    R->dev = D;
    int nb = R->me->nbufs, maxl = 1;
    D->buf = rank_calloc(R, (size_t)nb + 1, sizeof *D->buf, "the plan's buffers");
    D->adam_m = rank_calloc(R, (size_t)nb + 1, sizeof *D->adam_m, "the plan's buffers");
    D->adam_v = rank_calloc(R, (size_t)nb + 1, sizeof *D->adam_v, "the plan's buffers");
    for (int b = 0; b < nb; b++) {
        const WpBufDesc *d = &R->me->bufs[b];
        /* a bf16 buffer of n elements takes (n + 1) / 2 floats' room: transfers move it as such */
        size_t room = d->dtype == WP_BF16 ? (d->floats + 1) / 2 : d->floats;
        D->buf[b] = rank_calloc(R, room + 1, sizeof(float), "the plan's buffers");
        if (d->master) {
            D->adam_m[b] = rank_calloc(R, d->floats + 1, sizeof(float), "the plan's buffers");
            D->adam_v[b] = rank_calloc(R, d->floats + 1, sizeof(float), "the plan's buffers");
        }
    }
    for (int c = 0; c < R->plan->nchunks; c++)
        if (R->plan->chunks[c].nlayers > maxl) maxl = R->plan->chunks[c].nlayers;
    size_t maxp = 1;
    for (int c = 0; c < R->plan->nchunks; c++)
        if (R->chunks[c].nparams > maxp) maxp = R->chunks[c].nparams;
    size_t stage = 1;   /* a bf16 gradient's fp32 sums: the largest segment of any chunk's (the plan's) */
    for (int c = 0; c < R->plan->nchunks; c++)
        if (wp_grad_stage_floats(&R->cfg, &R->chunks[c]) > stage) stage = wp_grad_stage_floats(&R->cfg, &R->chunks[c]);
    if (R->plan->precision == WP_BF16 || R->plan->grad_precision == WP_BF16) {
        D->wstage = rank_calloc(R, maxp, sizeof(float), "the bf16 weights' fp32 copy");
        D->gstage = rank_calloc(R, stage, sizeof(float), "the bf16 gradients' fp32 segment");
    }
    size_t T = (size_t)R->cfg.mbs * R->cfg.seq;
    D->tokens = rank_realloc(R, NULL, T * sizeof(int), "a micro-batch's tokens");
    D->targets = rank_realloc(R, NULL, T * sizeof(int), "a micro-batch's tokens");
    D->scratch = wp_scratch_new(&R->cfg, maxl);
    if (!D->scratch) comm_abort(R->comm, 1, "out of memory for the model's workspace");
    wp_scratch_set_progress(D->scratch, progress_comm, R->comm);
    if (wp_scratch_set_precision(D->scratch, (WpDtype)R->plan->precision))
        comm_abort(R->comm, 1, "out of memory for the model's workspace in %s", wp_dtype_name((WpDtype)R->plan->precision));
    if (R->recompute == WP_RECOMPUTE_OFFLOAD && wp_scratch_set_offload(D->scratch))
        comm_abort(R->comm, 1, "out of memory for the offload's staging");
}

void compute_teardown(WpRank *R) {
    WpCompute *D = R->dev;
    if (!D) return;
    /* the plan's host memory of the rank (peak_mem_breakdown.host), as the run used it: on the CPU
     * the pool is the process's memory too, so its peak resident set cannot tell the two apart */
    if (D->hbytes) fprintf(stderr, "train: rank %d: offload's host pool %zu bytes\n", R->rank, D->hbytes);
    for (int b = 0; b < R->me->nbufs; b++) { free(D->buf[b]); free(D->adam_m[b]); free(D->adam_v[b]); }
    for (int i = 0; i < D->nfree; i++) free(D->free[i].p);
    for (int i = 0; i < D->nhfree; i++) free(D->hfree[i].p);
    free(D->hfree);
    free(D->buf); free(D->adam_m); free(D->adam_v);
    free(D->free); free(D->pend);
    free(D->wstage); free(D->gstage);
    free(D->tokens); free(D->targets);
    wp_scratch_free(D->scratch);
    free(D);
    R->dev = NULL;
}

/* The model added the loss into R->loss_sum as it went. */
void compute_step_end(WpRank *R) {
    (void)R;
}

void compute_sync(WpRank *R) {   /* the CPU computes as it is called */
    (void)R;
}

static float *master_array(WpRank *R, int buf, int what) {
    WpCompute *D = R->dev;
    return what == WP_MASTER_M ? D->adam_m[buf] : what == WP_MASTER_V ? D->adam_v[buf] : D->buf[buf];
}

void compute_master_set(WpRank *R, int buf, int what, const float *host, size_t n) {
    memcpy(master_array(R, buf, what), host, n * sizeof(float));
}

void compute_master_get(WpRank *R, int buf, int what, float *host, size_t n) {
    memcpy(host, master_array(R, buf, what), n * sizeof(float));
}

void *compute_host_alloc(WpRank *R, size_t bytes) {
    (void)R;
    return malloc(bytes);
}

void compute_host_free(WpRank *R, void *p) {
    (void)R;
    free(p);
}

double compute_sumsq(WpRank *R, int buf, size_t n) {
    return adamw_sumsq(R->dev->buf[buf], n);
}

void compute_adamw(WpRank *R, const WpAdamW *opt, int master, int grad, size_t off, size_t n, float lr,
                   float wd, float grad_scale, long t) {
    WpCompute *D = R->dev;
    adamw_update(opt, D->buf[master] + off, D->buf[grad] + off, D->adam_m[master] + off, D->adam_v[master] + off, n,
                 lr, wd, grad_scale, t);
}
