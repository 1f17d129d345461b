/* The 64-bit hashes of the generator and the runtime, written once: FNV-1a (the plan's hash, the
 * manifests' hash of a file, a run's id, names) and splitmix64 (the seeded streams of the initial
 * weights, the data's permutation, the checkpoint's content names). What they give is recorded
 * (plan hashes in emitted folders, .wpgen-files and .wpgen-export, checkpoints' names, the
 * permutation a resumed run reads), so they never change: a caller that wants another hash adds
 * one here. */
#ifndef WP_HASH64_H
#define WP_HASH64_H

#include <stddef.h>
#include <stdint.h>

#define WP_FNV_OFFSET 0xcbf29ce484222325ULL   /* FNV-1a's offset basis */
#define WP_FNV_PRIME 0x100000001b3ULL

/* FNV-1a of n bytes, continuing from h (WP_FNV_OFFSET to start). */
static inline uint64_t wp_fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * WP_FNV_PRIME;
    return h;
}

/* The same over a string's bytes, up to its NUL. */
static inline uint64_t wp_fnv1a_str(uint64_t h, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * WP_FNV_PRIME;
    return h;
}

/* splitmix64's finalizer: a bijection of 64 bits whose outputs look independent for nearby inputs. */
static inline uint64_t wp_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* splitmix64 of x: the step of its state, then the finalizer. */
static inline uint64_t wp_splitmix64(uint64_t x) { return wp_mix64(x + 0x9e3779b97f4a7c15ULL); }

/* The next output of a splitmix64 generator (a full period of 2^64 whatever the seed). */
static inline uint64_t wp_splitmix64_next(uint64_t *state) { return wp_mix64(*state += 0x9e3779b97f4a7c15ULL); }

#endif
