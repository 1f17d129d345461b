/* The CUDA compute backend's side of common/compute.h: the GPU a rank uses, its memory reserved
 * once at start-up from the plan (cuda_mem.c) and reported, masters moved in and out, the norm,
 * AdamW through the CUDA model (model_cuda.h) and the loss read once per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/compute_cuda.h"

void compute_process_start(char **argv) {
    (void)argv;   /* nothing read at load time: no re-execution */
}

void compute_process_init(int ranks_on_node, char *about, size_t len) {
    snprintf(about, len, "CUDA backend, bf16 (%d rank%s on this node)", ranks_on_node, ranks_on_node == 1 ? "" : "s");
}

void *cuda_working(WpRank *R, int b) {
    return R->dev->copy[b] ? (void *)R->dev->copy[b] : R->dev->buf[b];
}

static double gib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }

/* The GPU of this rank: the one the communication layer chose (NCCL: its rank in the node's MPI
 * communicator), else its rank on the node as the launcher numbers it (Open MPI's mpirun, Slurm's
 * srun, MPICH) modulo the GPUs it sees (srun --gpus-per-task=1 shows each task one). A machine without one ends the job. */
static int pick_device(WpRank *R) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0)
        comm_abort(R->comm, COMPUTE_NO_DEVICE_STATUS, "no CUDA device: %s (this program was emitted with --backend cuda "
                   "and needs a GPU)", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    int dev = 0;
    if (comm_device_buffers(R->comm)) {
        CUDA_CHECK(cudaGetDevice(&dev));
        return dev;
    }
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");   /* mpirun (Open MPI) */
    if (!local) local = getenv("SLURM_LOCALID");                 /* srun */
    if (!local) local = getenv("MPI_LOCALRANKID");               /* MPICH's Hydra */
    dev = (local ? atoi(local) : R->rank) % ndev;
    CUDA_CHECK(cudaSetDevice(dev));
    return dev;
}

void compute_setup(WpRank *R) {
    WpCompute *D = rank_calloc(R, 1, sizeof *D, "the compute backend's state");
    R->dev = D;
    const WpPlanDesc *P = R->plan;
    if (P->precision != WP_BF16)
        comm_abort(R->comm, 2, "the CUDA backend computes in bf16, and this plan is in %s (emit it with --precision bf16)",
                   wp_dtype_name((WpDtype)P->precision));
    D->device = pick_device(R);
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, D->device));
    snprintf(D->device_name, sizeof D->device_name, "%s", prop.name);
    CUDA_CHECK(cudaStreamCreateWithFlags(&D->stream, cudaStreamNonBlocking));
    D->staged = !comm_device_buffers(R->comm);
    comm_set_stream(R->comm, D->stream);

    /* the model's workspace first (it knows cuBLASLt's), then the pool */
    int maxl = 1;
    for (int c = 0; c < P->nchunks; c++)
        if (P->chunks[c].nlayers > maxl) maxl = P->chunks[c].nlayers;
    if (cm_plan(&D->mem, P, R->rank, R->chunks, R->recompute))
        comm_abort(R->comm, 1, "out of memory planning the device memory");
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    char err[512] = "";
    /* chunks partition the model: one chunk holds both ends only when it is the only one */
    D->model = wc_model_new(&R->cfg, maxl, 1, P->nchunks == 1, R->recompute, D->stream, err, sizeof err);
    if (!D->model)
        comm_abort(R->comm, COMPUTE_NO_DEVICE_STATUS, "device %d (%s): the model's workspace: %s (%.2f GiB free of %.2f)",
                   D->device, D->device_name, err, gib(free_b), gib(total_b));
    size_t ws = wc_model_workspace_bytes(D->model);
    const CudaMemPlan *m = &D->mem;
    if (m->total + ws > free_b || cudaMalloc((void **)&D->pool, m->total) != cudaSuccess)
        comm_abort(R->comm, COMPUTE_NO_DEVICE_STATUS, "the plan does not fit on device %d (%s): this rank needs %.2f GiB "
                   "(buffers %.2f, masters+AdamW %.2f, activations/stashes %.2f, staging %.2f, workspace %.2f), "
                   "%.2f GiB free of %.2f", D->device, D->device_name, gib(m->total + ws), gib(m->b_buffers),
                   gib(m->b_masters), gib(m->b_acts), gib(m->b_staging), gib(ws), gib(free_b), gib(total_b));
    CUDA_CHECK(cudaMemsetAsync(D->pool, 0, m->total, D->stream));

    int nb = R->me->nbufs;
    D->buf = rank_calloc(R, (size_t)nb + 1, sizeof *D->buf, "the plan's buffers");
    D->copy = rank_calloc(R, (size_t)nb + 1, sizeof *D->copy, "the plan's buffers");
    D->adam_m = rank_calloc(R, (size_t)nb + 1, sizeof *D->adam_m, "the plan's buffers");
    D->adam_v = rank_calloc(R, (size_t)nb + 1, sizeof *D->adam_v, "the plan's buffers");
    for (int b = 0; b < nb; b++) {
        D->buf[b] = D->pool + m->buf[b];
        if (m->copy[b] != SIZE_MAX) D->copy[b] = (uint16_t *)(D->pool + m->copy[b]);
        if (m->adam_m[b] != SIZE_MAX) {
            D->adam_m[b] = (float *)(D->pool + m->adam_m[b]);
            D->adam_v[b] = (float *)(D->pool + m->adam_v[b]);
        }
    }
    D->gstage = m->gstage != SIZE_MAX ? (float *)(D->pool + m->gstage) : NULL;
    D->xfer = D->pool + m->xfer;
    D->tokens = (int *)(D->pool + m->tokens);
    D->targets = (int *)(D->pool + m->targets);
    D->loss = (double *)(D->pool + m->loss);
    D->sumsq = (double *)(D->pool + m->sumsq);

    /* pinned host memory: the token rings, the loss and norm, and staging when the comm layer
     * takes host memory */
    size_t T = (size_t)R->cfg.mbs * R->cfg.seq, host_bytes = 0;
    CUDA_CHECK(cudaHostAlloc((void **)&D->h_tokens, (size_t)m->ntok * T * sizeof(int), cudaHostAllocDefault));
    CUDA_CHECK(cudaHostAlloc((void **)&D->h_targets, (size_t)m->ntok * T * sizeof(int), cudaHostAllocDefault));
    CUDA_CHECK(cudaHostAlloc((void **)&D->h_loss, 2 * sizeof(double), cudaHostAllocDefault));
    if (m->stashes_host && cudaHostAlloc((void **)&D->h_stashes, m->stash_bytes * (size_t)m->nstashes + 1, cudaHostAllocDefault) != cudaSuccess)
        comm_abort(R->comm, 2, "offload: %d stashes x %.1f MiB of pinned host memory could not be allocated (%s)", m->nstashes,
                   (double)m->stash_bytes / 1048576.0, cudaGetErrorString(cudaGetLastError()));
    D->h_sumsq = D->h_loss + 1;
    D->tok_copied = rank_calloc(R, (size_t)m->ntok, sizeof *D->tok_copied, "the token ring");
    D->tok_step = rank_calloc(R, (size_t)m->ntok, sizeof *D->tok_step, "the token ring");
    D->tok_mb = rank_calloc(R, (size_t)m->ntok, sizeof *D->tok_mb, "the token ring");
    D->tok_src = rank_calloc(R, (size_t)m->ntok, sizeof *D->tok_src, "the token ring");
    for (int i = 0; i < m->ntok; i++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&D->tok_copied[i], cudaEventDisableTiming));
        D->tok_step[i] = -1;
    }
    if (D->staged) {
        /* a turn moves each buffer at most once and each activation it holds: room for that */
        for (int b = 0; b < nb; b++) host_bytes += R->me->bufs[b].floats * 4 + CM_ALIGN;
        host_bytes += (size_t)m->nacts * m->act_bytes;
        D->host.block = rank_calloc(R, 1, sizeof *D->host.block, "staging");
        D->host.size = rank_calloc(R, 1, sizeof *D->host.size, "staging");
        CUDA_CHECK(cudaHostAlloc((void **)&D->host.block[0], host_bytes, cudaHostAllocDefault));
        D->host.size[0] = host_bytes;
        D->host.nblocks = 1;
    }
    D->used[PART_ACTS] = rank_calloc(R, (size_t)m->nacts + 1, 1, "activation slots");
    D->used[PART_STASHES] = rank_calloc(R, (size_t)m->nstashes + 1, 1, "stash slots");
    D->used[PART_KEEPS] = rank_calloc(R, (size_t)m->nkeeps + 1, 1, "keep slots");
    CUDA_CHECK(cudaStreamSynchronize(D->stream));

    printf("rank %d: device %d (%s): reserved %.3f GiB: buffers %.3f, masters+AdamW %.3f, %d activations x %.1f MiB + "
           "%d stashes x %.1f MiB%s + %d B-to-W keeps x %.1f MiB = %.3f, staging %.3f, workspace %.3f%s; %.2f GiB were free of %.2f\n",
           R->rank, D->device, D->device_name, gib(m->total + ws), gib(m->b_buffers), gib(m->b_masters), m->nacts,
           (double)m->act_bytes / 1048576.0, m->nstashes, (double)m->stash_bytes / 1048576.0, m->stashes_host ? " (in pinned host memory: offload)" : "", m->nkeeps, (double)m->keep_bytes / 1048576.0, gib(m->b_acts),
           gib(m->b_staging), gib(ws), D->staged ? " (+ pinned host staging: transfers through MPI)" : "",
           gib(free_b), gib(total_b));
    if (R->rank == 0 && *wc_model_attention(D->model)) printf("train: %s\n", wc_model_attention(D->model));
    if (D->staged && R->rank == 0)
        printf("train: the CUDA backend on the MPI layer copies every transfer through host memory: for tests of "
               "several ranks on one GPU, not for speed (emit with --comm nccl for that)\n");
    fflush(stdout);
}

void compute_teardown(WpRank *R) {
    WpCompute *D = R->dev;
    if (!D) return;
    if (D->stream) cudaStreamSynchronize(D->stream);
    if (D->model) wc_model_free(D->model);
    for (int i = 0; i < D->ngspans; i++) { cudaEventDestroy(D->gspans[i].t0); cudaEventDestroy(D->gspans[i].t1); }
    free(D->gspans);
    if (D->trace_base) cudaEventDestroy(D->trace_base);
    cudaFree(D->pool);
    cudaFreeHost(D->h_tokens);
    cudaFreeHost(D->h_targets);
    cudaFreeHost(D->h_loss);
    if (D->h_stashes) cudaFreeHost(D->h_stashes);
    for (int i = 0; D->tok_copied && i < D->mem.ntok; i++) cudaEventDestroy(D->tok_copied[i]);
    for (int i = 0; i < D->host.nblocks; i++) cudaFreeHost(D->host.block[i]);
    free(D->host.block); free(D->host.size);
    free(D->tok_copied); free(D->tok_step); free(D->tok_mb); free(D->tok_src);
    free(D->buf); free(D->copy); free(D->adam_m); free(D->adam_v);
    for (int i = 0; i < SLOT_PARTS; i++) free(D->used[i]);
    free(D->after);
    cm_free(&D->mem);
    if (D->stream) cudaStreamDestroy(D->stream);
    free(D);
    R->dev = NULL;
}

static float *master_array(WpRank *R, int buf, int what) {
    WpCompute *D = R->dev;
    return what == WP_MASTER_M ? D->adam_m[buf] : what == WP_MASTER_V ? D->adam_v[buf] : (float *)D->buf[buf];
}

void compute_master_set(WpRank *R, int buf, int what, const float *host, size_t n) {
    WpCompute *D = R->dev;
    CUDA_CHECK(cudaMemcpyAsync(master_array(R, buf, what), host, n * sizeof(float), cudaMemcpyHostToDevice, D->stream));
    if (what == WP_MASTER_W && D->copy[buf]) wc_f32_to_bf16(D->model, D->copy[buf], D->buf[buf], n);
    CUDA_CHECK(cudaStreamSynchronize(D->stream));   /* host is the caller's */
}

void compute_master_get(WpRank *R, int buf, int what, float *host, size_t n) {
    WpCompute *D = R->dev;
    CUDA_CHECK(cudaMemcpyAsync(host, master_array(R, buf, what), n * sizeof(float), cudaMemcpyDeviceToHost, D->stream));
    CUDA_CHECK(cudaStreamSynchronize(D->stream));
}

/* Pinned where the system grants it (a 7B model's shard on an 8-GPU node is about 10 GiB per
 * rank, which a host may refuse to pin): else pageable, which the copy stages through. */
void *compute_host_alloc(WpRank *R, size_t bytes) {
    (void)R;
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess) return p;
    (void)cudaGetLastError();   /* the refusal is not an error of the run's */
    return malloc(bytes);
}

void compute_host_free(WpRank *R, void *p) {
    (void)R;
    if (!p) return;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost) cudaFreeHost(p);
    else { (void)cudaGetLastError(); free(p); }
}

double compute_sumsq(WpRank *R, int buf, size_t n) {
    WpCompute *D = R->dev;
    wc_sumsq(D->model, (const float *)D->buf[buf], n, D->sumsq);
    CUDA_CHECK(cudaMemcpyAsync(D->h_sumsq, D->sumsq, sizeof(double), cudaMemcpyDeviceToHost, D->stream));
    CUDA_CHECK(cudaStreamSynchronize(D->stream));
    return *D->h_sumsq;
}

void compute_adamw(WpRank *R, const WpAdamW *opt, int master, int grad, size_t off, size_t n, float lr, float wd,
                   float grad_scale, long t) {
    WpCompute *D = R->dev;
    wc_adamw(D->model, opt, (float *)D->buf[master] + off, (const float *)D->buf[grad] + off, D->adam_m[master] + off,
             D->adam_v[master] + off, n, lr, wd, grad_scale, t, D->copy[master] ? D->copy[master] + off : NULL);
}

/* The step's loss, summed on the device by the last chunk's forwards: read once, here. */
void compute_step_end(WpRank *R) {
    WpCompute *D = R->dev;
    CUDA_CHECK(cudaMemcpyAsync(D->h_loss, D->loss, sizeof(double), cudaMemcpyDeviceToHost, D->stream));
    CUDA_CHECK(cudaMemsetAsync(D->loss, 0, sizeof(double), D->stream));
    CUDA_CHECK(cudaStreamSynchronize(D->stream));
    CUDA_CHECK(cudaGetLastError());
    R->loss_sum += *D->h_loss;
    cuda_trace_resolve(R);
}

/* The host's spans (AdamW, checkpoints) bracket work the stream runs later: when tracing, the
 * clock is read with the stream idle. */
void compute_sync(WpRank *R) {
    if (R->dev && R->tracing) CUDA_CHECK(cudaStreamSynchronize(R->dev->stream));
}

/* ---- device-timed trace spans ---- */

/* A base event on the idle stream, and the host's clock when it ran. */
static void trace_rebase(WpRank *R) {
    WpCompute *D = R->dev;
    if (!D->trace_base) CUDA_CHECK(cudaEventCreate(&D->trace_base));
    CUDA_CHECK(cudaStreamSynchronize(D->stream));
    CUDA_CHECK(cudaEventRecord(D->trace_base, D->stream));
    CUDA_CHECK(cudaEventSynchronize(D->trace_base));
    D->trace_base_s = comm_now(R->comm);
}

cudaEvent_t cuda_span_start(WpRank *R) {
    WpCompute *D = R->dev;
    if (!R->tracing) return NULL;
    if (!D->trace_base) trace_rebase(R);   /* the run's first span: the stream has run nothing of the step yet */
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventRecord(e, D->stream));
    return e;
}

void cuda_span_end(WpRank *R, cudaEvent_t t0, const char *cat, const char *name) {
    WpCompute *D = R->dev;
    cudaEvent_t t1;
    CUDA_CHECK(cudaEventCreate(&t1));
    CUDA_CHECK(cudaEventRecord(t1, D->stream));
    if (D->ngspans == D->capgspans) {
        D->capgspans = D->capgspans ? 2 * D->capgspans : 256;
        D->gspans = rank_realloc(R, D->gspans, (size_t)D->capgspans * sizeof *D->gspans, "the trace's device spans");
    }
    trace_event(R, cat, name, 0, 0);   /* its times once the stream has run it */
    D->gspans[D->ngspans++] = (struct GpuSpan){ t0, t1, R->nevents - 1 };
}

/* With the stream idle: each span's events as times on the host's clock, from the base; then a
 * new base for the next step's spans. */
void cuda_trace_resolve(WpRank *R) {
    WpCompute *D = R->dev;
    if (!D->ngspans) return;
    for (int i = 0; i < D->ngspans; i++) {
        struct GpuSpan *g = &D->gspans[i];
        float ms0 = 0, ms1 = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms0, D->trace_base, g->t0));
        CUDA_CHECK(cudaEventElapsedTime(&ms1, D->trace_base, g->t1));
        if (R->tracing && (size_t)g->event < R->nevents) {   /* a trace that ran out of memory stopped */
            R->events[g->event].t0 = D->trace_base_s + ms0 * 1e-3;
            R->events[g->event].t1 = D->trace_base_s + ms1 * 1e-3;
        }
        cudaEventDestroy(g->t0);
        cudaEventDestroy(g->t1);
    }
    D->ngspans = 0;
    trace_rebase(R);
}
