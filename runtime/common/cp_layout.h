/* Context parallelism's balanced causal layout: a group of C members shares each sequence of S
 * tokens, cut into 2C equal chunks; member i holds chunks i and 2C-1-i, so that under the causal
 * mask every member does the same attention work (an early chunk with few keys paired with a
 * late one with many). Pure functions of (S, C, member): the planner, the data reader (which
 * tokens a member reads), RoPE (their positions) and ring attention (which blocks to compute,
 * cpu/kernels.h's attention_block_*) all take the layout from here. */
#ifndef WP_CP_LAYOUT_H
#define WP_CP_LAYOUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 if a sequence of S tokens splits over C members (C >= 1, S a positive multiple of 2C); else -1
 * with the reason in err, naming S, C and the nearest valid lengths: the text a command line
 * prefixes with its flag. */
int cp_layout_check(int S, int C, char *err, size_t errlen);

/* Tokens per chunk (S / 2C) and per member (S / C). */
static inline int cp_chunk_len(int S, int C) { return S / (2 * C); }

/* The sequence chunk (0 .. 2C-1) of member's local half 0 (its first S/2C tokens) or 1. */
static inline int cp_layout_chunk(int C, int member, int half) {
    return half ? 2 * C - 1 - member : member;
}

/* pos[0 .. S/C): the sequence position of each of member's tokens in its local order (half 0
 * then half 1), ascending: the RoPE positions, and where its tokens sit in the sequence. */
void cp_layout_positions(int *pos, int S, int C, int member);

/* member's tokens (or targets) of G sequences of S: dst [G * S/C] from src [G * S], each sequence's
 * in member's order (cp_layout_positions): what the member reads of a micro-batch. */
void cp_layout_take(int *dst, const int *src, int G, int S, int C, int member);

/* What queries of chunk qc do with keys and values of chunk kc: */
typedef enum {
    CP_SKIP,   /* kc lies after qc: the causal mask hides it all */
    CP_FULL,   /* kc lies wholly before qc: every key visible */
    CP_DIAG,   /* the same chunk: causal within */
} CpBlock;
static inline CpBlock cp_layout_block(int qc, int kc) {
    return kc == qc ? CP_DIAG : kc < qc ? CP_FULL : CP_SKIP;
}

/* Ring order: at step t (0 .. C-1) member holds the keys and values of member (member - t) mod C
 * (step 0 its own), each member passing what it holds to member + 1. */
static inline int cp_ring_source(int C, int member, int step) {
    return ((member - step) % C + C) % C;
}

#ifdef __cplusplus
}
#endif

#endif
