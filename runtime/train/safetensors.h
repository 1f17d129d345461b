/* safetensors files: write (atomically: temporary file, fsync, rename) and read (mmap).
 * Format: 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape
 * and byte range, then the raw data. */
#ifndef WP_SAFETENSORS_H
#define WP_SAFETENSORS_H

#include <stddef.h>

typedef struct WpStWriter WpStWriter;
typedef struct WpStFile WpStFile;

/* Nothing touches path until wp_st_commit succeeds. dtype: "F32", "I32", "I64", "BF16", "F64". */
WpStWriter *wp_st_writer_new(void);
int wp_st_add(WpStWriter *w, const char *name, const char *dtype, const size_t *shape, int ndim,
              const void *data, size_t bytes);   /* data is copied; 0 or -1 */
/* A tensor whose bytes are asked for only while commit writes them, in the order added: src
 * returns them (exactly `bytes`, valid until its next call) or NULL with one line in err. So a
 * file larger than memory is written one tensor at a time (wpgen export's shards). */
typedef const void *(*WpStSource)(void *ud, const char *name, size_t bytes, char *err, size_t errlen);
int wp_st_add_source(WpStWriter *w, const char *name, const char *dtype, const size_t *shape, int ndim,
                     size_t bytes, WpStSource src, void *ud);   /* 0 or -1 */
/* The same without the copy (a checkpoint's shard: its bytes once in memory, not twice): data
 * must stay unchanged until wp_st_commit or wp_st_writer_free. */
int wp_st_add_borrowed(WpStWriter *w, const char *name, const char *dtype, const size_t *shape, int ndim,
                       const void *data, size_t bytes);
void wp_st_set_metadata(WpStWriter *w, const char *key, const char *value);   /* __metadata__ */
int wp_st_commit(WpStWriter *w, const char *path, char *err, size_t errlen);  /* 0 or -1; frees w */
void wp_st_writer_free(WpStWriter *w);

WpStFile *wp_st_open(const char *path, char *err, size_t errlen);
/* The same over a file's bytes in memory (not copied: they must outlive f); name for messages. */
WpStFile *wp_st_open_memory(const char *name, const void *data, size_t size, char *err, size_t errlen);
/* Returns the tensor's data or NULL if absent; fills dtype/shape/ndim if not NULL. */
const void *wp_st_get(const WpStFile *f, const char *name, const char **dtype, size_t *shape,
                      int *ndim, size_t *bytes);
const char *wp_st_metadata(const WpStFile *f, const char *key);
int wp_st_count(const WpStFile *f);
const char *wp_st_name(const WpStFile *f, int i);
void wp_st_close(WpStFile *f);

#endif
