/* The NCCL layer's host-side bookkeeping (nccl_book.h): pending operations by batch, their states
 * and timeouts, the group table, and how operations are named in messages. Plain C. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl/nccl_book.h"

/* The layer's names of comm.h's kinds: this file is the NCCL layer's, as comm_mpi.c is MPI's. */
const char *const comm_kind_names[COMM__NKINDS] = {
    "SEND", "RECV", "BCAST", "REDUCE", "ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER", "UTIL",
};

void nb_init(NcclBook *b, int rank, int size, double timeout) {
    memset(b, 0, sizeof *b);
    b->rank = rank;
    b->size = size;
    b->timeout = timeout;
    b->open = -1;
}

void nb_free(NcclBook *b) {
    for (int g = 0; g < b->ngroups; g++) free(b->groups[g].ranks);
    free(b->groups);
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
    *op = (NbOp){ .kind = kind, .turn = info ? info->turn : -1, .peer = peer, .group = group, .bytes = bytes,
                  .t_post = now, .batch = b->open };
    if (info && info->label) snprintf(op->label, sizeof op->label, "%s", info->label);
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
            CommEvent e = { (CommKind)op->kind, op->turn, op->label, op->peer, op->group, op->bytes, op->t_post, t->t_done };
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

int nb_group_add(NcclBook *b, const int *ranks, int n, char *err, size_t errlen) {
    int index = b->ngroups;
    if (n < 1 || n > b->size) {
        snprintf(err, errlen, "group %d: %d members, expected 1 to %d", index, n, b->size);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= b->size) {
            snprintf(err, errlen, "group %d: member %d is rank %d, outside the world of %d", index, i, ranks[i], b->size);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) {
                snprintf(err, errlen, "group %d: rank %d appears twice", index, ranks[i]);
                return -1;
            }
    }
    if (b->ngroups == b->capgroups) {
        int cap = b->capgroups ? 2 * b->capgroups : 8;
        NbGroup *t = realloc(b->groups, (size_t)cap * sizeof *t);
        if (!t) { snprintf(err, errlen, "out of memory for group %d", index); return -1; }
        b->groups = t;
        b->capgroups = cap;
    }
    NbGroup *gr = &b->groups[index];
    gr->ranks = malloc((size_t)n * sizeof *gr->ranks);
    if (!gr->ranks) { snprintf(err, errlen, "out of memory for group %d", index); return -1; }
    memcpy(gr->ranks, ranks, (size_t)n * sizeof *ranks);
    gr->n = n;
    gr->me = -1;
    for (int i = 0; i < n; i++)
        if (ranks[i] == b->rank) gr->me = i;
    b->ngroups++;
    return index;
}

int nb_group_index(const NcclBook *b, int g, int root) {
    if (g < 0 || g >= b->ngroups) return -1;
    for (int i = 0; i < b->groups[g].n; i++)
        if (b->groups[g].ranks[i] == root) return i;
    return -1;
}

const char *nb_group_desc(const NcclBook *b, int g, char *buf, size_t len) {
    const NbGroup *gr = &b->groups[g];
    int k = snprintf(buf, len, "group %d (ranks ", g);
    for (int i = 0; i < gr->n && k >= 0 && (size_t)k < len; i++) {
        if (i == 8 && gr->n > 9) { k += snprintf(buf + k, len - (size_t)k, ",...,%d", gr->ranks[gr->n - 1]); break; }
        k += snprintf(buf + k, len - (size_t)k, "%s%d", i ? "," : "", gr->ranks[i]);
    }
    if (k >= 0 && (size_t)k < len) snprintf(buf + k, len - (size_t)k, ")");
    return buf;
}

const char *nb_op_desc(const NcclBook *b, const NbOp *op, char *buf, size_t len) {
    char gbuf[128] = "", label[64] = "", peer[32] = "", turn[32] = "outside the step";
    if (op->label[0]) snprintf(label, sizeof label, " \"%s\"", op->label);
    const char *dir = op->kind == COMM_SEND ? " to" : op->kind == COMM_RECV ? " from"
                    : op->kind == COMM_BCAST ? " from root" : op->kind == COMM_REDUCE ? " to root" : " with";
    if (op->peer >= 0) snprintf(peer, sizeof peer, "%s rank %d", dir, op->peer);
    if (op->group >= 0 && op->group < b->ngroups) nb_group_desc(b, op->group, gbuf, sizeof gbuf);
    if (op->turn >= 0) snprintf(turn, sizeof turn, "turn %d", op->turn);
    snprintf(buf, len, "%s%s%s%s%s in %s (%zu bytes)", comm_kind_names[op->kind], label, peer,
             gbuf[0] ? " on " : "", gbuf, turn, op->bytes);
    return buf;
}
