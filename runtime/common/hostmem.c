/* Host memory available to this process (hostmem.h). MemAvailable is the kernel's estimate of
 * what can be allocated without swapping; a container's or a Slurm job's cgroup limit is often
 * far lower, so the room left under it counts too: the smaller of the two. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/hostmem.h"
#include "common/settings.h"
#include "common/errmsg.h"

/* The first unsigned number in file path; "max" is none. 0, or -1. */
static int read_u64(const char *path, uint64_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    unsigned long long x;
    int ok = fscanf(f, "%llu", &x) == 1;
    fclose(f);
    if (!ok) return -1;
    *out = (uint64_t)x;
    return 0;
}

static int meminfo_available(uint64_t *bytes) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    int rc = -1;
    while (rc && fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) { *bytes = (uint64_t)kb * 1024; rc = 0; }
    }
    fclose(f);
    return rc;
}

/* The room left under the memory limit of this process's cgroup, as seen from its mount (the
 * limit of the group and of each group above it, v2; of the group, v1). dir: the group's folder.
 * 0, or -1 when there is no limit to be found. */
static int cgroup_room(uint64_t *room, char *dir, size_t dirlen) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return -1;
    char line[4096], v2[4096] = "", v1[4096] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "0::", 3)) snprintf(v2, sizeof v2, "%s", line + 3);
        char *c = strchr(line, ':'), *d = c ? strchr(c + 1, ':') : NULL;
        if (c && d && d - c - 1 == 6 && !strncmp(c + 1, "memory", 6)) snprintf(v1, sizeof v1, "%s", d + 1);
    }
    fclose(f);
    int found = 0;
    uint64_t best = UINT64_MAX;
    /* v1: the group's folder under the mount; inside a container the mount's root may be the
     * group itself, so the path is tried with its leading parts dropped, down to the root */
    for (const char *p = v1[0] ? v1 : NULL; p && !found;) {
        char a[4400], b[4400];
        uint64_t lim, use;
        snprintf(a, sizeof a, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", p);
        snprintf(b, sizeof b, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", p);
        if (read_u64(a, &lim) == 0 && read_u64(b, &use) == 0) {
            found = 1;
            if (lim < ((uint64_t)1 << 60)) {   /* "no limit" is a number near 2^63 */
                best = lim > use ? lim - use : 0;
                snprintf(dir, dirlen, "/sys/fs/cgroup/memory%s", p);
            }
        }
        const char *next = *p ? strchr(p + 1, '/') : NULL;
        p = next ? next : (*p ? "" : NULL);
    }
    /* v2: every group from this one up to the mount's root; the tightest room counts */
    for (size_t n = strlen(v2); v2[0] && !found;) {
        char path[4400], a[4500], b[4500];
        snprintf(path, sizeof path, "/sys/fs/cgroup%.*s", (int)n, v2);
        uint64_t lim, use;
        snprintf(a, sizeof a, "%s/memory.max", path);
        snprintf(b, sizeof b, "%s/memory.current", path);
        if (read_u64(a, &lim) == 0 && read_u64(b, &use) == 0 && (lim > use ? lim - use : 0) < best) {
            best = lim > use ? lim - use : 0;
            snprintf(dir, dirlen, "%s", path);
        }
        if (n <= 1) break;
        while (n > 0 && v2[n - 1] != '/') n--;
        if (n > 0) n--;   /* the parent, without its trailing slash ("" is the root) */
        if (n == 0) n = 1;
    }
    if (best == UINT64_MAX) return -1;
    *room = best;
    return 0;
}

int wp_host_mem_available(uint64_t *bytes, char *where, size_t wherelen) {
    uint64_t avail = 0, room;
    char dir[4500];
    /* a test hook: a machine of that many bytes (a bad value is refused by wp_host_mem_check) */
    const WpSetting *hook = wp_setting_find(wp_runtime_settings, wp_runtime_nsettings, "WP_MEM_AVAILABLE");
    double v;
    int given;
    char e[256];
    if (wp_setting_number(hook, &v, &given, e, sizeof e) == 0 && given) {
        *bytes = (uint64_t)v;
        snprintf(where, wherelen, "WP_MEM_AVAILABLE, a test hook");
        return 0;
    }
    int have = meminfo_available(&avail) == 0;
    snprintf(where, wherelen, "MemAvailable in /proc/meminfo");
    if (cgroup_room(&room, dir, sizeof dir) == 0 && (!have || room < avail)) {
        avail = room;
        have = 1;
        snprintf(where, wherelen, "the room left under the memory limit of the cgroup %s", dir);
    }
    if (!have) return -1;
    *bytes = avail;
    return 0;
}

const char *wp_size_str(double bytes, char *buf, size_t len) {
    if (bytes >= 1e9) snprintf(buf, len, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, len, "%.1f MB", bytes / 1e6);
    else if (bytes >= 1e3) snprintf(buf, len, "%.1f kB", bytes / 1e3);
    else snprintf(buf, len, "%.0f bytes", bytes);
    return buf;
}

int wp_host_mem_check(uint64_t need, const char *what, char *err, size_t errlen) {
    double skip, hook;
    if (wp_setting_number(wp_setting_find(wp_runtime_settings, wp_runtime_nsettings, WP_HOSTMEM_SKIP_ENV), &skip, NULL, err, errlen) ||
        wp_setting_number(wp_setting_find(wp_runtime_settings, wp_runtime_nsettings, "WP_MEM_AVAILABLE"), &hook, NULL, err, errlen))
        return -1;
    if (skip) return 0;
    uint64_t avail;
    char where[4600];
    if (wp_host_mem_available(&avail, where, sizeof where) || need <= avail) return 0;
    char n[32], a[32];
    return errmsg(err, errlen, "this run needs %s of memory (%s) and %s are available (%s): refusing to start (%s=1 "
                  "starts it anyway)", wp_size_str((double)need, n, sizeof n), what, wp_size_str((double)avail, a, sizeof a),
                  where, WP_HOSTMEM_SKIP_ENV);
}
