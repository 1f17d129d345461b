/* The NCCL layer's host-side bookkeeping (nccl_book.h): pending operations by batch, their states
 * and timeouts. Plain C; the groups and the names of operations are every layer's
 * (common/comm_book.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl/nccl_book.h"

void nb_init(NcclBook *b, int rank, int size, double timeout) {
    memset(b, 0, sizeof *b);
    cb_groups_init(&b->groups, rank, size);
    b->timeout = timeout;
    b->open = -1;
}

void nb_free(NcclBook *b) {
    cb_groups_free(&b->groups);
    free(b->ops);
    free(b->batches);
    memset(b, 0, sizeof *b);
    b->open = -1;
}

/* A free batch slot, growing the table. -1: out of memory. */
static int batch_new(NcclBook *b) {
    for (int i = 0; i < b->nbatches; i++)
        if (!b->batches[i].used) return i;
    int n = b->nbatches ? 2 * b->nbatches : 8;
    NbBatch *t = realloc(b->batches, (size_t)n * sizeof *t);
    if (!t) return -1;
    memset(t + b->nbatches, 0, (size_t)(n - b->nbatches) * sizeof *t);
    b->batches = t;
    int i = b->nbatches;
    b->nbatches = n;
    return i;
}

int nb_post(NcclBook *b, CommKind kind, const CommInfo *info, int peer, int group, size_t bytes, double now) {
    if (b->open < 0) {
        int s = batch_new(b);
        if (s < 0) return -1;
        b->batches[s] = (NbBatch){ .used = 1, .state = NB_OPEN, .turn = info ? info->turn : -1, .issuing = 0 };
        b->open = s;
    }
    if (b->nops == b->capops) {
        int n = b->capops ? 2 * b->capops : 64;
        NbOp *t = realloc(b->ops, (size_t)n * sizeof *t);
        if (!t) return -1;
        b->ops = t;
        b->capops = n;
    }
    NbOp *op = &b->ops[b->nops++];
    *op = (NbOp){ cb_op(kind, NULL, info, peer, group, bytes, now), b->open };
    b->batches[b->open].nops++;
    return b->open;
}

int nb_close(NcclBook *b) {
    int s = b->open;
    if (s >= 0) b->batches[s].state = NB_CLOSED;
    b->open = -1;
    return s;
}

void nb_issuing(NcclBook *b, int slot, double now) {
    b->batches[slot].issuing = 1;
    b->batches[slot].t_issue = now;
}

void nb_issued(NcclBook *b, int slot) {
    b->batches[slot].issuing = 0;
}

double nb_age(const NcclBook *b, int slot, double now) {
    const NbBatch *t = &b->batches[slot];
    return now - (t->issuing ? t->t_issue : t->t_start);
}

void nb_waited(NcclBook *b, double now) {
    for (int i = 0; i < b->nbatches; i++)
        if (b->batches[i].used && b->batches[i].state == NB_CLOSED) {
            b->batches[i].state = NB_WAITED;
            b->batches[i].t_wait = now;
        }
}

void nb_started(NcclBook *b, int slot, double now) {
    NbBatch *t = &b->batches[slot];
    if (t->used && t->state == NB_WAITED) {
        t->state = NB_STARTED;
        t->t_start = now;
    }
}

void nb_done(NcclBook *b, int slot, double t_done) {
    NbBatch *t = &b->batches[slot];
    if (!t->used || t->state == NB_OPEN) return;
    t->state = NB_DONE;
    t->t_done = t_done;
}

int nb_first_op(const NcclBook *b, int slot) {
    for (int i = 0; i < b->nops; i++)
        if (b->ops[i].batch == slot) return i;
    return -1;
}

int nb_expired(const NcclBook *b, double now) {
    if (!(b->timeout > 0)) return -1;
    /* in posting order: the first operation of the book belongs to the oldest batch */
    for (int i = 0; i < b->nops; i++) {
        const NbBatch *t = &b->batches[b->ops[i].batch];
        if ((t->issuing || t->state == NB_STARTED) && nb_age(b, b->ops[i].batch, now) > b->timeout) return b->ops[i].batch;
    }
    return -1;
}

int nb_collect(NcclBook *b, CommTraceFn fn, void *ud) {
    int k = 0, reported = 0;
    for (int i = 0; i < b->nops; i++) {
        NbOp *op = &b->ops[i];
        NbBatch *t = &b->batches[op->batch];
        if (t->state != NB_DONE) { b->ops[k++] = *op; continue; }
        if (fn) {
            CommEvent e = cb_op_event(&op->op, t->t_done);
            fn(ud, &e);
        }
        reported++;
        if (--t->nops == 0) t->used = 0;
    }
    b->nops = k;
    return reported;
}

int nb_in_flight(const NcclBook *b) {
    int n = 0;
    for (int i = 0; i < b->nbatches; i++) n += b->batches[i].used;
    return n;
}
