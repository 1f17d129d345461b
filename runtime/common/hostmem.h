/* The host memory a run may take before it allocates (hostmem.c): the trainers compare what their
 * memory plan will allocate with what the machine has available, and refuse at start (exit 2)
 * rather than be killed, or swap, part-way through. */
#ifndef WP_HOSTMEM_H
#define WP_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>

/* The environment variable that skips the check (set to 1): docs/exit-status.md documents it. */
#define WP_HOSTMEM_SKIP_ENV "WP_SKIP_MEM_CHECK"

/* Bytes this process may still allocate: MemAvailable of /proc/meminfo, lowered to the room left
 * under its cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes, less what the group
 * uses) when there is one; WP_MEM_AVAILABLE=BYTES, a test hook, stands for both. where: how the
 * figure was found, for a message. 0, or -1 when none could be read (then nothing is checked). */
int wp_host_mem_available(uint64_t *bytes, char *where, size_t wherelen);

/* 0 when need bytes (what: of what, for the message) fit in what is available, or the check is
 * skipped (WP_SKIP_MEM_CHECK=1) or impossible; else -1 with err saying both figures and how to
 * start anyway. */
int wp_host_mem_check(uint64_t need, const char *what, char *err, size_t errlen);

/* bytes in words for these messages ("51.20 GB", "3.1 MB", "900 bytes"), into buf; returns buf. */
const char *wp_size_str(double bytes, char *buf, size_t len);

#endif
