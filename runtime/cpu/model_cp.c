/* Ring attention in the CPU model: context parallelism's attention of one layer, computed by the C
 * members of a group together (model_cp.h says how a member runs the chunks). The scratch's
 * attention hook (model.h) calls it with the member's rotated qkv, [G * n, width] with n = S/C
 * tokens of each of the G sequences, in the balanced layout: its half 0 is sequence chunk
 * `member`, its half 1 chunk 2C-1-member, L = S/2C tokens each (common/cp_layout.h).
 *
 * Forward. The member packs its K and V ([G * n, 2 kv_heads hd]: one message for every sequence)
 * and the ring runs C steps: at step t it holds the K/V of member cp_ring_source(C, me, t) (its
 * own at step 0), passes it on to member + 1 while it computes (comm_ring_shift, posted before
 * the compute, completed after: C - 1 shifts), and computes each of its query halves against each
 * of that member's K/V halves the causal mask leaves (cp_layout_block: the diagonal causal within,
 * an earlier chunk whole, a later one skipped), each block's normalised output and log-sum-exp
 * merged into the running result (attention_block_merge: exact, in any order). The merged att and
 * lse are what attention_forward would give these queries, up to the order of the sums, and are
 * stashed as its are.
 *
 * Backward. The K/V go round again, this time with the dK/dV accumulator of each block beside it:
 * at step t the member adds its queries' share of the gradient of the block it holds (flash
 * attention's form from the final att and lse, attention_block_backward), dQ into its own rows,
 * dK/dV into the block's accumulator, and passes both on. After the last step the accumulator it
 * holds belongs to member + 1, so one more shift of the accumulators alone brings every block's
 * home with the sum of all C members' shares: C - 1 shifts of K/V, C of dK/dV.
 *
 * The wait. The communication layer completes what is posted as a whole (comm_wait_turn), so a
 * ring step's wait also completes whatever else the caller had posted; overlapping the ring with a
 * plan's other transfers of the turn is for the train loop's wiring, not done yet.
 *
 * Memory: the ring's K/V and dK/dV, double-buffered, are config.c's WP_WS_KV_RING; the per-block
 * output, lse and kernel work are the ring's own (a block's: L tokens). fp32 only, as the block
 * kernels (attention_block.c). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "cpu/model_cp.h"
#include "cpu/kernels.h"
#include "common/cp_layout.h"
#include "common/errmsg.h"

/* One block of a ring step (ring_blocks): its query and key rows, the row of its lse. */
typedef struct RingBlock { size_t qrow, krow, lrow; int diag; } RingBlock;

struct WpCpRing {
    WpConfig c;          /* the whole model's shape, c.cp = C */
    Comm *comm;
    int group, C, me, G, n, L, nthreads;
    int width, qd, kvw;  /* floats per token of qkv, of att, of a K/V (or dK/dV) block */
    WpScratch *s;
    float *kv[2], *dkv[2];   /* the ring's blocks in flight: [G * n, kvw] each */
    float *bo, *bl;      /* one block's output [L, qd] and lse [heads, L] */
    float *work;         /* attention_block_work_floats(L, L, ...) */
    int *pos;            /* [n] the member's positions */
    RingBlock *blocks;   /* [4 G] one ring step's blocks (ring_blocks) */
};

WpConfig wp_cp_member_config(const WpConfig *c) {
    WpConfig m = *c;
    m.seq = c->seq / wp_cp(c);
    m.cp = 1;
    return m;
}

static void fp32_only(int bf16) {
    if (!bf16) return;
    fprintf(stderr, "context parallelism: the CPU model's ring attention is fp32 only (its bf16 "
            "roundings are to come, docs/architecture.md \"Ring attention's kernels\")\n");
    abort();
}

/* The member's K and V, packed from its qkv rows as the ring sends them. */
static void pack_kv(const WpCpRing *r, float *kv, const float *qkv) {
    for (size_t t = 0; t < (size_t)r->G * r->n; t++)
        memcpy(kv + t * r->kvw, qkv + t * r->width + r->qd, (size_t)r->kvw * sizeof(float));
}

/* Posts one step of the ring round the group. */
static void shift(WpCpRing *r, const float *send, float *recv, const char *label) {
    comm_ring_shift(r->comm, r->group, send, recv, (size_t)r->G * r->n * r->kvw, WP_FP32,
                    &(CommInfo){ -1, label });
    comm_turn_posted(r->comm);
}

/* The blocks a member computes at ring step t, against the K/V block of member src: per sequence
 * g, each of its two chunks (a) against each of src's (b) that is causal (cp_layout_block); the
 * rows of its queries and of the keys in the member's [G * n] rows, and whether the block is on
 * the diagonal (masked). At most 4 per sequence; forward and backward walk the same list. */
static int ring_blocks(const WpCpRing *r, int src, RingBlock *out) {
    int nb = 0;
    for (int g = 0; g < r->G; g++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                CpBlock blk = cp_layout_block(cp_layout_chunk(r->C, r->me, a), cp_layout_chunk(r->C, src, b));
                if (blk == CP_SKIP) continue;
                out[nb++] = (RingBlock){ (size_t)g * r->n + (size_t)a * r->L, (size_t)g * r->n + (size_t)b * r->L,
                                         (size_t)g * r->c.heads * r->n + (size_t)a * r->L, blk == CP_DIAG };
            }
    return nb;
}

static void ring_forward(void *ud, float *att, float *lse, const float *qkv, int bf16) {
    WpCpRing *r = ud;
    fp32_only(bf16);
    const WpConfig *c = &r->c;
    int C = r->C, n = r->n, L = r->L, H = c->heads, cur = 0;
    RingBlock *blocks = r->blocks;
    pack_kv(r, r->kv[0], qkv);
    memset(att, 0, (size_t)r->G * n * r->qd * sizeof(float));
    for (size_t i = 0; i < (size_t)r->G * H * n; i++) lse[i] = -INFINITY;   /* no keys yet */
    for (int t = 0; t < C; t++) {
        if (t < C - 1) shift(r, r->kv[cur], r->kv[cur ^ 1], "ring K/V");
        int nb = ring_blocks(r, cp_ring_source(C, r->me, t), blocks);
        for (int i = 0; i < nb; i++) {
            const RingBlock *k = &blocks[i];
            attention_block_forward(r->bo, r->bl, L, qkv + k->qrow * r->width, r->width,
                                    r->kv[cur] + k->krow * r->kvw, r->kvw, L, L, H, c->kv_heads,
                                    c->head_dim, k->diag, r->work, r->nthreads);
            attention_block_merge(att + k->qrow * r->qd, lse + k->lrow, n, r->bo, r->bl, L, L, H, c->head_dim,
                                  r->nthreads);
        }
        if (t < C - 1) {
            comm_wait_turn(r->comm);
            cur ^= 1;
        }
    }
}

static void ring_backward(void *ud, float *dqkv, const float *datt, const float *att, const float *lse,
                          const float *qkv, int bf16) {
    WpCpRing *r = ud;
    fp32_only(bf16);
    const WpConfig *c = &r->c;
    int C = r->C, n = r->n, L = r->L, H = c->heads, cur = 0;
    RingBlock *blocks = r->blocks;
    size_t rows = (size_t)r->G * n;
    memset(dqkv, 0, rows * r->width * sizeof(float));   /* dQ adds into its columns */
    pack_kv(r, r->kv[0], qkv);
    memset(r->dkv[0], 0, rows * r->kvw * sizeof(float));
    for (int t = 0; t < C; t++) {
        if (t < C - 1) shift(r, r->kv[cur], r->kv[cur ^ 1], "ring K/V");
        int nb = ring_blocks(r, cp_ring_source(C, r->me, t), blocks);
        for (int i = 0; i < nb; i++) {
            const RingBlock *k = &blocks[i];
            attention_block_backward(dqkv + k->qrow * r->width, r->width, r->dkv[cur] + k->krow * r->kvw, r->kvw,
                                     datt + k->qrow * r->qd, att + k->qrow * r->qd, lse + k->lrow, n,
                                     qkv + k->qrow * r->width, r->width, r->kv[cur] + k->krow * r->kvw, r->kvw,
                                     L, L, H, c->kv_heads, c->head_dim, k->diag, r->work, r->nthreads);
        }
        if (C > 1) {   /* the accumulator on to the next holder; after the last step, home */
            shift(r, r->dkv[cur], r->dkv[cur ^ 1], "ring dK/dV");
            comm_wait_turn(r->comm);
            cur ^= 1;
        }
    }
    for (size_t t = 0; t < rows; t++)   /* the member's own K/V's gradient, summed over the group */
        memcpy(dqkv + t * r->width + r->qd, r->dkv[cur] + t * r->kvw, (size_t)r->kvw * sizeof(float));
}

void wp_cp_ring_free(WpCpRing *r) {
    if (!r) return;
    if (r->s) {
        wp_scratch_set_attention(r->s, NULL);
        wp_scratch_set_positions(r->s, NULL, 0);
    }
    free(r->kv[0]);
    free(r->bo);
    free(r->work);
    free(r->pos);
    free(r->blocks);
    free(r);
}

WpCpRing *wp_cp_ring_new(const WpConfig *c, Comm *comm, int g, int member, WpScratch *s, char *err,
                         size_t errlen) {
    int C = wp_cp(c);
    if (cp_layout_check(c->seq, C, err, errlen)) return NULL;
    if (member < 0 || member >= C) {
        errmsg(err, errlen, "context-parallel member %d: expected 0 to %d (%d members)", member, C - 1, C);
        return NULL;
    }
    const WpConfig *sc = wp_scratch_config(s);
    if (sc->seq != c->seq / C || sc->mbs != c->mbs) {
        errmsg(err, errlen, "the scratch holds %d sequences of %d tokens; a member of %d computes %d of %d "
               "(wp_cp_member_config)", sc->mbs, sc->seq, C, c->mbs, c->seq / C);
        return NULL;
    }
    WpCpRing *r = calloc(1, sizeof *r);
    if (!r) { errmsg(err, errlen, "out of memory for the ring"); return NULL; }
    r->c = *c;
    r->comm = comm;
    r->group = g;
    r->C = C;
    r->me = member;
    r->G = c->mbs;
    r->n = c->seq / C;
    r->L = cp_chunk_len(c->seq, C);
    r->nthreads = omp_get_max_threads();
    r->qd = c->heads * c->head_dim;
    r->kvw = 2 * c->kv_heads * c->head_dim;
    r->width = r->qd + r->kvw;
    /* K/V and dK/dV double-buffered: config.c's WP_WS_KV_RING, in one allocation */
    size_t blk = (size_t)r->G * r->n * r->kvw;
    r->kv[0] = malloc(4 * blk * sizeof(float));
    r->bo = malloc(((size_t)r->L * r->qd + (size_t)c->heads * r->L) * sizeof(float));
    r->work = malloc(attention_block_work_floats(r->L, r->L, c->heads, c->kv_heads, c->head_dim, r->nthreads) * sizeof(float));
    r->pos = malloc((size_t)r->n * sizeof *r->pos);
    r->blocks = malloc(4 * (size_t)r->G * sizeof *r->blocks);
    if (!r->kv[0] || !r->bo || !r->work || !r->pos || !r->blocks) {
        wp_cp_ring_free(r);
        errmsg(err, errlen, "out of memory for the ring");
        return NULL;
    }
    r->kv[1] = r->kv[0] + blk;
    r->dkv[0] = r->kv[1] + blk;
    r->dkv[1] = r->dkv[0] + blk;
    r->bl = r->bo + (size_t)r->L * r->qd;
    cp_layout_positions(r->pos, c->seq, C, member);
    if (wp_scratch_set_positions(s, r->pos, c->seq)) {
        wp_cp_ring_free(r);
        errmsg(err, errlen, "out of memory for the RoPE tables");
        return NULL;
    }
    r->s = s;
    wp_scratch_set_attention(s, &(WpAttentionHook){ ring_forward, ring_backward, r });
    return r;
}
