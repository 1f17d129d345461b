/* The backend-neutral helpers of a rank: checked allocation, the sizes of chunks and shards, and
 * the one step operation that computes nothing (OPT: the update is recorded here and applied by
 * train.c once the global gradient norm is known). */
#include <stdlib.h>
#include "train/rank.h"

void *rank_realloc(WpRank *R, void *p, size_t bytes, const char *what) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) comm_abort(R->comm, 1, "out of memory: %zu bytes for %s", bytes, what);
    return q;
}

void *rank_calloc(WpRank *R, size_t n, size_t size, const char *what) {
    void *q = calloc(n ? n : 1, size);
    if (!q) comm_abort(R->comm, 1, "out of memory: %zu x %zu bytes for %s", n, size, what);
    return q;
}

size_t chunk_floats(const WpRank *R, int chunk, int shard, int nshards) {
    size_t n = R->chunks[chunk].nparams;
    return nshards > 1 ? comm_shard_len(n, nshards, shard) : n;
}

void *rank_grow(WpRank *R, void *p, int n, int *cap, int first, size_t elem, const char *what) {
    if (n < *cap) return p;
    *cap = *cap ? 2 * *cap : first;
    return rank_realloc(R, p, (size_t)*cap * elem, what);
}

void wp_opt(WpRank *R, int chunk, int master, int grad) {
    R->opts = rank_grow(R, R->opts, R->nopts, &R->capopts, 8, sizeof *R->opts, "updates");
    R->opts[R->nopts++] = (PendingOpt){ chunk, master, grad };
}
