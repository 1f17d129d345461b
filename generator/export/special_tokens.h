/* The special-token ids an export carries: special_tokens.c. */
#ifndef WPGEN_SPECIAL_TOKENS_H
#define WPGEN_SPECIAL_TOKENS_H
#include <stddef.h>
#include <jansson.h>

/* An id each (an integer, or for eos a list of them as Llama 3's configs have), NULL where
 * unknown; from: the file it came from. */
typedef struct {
    json_t *bos, *eos;
    const char *bos_from, *eos_from;
} SpecialIds;

/* Finds them for the checkpoint in ckdir, whose config.json is cfg and vocabulary vocab.
 * 0, or -1 with err (an id outside [0, vocab), a file that is not JSON): bad input. */
int special_ids(const char *ckdir, const json_t *cfg, long vocab, SpecialIds *s, char *err, size_t errlen);
void special_ids_free(SpecialIds *s);
#endif
