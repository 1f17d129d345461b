/* The special-token ids wpgen export writes into config.json (bos_token_id, eos_token_id) and
 * generation_config.json, so that generate() knows where a text starts and ends. Each id is the
 * first of:
 *   1. the checkpoint's config.json's key (the model config the run was given, when it kept them);
 *   2. tokenizer_config.json beside the checkpoint: its bos_token / eos_token (a string, or an
 *      object with "content"), looked up in tokenizer.json's added_tokens;
 *   3. tokenizer.json beside the checkpoint: its added tokens marked special, by the names
 *      tokenizers give them (NAMES below, in order).
 * An id the model cannot emit (outside its vocabulary) is refused: generation would index past
 * the head (the config's ids are checked where any config.json is read: runtime/common/modelcfg.c). */
#include <stdio.h>
#include <string.h>
#include "export/special_tokens.h"
#include "common/errmsg.h"

enum { PATHLEN = 4096 };

/* The names of the start and end tokens in the tokenizers people train and download. */
static const char *const BOS_NAMES[] = { "<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>", "[BOS]", NULL };
static const char *const EOS_NAMES[] = { "<|end_of_text|>", "</s>", "<eos>", "<|endoftext|>", "[EOS]", NULL };

/* v: an integer id in [0, vocab). */
static int valid_id(const json_t *v, long vocab) {
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < vocab;
}

/* dir/name as JSON; NULL when absent; -1 in *bad (and err) when there but not JSON. */
static json_t *load_beside(const char *dir, const char *name, int *bad, char *err, size_t errlen) {
    char path[PATHLEN];
    FILE *f;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path || !(f = fopen(path, "rb"))) return NULL;
    fclose(f);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        *bad = errmsg(err, errlen, "%s: line %d: %s (a tokenizer file beside the checkpoint; the export reads its "
                      "special tokens)", path, je.line, json_is_object(o) || !je.text[0] ? "expected a JSON object" : je.text);
    }
    return json_is_object(o) ? o : NULL;
}

/* The id of the added token named name in tokenizer.json (special ones only when special). */
static json_t *added_id(const json_t *tok, const char *name, int special) {
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(tok, "added_tokens"), i, t) {
        const char *c = json_string_value(json_object_get(t, "content"));
        if (c && !strcmp(c, name) && json_is_integer(json_object_get(t, "id")) &&
            (!special || json_is_true(json_object_get(t, "special"))))
            return json_incref(json_object_get(t, "id"));
    }
    return NULL;
}

/* One id: key in cfg (which), else tokenizer_config.json's key_name, else a special token of names. */
static int find(const json_t *cfg, const json_t *tcfg, const json_t *tok, const char *key, const char *key_name,
                const char *const *names, long vocab, json_t **id, const char **from, char *err, size_t errlen) {
    const json_t *v = json_object_get(cfg, key);
    if (v && !json_is_null(v)) {   /* checked when the checkpoint's model was read (modelcfg.c) */
        *id = json_incref((json_t *)v), *from = "config.json";
        return 0;
    }
    if (!tok) return 0;
    const json_t *n = json_object_get(tcfg, key_name);
    if (json_is_object(n)) n = json_object_get(n, "content");
    const char *name = json_string_value(n);
    if (name) *id = added_id(tok, name, 0), *from = "tokenizer_config.json";
    for (int k = 0; !*id && names[k]; k++) *id = added_id(tok, names[k], 1), *from = "tokenizer.json", name = names[k];
    if (*id && !valid_id(*id, vocab))
        return errmsg(err, errlen, "%s: %s \"%s\" is token %lld, outside the model's vocabulary [0, %ld] (vocab_size %ld)",
                      *from, key_name, name, (long long)json_integer_value(*id), vocab - 1, vocab);
    if (!*id) *from = NULL;
    return 0;
}

int special_ids(const char *ckdir, const json_t *cfg, long vocab, SpecialIds *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    int bad = 0;
    json_t *tok = load_beside(ckdir, "tokenizer.json", &bad, err, errlen);
    json_t *tcfg = bad ? NULL : load_beside(ckdir, "tokenizer_config.json", &bad, err, errlen);
    if (!bad) bad = find(cfg, tcfg, tok, "bos_token_id", "bos_token", BOS_NAMES, vocab, &s->bos, &s->bos_from, err, errlen);
    if (!bad) bad = find(cfg, tcfg, tok, "eos_token_id", "eos_token", EOS_NAMES, vocab, &s->eos, &s->eos_from, err, errlen);
    json_decref(tok);
    json_decref(tcfg);
    if (bad) special_ids_free(s);
    return bad ? -1 : 0;
}

void special_ids_free(SpecialIds *s) {
    json_decref(s->bos);
    json_decref(s->eos);
    s->bos = s->eos = NULL;
}
