/* wpgen emit: writes a verified plan out as a directory that builds and runs on its own. The
 * text comes from emit.lua beside this file and its *.tpl files (Penlight's pl.template): the
 * files' layout from the templates, one rank at a time, and each operation's line from the formats
 * emit.lua gives once, rendered in C (emit_ops.c). This file drives them (ranks in parallel, a Lua
 * state per thread), writes what they return and plan.json (emit_data.c), copies the runtime's
 * sources, and makes the whole thing appear at once: everything goes into DIR.tmp-PID, which is
 * renamed over DIR at the end, so a failure leaves DIR as it was; each file and folder is flushed
 * to disk first (common/durable.h), so the emitted folder is on disk when emit returns. Over an
 * earlier emission, the user's files in DIR (a trace, checkpoints) are moved into the new one
 * first: see MANIFEST. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>
#include "emit/emit.h"
#include "util/interrupt.h"
#include "util/settings.h"
#include "emit/backends.h"
#include "common/durable.h"
#include "common/errmsg.h"
#include "emit/emit_data.h"
#include "emit/emit_ops.h"
#include "emit/manifest.h"
#include "emit/outdir.h"
#include "lua/bridge.h"

enum { PATHLEN = 4096 };

/* ---- files and directories ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) ? -1 : 0;
}

/* Removes a tree this emitter made (never follows links out of it). */
static int rm_tree(const char *path) {
    return nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

static int sync_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)ftw;
    return flag == FTW_DP && wp_fsync_dir(path) ? -1 : 0;
}

/* The folders of a tree this emitter made flushed (its files are, as written), so that their
 * names are on the disk before the rename that publishes the tree. */
static int sync_tree(const char *path, char *err, size_t errlen) {
    if (nftw(path, sync_entry, 32, FTW_DEPTH | FTW_PHYS)) return errmsg(err, errlen, "%s: fsync failed: %s", path, strerror(errno));
    return 0;
}

static int join_path(char *out, const char *dir, const char *name, char *err, size_t errlen) {
    if (snprintf(out, PATHLEN, "%s/%s", dir, name) >= PATHLEN) return errmsg(err, errlen, "%s/%s: path too long", dir, name);
    return 0;
}

/* dir/name made of n parts, one after the other, flushed to disk (durable.h's wp_write_new): the
 * folder's rename at the end publishes files that are already on the disk. */
static int write_parts(const char *dir, const char *name, int n, const char *const *data, const size_t *len,
                       char *err, size_t errlen) {
    char path[PATHLEN];
    if (join_path(path, dir, name, err, errlen)) return -1;
    if (wp_write_new(path, 0, 0666, n, (const void *const *)data, len, NULL)) return errmsg(err, errlen, "%s: %s", path, strerror(errno));
    return 0;
}

static int write_file(const char *dir, const char *name, const char *data, size_t len, char *err, size_t errlen) {
    return write_parts(dir, name, 1, &data, &len, err, errlen);
}

/* dir/name runnable by whoever may read it (run.sh): x where the umask left r. */
static int make_executable(const char *dir, const char *name, char *err, size_t errlen) {
    char path[PATHLEN];
    struct stat st;
    if (join_path(path, dir, name, err, errlen)) return -1;
    if (stat(path, &st) || chmod(path, (st.st_mode & 07777) | ((st.st_mode & 0444) >> 2)))
        return errmsg(err, errlen, "%s: %s", path, strerror(errno));
    return 0;
}

/* Names the templates give files: plain names inside DIR, nothing that climbs out of it. */
static int safe_name(const char *s) {
    if (!*s || *s == '.') return 0;
    for (; *s; s++)
        if (!(*s == '_' || *s == '-' || *s == '.' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9'))) return 0;
    return 1;
}

static int copy_file(const char *from, const char *to, char *err, size_t errlen) {
    const char *step = "";
    if (wp_copy_new(from, to, 0, 0666, &step) == 0) return 0;
    if (!strcmp(step, "read")) return errmsg(err, errlen, "%s: read error", from);
    return errmsg(err, errlen, "%s: %s", strcmp(step, "open") ? to : from, strerror(errno));
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int has_ext(const char *name, const char *const *exts) {
    size_t n = strlen(name);
    for (; *exts; exts++) {
        size_t e = strlen(*exts);
        if (n > e && !strcmp(name + n - e, *exts)) return 1;
    }
    return 0;
}

/* Copies the files of src with one of exts into dst (made here), in name order. A missing src is
 * an error only when required: parts of the runtime may not exist yet. */
static int copy_dir(const char *src, const char *dst, const char *const *exts, int required, char *err, size_t errlen) {
    DIR *d = opendir(src);
    if (!d) {
        if (!required && errno == ENOENT) return 0;
        return errmsg(err, errlen, "the runtime's sources: %s: %s", src, strerror(errno));
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        char path[PATHLEN];
        struct stat st;
        if (e->d_name[0] == '.' || !has_ext(e->d_name, exts)) continue;
        if (join_path(path, src, e->d_name, err, errlen)) { rc = -1; break; }
        if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            char **q = realloc(names, (cap = cap ? 2 * cap : 32) * sizeof *names);
            if (!q) { rc = errmsg(err, errlen, "out of memory"); break; }
            names = q;
        }
        if (!(names[n] = strdup(e->d_name))) { rc = errmsg(err, errlen, "out of memory"); break; }
        n++;
    }
    closedir(d);
    if (rc == 0 && mkdir(dst, 0777) && errno != EEXIST) rc = errmsg(err, errlen, "%s: %s", dst, strerror(errno));
    if (names) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char from[PATHLEN], to[PATHLEN];
        if (join_path(from, src, names[i], err, errlen) || join_path(to, dst, names[i], err, errlen) ||
            copy_file(from, to, err, errlen)) rc = -1;
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* The runtime an emitted program builds from, copied into DIR/runtime: the backend-neutral
 * folders, then each chosen backend's folders (backends.c's table) and its part of the Makefile,
 * templates/backend/NAME.mk as DIR/runtime/backend/NAME.mk. */
static int copy_backend(const char *dir, const char *home, const Backend *b, char *err, size_t errlen) {
    char src[PATHLEN], dst[PATHLEN];
    for (const char *const *d = b->dirs; *d; d++) {
        if (snprintf(src, sizeof src, "%s/runtime/%s", home, *d) >= PATHLEN || snprintf(dst, sizeof dst, "%s/runtime/%s", dir, *d) >= PATHLEN)
            return errmsg(err, errlen, "%s/runtime: path too long", home);
        if (copy_dir(src, dst, b->exts, 1, err, errlen)) return -1;
    }
    if (snprintf(dst, sizeof dst, "%s/runtime/backend", dir) >= PATHLEN) return errmsg(err, errlen, "%s: path too long", dir);
    if (mkdir(dst, 0777) && errno != EEXIST) return errmsg(err, errlen, "%s: %s", dst, strerror(errno));
    if (snprintf(src, sizeof src, "%s/templates/backend/%s.mk", home, b->name) >= PATHLEN ||
        snprintf(dst, sizeof dst, "%s/runtime/backend/%s.mk", dir, b->name) >= PATHLEN)
        return errmsg(err, errlen, "%s/templates/backend: path too long", home);
    return copy_file(src, dst, err, errlen);
}

static int copy_runtime(const char *dir, const EmitInfo *info, char *err, size_t errlen) {
    static const char *const c_h[] = { ".c", ".h", NULL };
    char src[PATHLEN], dst[PATHLEN];
    const char *home = wpgen_home();
    const Backend *compute = backend_select(BACKEND_COMPUTE, info->backend, err, errlen);
    const Backend *comm = compute ? backend_select(BACKEND_COMM, info->comm ? info->comm : backend_default_comm(info->backend), err, errlen) : NULL;
    if (!comm || backend_check_pair(compute, comm, err, errlen)) return -1;
    if (join_path(dst, dir, "runtime", err, errlen)) return -1;
    if (mkdir(dst, 0777) && errno != EEXIST) return errmsg(err, errlen, "%s: %s", dst, strerror(errno));
    for (const char *const *d = backend_neutral_dirs; *d; d++) {
        if (snprintf(src, sizeof src, "%s/runtime/%s", home, *d) >= PATHLEN || snprintf(dst, sizeof dst, "%s/runtime/%s", dir, *d) >= PATHLEN)
            return errmsg(err, errlen, "%s/runtime: path too long", home);
        if (copy_dir(src, dst, c_h, 1, err, errlen)) return -1;
    }
    return copy_backend(dir, home, compute, err, errlen) || copy_backend(dir, home, comm, err, errlen) ? -1 : 0;
}

/* ---- what is wpgen's in DIR: manifest.c ---- */

/* DIR may be replaced when it is empty or holds what an earlier emit wrote (its plan.json says
 * so); anything else is someone's data. *exists says whether there is something to replace. */
static int check_target(const char *dir, int *exists, char *err, size_t errlen) {
    struct stat st;
    *exists = 0;
    if (lstat(dir, &st)) {
        if (errno == ENOENT) return 0;
        return errmsg(err, errlen, "%s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) return errmsg(err, errlen, "%s exists and is not a directory; refusing to replace it", dir);
    *exists = 1;
    DIR *d = opendir(dir);
    if (!d) return errmsg(err, errlen, "%s: %s", dir, strerror(errno));
    int empty = 1;
    struct dirent *e;
    while (empty && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    if (empty) return 0;
    char path[PATHLEN], head[512];
    if (join_path(path, dir, "plan.json", err, errlen)) return -1;
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(head, 1, sizeof head - 1, f) : 0;
    if (f) fclose(f);
    head[n] = 0;
    if (!strstr(head, "\"generated_by\": \"wpgen "))
        return errmsg(err, errlen, "%s exists and is not the output of wpgen emit (no plan.json written by wpgen); "
                    "refusing to replace it", dir);
    return 0;
}

/* Renames each of names from one directory to another; on failure, moves back those it moved. */
static int move_entries(const Names *names, const char *from, const char *to, char *err, size_t errlen) {
    for (size_t i = 0; i < names->n; i++) {
        char a[PATHLEN], b[PATHLEN];
        if (join_path(a, from, names->v[i], err, errlen) || join_path(b, to, names->v[i], err, errlen)) return -1;
        if (rename(a, b)) {
            int e = errno;
            while (i-- > 0)
                if (join_path(a, from, names->v[i], err, errlen) == 0 && join_path(b, to, names->v[i], err, errlen) == 0 && rename(b, a))
                    fprintf(stderr, "wpgen: warning: %s was left as %s\n", a, b);
            return errmsg(err, errlen, "cannot move %s into the new output: %s", a, strerror(e));
        }
    }
    return 0;
}

/* ---- the templates: one Lua state per worker thread, ranks handed out one at a time ---- */

/* The ranks are independent, so they are rendered in parallel, each by whichever worker takes it;
 * what a rank's files say depends only on the plan, so the output does not depend on the order. */
typedef struct Job {
    const Plan *p;
    const EmitInfo *info;
    const char *dir;
    char hash[17];
    char tpldir[PATHLEN];
    atomic_int next;            /* the next rank to render, + 1 (0: plan.json) */
    atomic_int failed;
    pthread_mutex_t lock;       /* guards err */
    char err[2048];
    char **sched;               /* per rank: its lines of schedule.txt */
    size_t *schedlen;
} Job;

static void job_fail(Job *job, const char *msg) {
    pthread_mutex_lock(&job->lock);
    if (!atomic_load(&job->failed)) snprintf(job->err, sizeof job->err, "%s", msg);
    atomic_store(&job->failed, 1);
    pthread_mutex_unlock(&job->lock);
}

/* Protected: (M, job) -> M.begin(plan). */
static int l_begin(lua_State *L) {
    const Job *job = lua_touserdata(L, 2);
    lua_getfield(L, 1, "begin");
    emit_push_plan(L, job->p, job->info, job->hash, job->tpldir);
    lua_call(L, 1, 0);
    return 0;
}

/* plan.json, from the plan alone: a worker writes it while the others render ranks. */
static int write_json(const Job *job, char *err, size_t errlen) {
    const Plan *p = job->p;
    char path[PATHLEN];
    if (join_path(path, job->dir, "plan.json", err, errlen)) return -1;
    FILE *f = fopen(path, "wb");
    if (!f) return errmsg(err, errlen, "%s: %s", path, strerror(errno));
    int rc = emit_json_head(f, p, job->info, job->hash);
    for (int r = 0; r < p->nranks && rc == 0; r++) rc = emit_json_rank(f, p, r);
    if (rc == 0) rc = emit_json_tail(f);
    if (rc == 0 && (fflush(f) || fsync(fileno(f)))) rc = -1;   /* on the disk, as write_parts' files */
    if (rc) errmsg(err, errlen, "%s: %s", path, strerror(errno));
    if (fclose(f) && rc == 0) rc = errmsg(err, errlen, "%s: %s", path, strerror(errno));
    return rc;
}

/* What a worker keeps from one rank to the next: the compiled formats of emit.lua's M.op_text and
 * the text of the rank's step and schedule lines (the buffers grow once, not per rank). */
typedef struct Worker {
    OpText *ot;
    Text body, sched;
} Worker;

/* Protected: (M, job, r, worker) -> file name of rank r and its text before and after the step's
 * body, which is left in worker->body (its schedule lines in worker->sched). */
static int l_rank(lua_State *L) {
    const Job *job = lua_touserdata(L, 2);
    int r = (int)lua_tointeger(L, 3);
    Worker *w = lua_touserdata(L, 4);
    const PlanRank *rk = &job->p->ranks[r];
    emit_push_rank(L, job->p, r);
    int rank = lua_gettop(L);
    lua_getfield(L, 1, "ids");
    lua_pushvalue(L, rank);
    lua_call(L, 1, 1);
    if (!lua_istable(L, -1)) return luaL_error(L, "emit.lua: M.ids must return a table");
    const char **ids = lua_newuserdatauv(L, ((size_t)rk->nbufs + 1) * sizeof *ids, 0);
    for (int b = 0; b < rk->nbufs; b++) {
        lua_rawgeti(L, -2, b + 1);
        if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "emit.lua: M.ids: no name for buffer %d", b + 1);
        ids[b] = lua_tostring(L, -1);   /* stays valid while the table holds it */
        lua_pop(L, 1);
    }
    int nbusy;
    w->body.len = w->sched.len = 0;
    op_text_rank(w->ot, job->p, r, ids, &w->body, &w->sched, &nbusy);
    lua_getfield(L, 1, "rank");
    lua_pushvalue(L, rank);
    lua_pushinteger(L, nbusy);
    lua_pushboolean(L, w->body.len > 0);
    lua_call(L, 3, 3);
    for (int i = -3; i < 0; i++)
        if (lua_type(L, i) != LUA_TSTRING) return luaL_error(L, "emit.lua: M.rank must return three strings");
    return 3;
}

/* Protected: (M, plan, out) -> *out = the compiled formats of M.op_text(). */
static int l_op_text(lua_State *L) {
    const Plan *p = lua_touserdata(L, 2);
    OpText **out = lua_touserdata(L, 3);
    char err[1024];
    lua_getfield(L, 1, "op_text");
    lua_call(L, 0, 1);
    if (!(*out = op_text_load(L, -1, p, err, sizeof err))) return luaL_error(L, "%s", err);
    return 0;
}

/* Protected: (M, job) -> M.files(ranks), the ranks without their operations. */
static int l_files(lua_State *L) {
    const Job *job = lua_touserdata(L, 2);
    lua_getfield(L, 1, "files");
    lua_createtable(L, job->p->nranks, 0);
    for (int r = 0; r < job->p->nranks; r++) {
        emit_push_rank(L, job->p, r);
        lua_rawseti(L, -2, r + 1);
    }
    lua_call(L, 1, 1);
    return 1;
}

/* Protected: (M) -> M.schedule_header(). */
static int l_schedule_header(lua_State *L) {
    lua_getfield(L, 1, "schedule_header");
    lua_call(L, 0, 1);
    return 1;
}

/* A Lua state with generator/emit/emit.lua loaded and begun; the module is at the top of its stack.
 * With ot, the formats of its operations too. */
static lua_State *open_emitter(Job *job, OpText **ot, char *err, size_t errlen) {
    lua_State *L = wpgen_lua_new();
    if (!L) { errmsg(err, errlen, "cannot create a Lua state"); return NULL; }
    lua_getglobal(L, "require");
    lua_pushstring(L, "emit");
    if (lua_pcall_traceback(L, 1, 1, err, errlen)) { lua_close(L); return NULL; }
    if (!lua_istable(L, -1)) {
        errmsg(err, errlen, "generator/emit/emit.lua: expected it to return a table");
        lua_close(L);
        return NULL;
    }
    lua_pushcfunction(L, l_begin);
    lua_pushvalue(L, -2);
    lua_pushlightuserdata(L, job);
    if (lua_pcall_traceback(L, 2, 0, err, errlen)) { lua_close(L); return NULL; }
    if (ot) {
        lua_pushcfunction(L, l_op_text);
        lua_pushvalue(L, -2);
        lua_pushlightuserdata(L, (void *)job->p);
        lua_pushlightuserdata(L, ot);
        if (lua_pcall_traceback(L, 3, 0, err, errlen)) { lua_close(L); return NULL; }
    }
    return L;
}

/* A worker: takes plan.json or a rank until there are none left (or another worker failed), writes
 * each rank's source and keeps its schedule lines for the main thread, which writes schedule.txt
 * in order. */
static void *worker(void *arg) {
    Job *job = arg;
    char err[2048];
    Worker w = { 0 };
    lua_State *L = open_emitter(job, &w.ot, err, sizeof err);
    if (!L) { op_text_free(w.ot); job_fail(job, err); return NULL; }
    int M = lua_gettop(L);
    for (;;) {
        /* the first to ask writes plan.json; then ranks 0, 1, ... */
        int r = atomic_fetch_add(&job->next, 1) - 1;
        if (interrupt_pending() && !atomic_load(&job->failed)) job_fail(job, "interrupted");   /* Ctrl-C: stop, it is removed */
        if (r >= job->p->nranks || atomic_load(&job->failed)) break;
        if (r < 0) {
            if (write_json(job, err, sizeof err)) { job_fail(job, err); break; }
            continue;
        }
        lua_pushcfunction(L, l_rank);
        lua_pushvalue(L, M);
        lua_pushlightuserdata(L, job);
        lua_pushinteger(L, r);
        lua_pushlightuserdata(L, &w);
        if (lua_pcall_traceback(L, 4, 3, err, sizeof err)) { job_fail(job, err); break; }
        size_t len[3];
        const char *name = lua_tostring(L, -3), *part[3];
        part[0] = lua_tolstring(L, -2, &len[0]);
        part[1] = w.body.s;
        len[1] = w.body.len;
        part[2] = lua_tolstring(L, -1, &len[2]);
        int rc = 0;
        if (!safe_name(name)) rc = errmsg(err, sizeof err, "emit.lua: bad file name \"%s\"", name);
        else if (write_parts(job->dir, name, 3, part, len, err, sizeof err)) rc = -1;
        else if (!(job->sched[r] = malloc(w.sched.len + 1))) rc = errmsg(err, sizeof err, "out of memory");
        else {
            memcpy(job->sched[r], w.sched.len ? w.sched.s : "", w.sched.len);
            job->sched[r][w.sched.len] = 0;
            job->schedlen[r] = w.sched.len;
        }
        lua_pop(L, 3);
        if (rc) { job_fail(job, err); break; }
    }
    lua_close(L);
    op_text_free(w.ot);
    text_free(&w.body);
    text_free(&w.sched);
    return NULL;
}

/* Worker threads: WPGEN_THREADS if set, else one per online CPU; at most 16 and one per rank. */
static int worker_count(int nranks) {
    long n = wpgen_env_given("WPGEN_THREADS") ? (long)wpgen_env_number("WPGEN_THREADS") : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > 16) n = 16;
    if (n > nranks) n = nranks > 0 ? nranks : 1;
    return (int)n;
}

/* schedule.txt, in rank order, from what the workers kept: the header, then each rank's lines and
 * a blank line. */
static int write_schedule(lua_State *L, int M, Job *job, char *err, size_t errlen) {
    const Plan *p = job->p;
    lua_pushcfunction(L, l_schedule_header);
    lua_pushvalue(L, M);
    if (lua_pcall_traceback(L, 1, 1, err, errlen)) return -1;
    int n = 1 + 2 * p->nranks;
    const char **part = malloc((size_t)n * sizeof *part);
    size_t *len = malloc((size_t)n * sizeof *len);
    int rc = part && len ? 0 : errmsg(err, errlen, "out of memory");
    if (rc == 0) {
        part[0] = lua_tolstring(L, -1, &len[0]);
        for (int r = 0; r < p->nranks; r++) {
            part[1 + 2 * r] = job->sched[r];
            len[1 + 2 * r] = job->schedlen[r];
            part[2 + 2 * r] = "\n";
            len[2 + 2 * r] = 1;
        }
        rc = write_parts(job->dir, "schedule.txt", n, part, len, err, errlen);
    }
    lua_pop(L, 1);
    free(part);
    free(len);
    return rc;
}

/* The files that need every rank: M.files returns { {name, text}, ... }. */
static int write_plan_files(lua_State *L, int M, Job *job, char *err, size_t errlen) {
    lua_pushcfunction(L, l_files);
    lua_pushvalue(L, M);
    lua_pushlightuserdata(L, job);
    if (lua_pcall_traceback(L, 2, 1, err, errlen)) return -1;
    if (!lua_istable(L, -1)) return errmsg(err, errlen, "emit.lua: M.files must return a table");
    int rc = 0;
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= n && rc == 0; i++) {
        size_t len = 0;
        lua_rawgeti(L, -1, i);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        lua_rawgeti(L, -3, 3);
        const char *name = lua_type(L, -3) == LUA_TSTRING ? lua_tostring(L, -3) : NULL;
        const char *data = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &len) : NULL;
        if (!name || !data || !safe_name(name)) rc = errmsg(err, errlen, "emit.lua: files()[%lld]: expected {name, text}", (long long)i);
        else rc = write_file(job->dir, name, data, len, err, errlen);
        if (rc == 0 && lua_toboolean(L, -1)) rc = make_executable(job->dir, name, err, errlen);
        lua_pop(L, 4);
    }
    lua_pop(L, 1);
    return rc;
}

/* Writes every file of the plan into dir, which exists and is empty. */
static int write_all(Job *job, char *err, size_t errlen) {
    const Plan *p = job->p;
    int n = worker_count(p->nranks), started = 0, rc = 0;
    job->sched = calloc((size_t)p->nranks + 1, sizeof *job->sched);
    job->schedlen = calloc((size_t)p->nranks + 1, sizeof *job->schedlen);
    pthread_t threads[16];
    if (!job->sched || !job->schedlen) rc = errmsg(err, errlen, "out of memory");
    else {
        /* This thread works too; a thread that cannot start only makes the others busier. */
        while (started < n - 1 && pthread_create(&threads[started], NULL, worker, job) == 0) started++;
        worker(job);
        for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
        if (atomic_load(&job->failed)) rc = errmsg(err, errlen, "%s", job->err);
    }
    if (rc == 0) {
        lua_State *L = open_emitter(job, NULL, err, errlen);
        if (!L) rc = -1;
        else {
            int M = lua_gettop(L);
            rc = write_schedule(L, M, job, err, errlen);
            if (rc == 0) rc = write_plan_files(L, M, job, err, errlen);
            lua_close(L);
        }
    }
    for (int r = 0; job->sched && r < p->nranks; r++) free(job->sched[r]);
    free(job->sched);
    free(job->schedlen);
    return rc;
}

/* ---- emit_plan ---- */

static int emit_into(const Plan *p, const EmitInfo *info, const char *final, const char *tmp, const char *old, int exists,
                     char *err, size_t errlen);

/* An emit killed with SIGKILL (nothing can catch it) leaves its DIR.tmp-PID, or its DIR.old-PID
 * while the new output moved in: removed by the next emit into DIR (outdir_sweep: once that
 * process is gone), when the folder is provably an emission's (wpgen's header on its plan.json or
 * a rank file at its top, or empty: killed before it wrote). */
static int remove_leftover(const char *path, long pid, void *ctx) {
    (void)pid; (void)ctx;
    char probe[PATHLEN];
    DIR *sub = opendir(path);
    if (!sub) return 0;
    int ours = 0, empty = 1;
    struct dirent *f;
    while ((f = readdir(sub))) {
        if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, "..")) continue;
        empty = 0;
        if (strcmp(f->d_name, "plan.json") && strncmp(f->d_name, "rank_", 5)) continue;
        ours = snprintf(probe, sizeof probe, "%s/%s", path, f->d_name) < PATHLEN && manifest_generated(probe);
        break;
    }
    closedir(sub);
    if (!(ours || empty) || rm_tree(path)) return 0;
    fprintf(stderr, "wpgen: removed %s, left by an emit that was killed\n", path);
    return 1;
}

static void sweep_leftovers(const char *final) {
    static const char *const marks[] = { ".tmp" WP_TMP_DASH, OUTDIR_ASIDE, NULL };
    outdir_sweep(final, marks, remove_leftover, NULL);
}

int emit_plan(const Plan *p, const EmitInfo *info, const char *dir, char *err, size_t errlen) {
    if (!p->verified) return errmsg(err, errlen, "the plan has not been verified");
    const Backend *compute = backend_select(BACKEND_COMPUTE, info->backend, err, errlen);
    if (!compute) return -1;
    if (compute->bf16_only && p->precision != WP_BF16)
        return errmsg(err, errlen, "--backend %s computes in bf16 only, and the plan is in %s (--precision bf16, the "
                      "default for --backend %s)", compute->name, wp_dtype_name(p->precision), compute->name);
    /* DIR without trailing slashes, a symbolic link to a folder that folder (emit/outdir.h, the
     * rule wpgen export shares): DIR.tmp-PID is the real folder's sibling */
    char final[PATHLEN - 32], tmp[PATHLEN + 32], old[PATHLEN + 32];
    if (outdir_final(dir, final, sizeof final, err, errlen)) return -1;
    if (wp_tmp_path(tmp, sizeof tmp, final, WP_TMP_DASH) || wp_pid_path(old, sizeof old, final, OUTDIR_ASIDE))
        return errmsg(err, errlen, "%s: path too long", final);

    int exists;
    if (check_target(final, &exists, err, errlen)) return -1;
    sweep_leftovers(final);
    /* a signal from here on is noted: the writers stop, tmp goes, and wpgen ends with the signal
     * (interrupt.h); once the result is moving into place, that finishes first */
    interrupt_begin();
    int rc = emit_into(p, info, final, tmp, old, exists, err, errlen);
    if (interrupt_pending() && rc) rm_tree(tmp);
    interrupt_end();
    return rc;
}

static int emit_into(const Plan *p, const EmitInfo *info, const char *final, const char *tmp, const char *old, int exists,
                     char *err, size_t errlen) {
    if (mkdir(tmp, 0777)) {
        if (errno == ENOENT) return errmsg(err, errlen, "%s: its parent directory does not exist", final);
        return errmsg(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    }

    /* wpgen_home() fills a static buffer the first time: done here, before any worker thread. */
    Job *job = calloc(1, sizeof *job);
    if (!job) { rmdir(tmp); return errmsg(err, errlen, "out of memory"); }
    job->p = p;
    job->info = info;
    job->dir = tmp;
    snprintf(job->hash, sizeof job->hash, "%016llx", (unsigned long long)plan_hash(p));
    snprintf(job->tpldir, sizeof job->tpldir, "%s/templates", wpgen_home());
    atomic_init(&job->next, 0);
    atomic_init(&job->failed, 0);
    pthread_mutex_init(&job->lock, NULL);
    int rc = write_all(job, err, errlen);
    pthread_mutex_destroy(&job->lock);
    free(job);
    if (rc == 0) rc = copy_runtime(tmp, info, err, errlen);
    /* the manifest, then what of the earlier output is the user's: kept, moved into the new one */
    Names fresh = { 0 }, keep = { 0 };
    if (rc == 0 && interrupt_pending()) rc = errmsg(err, errlen, "interrupted");
    if (rc == 0) rc = manifest_write(tmp, &fresh, err, errlen);
    if (rc == 0) rc = sync_tree(tmp, err, errlen);
    if (rc == 0 && exists) rc = manifest_claim(final, &fresh, &keep, err, errlen);
    if (rc == 0 && exists) rc = manifest_carry_build(final, tmp, &fresh, &keep, err, errlen);
    names_free(&fresh);
    if (rc == 0) rc = move_entries(&keep, final, tmp, err, errlen);
    /* the names moved in, flushed; never a failure here: the user's entries are in tmp now */
    if (rc == 0 && keep.n && wp_fsync_dir(tmp)) fprintf(stderr, "wpgen: warning: %s: fsync failed: %s\n", tmp, strerror(errno));
    if (rc) {
        names_free(&keep);
        rm_tree(tmp);
        return -1;
    }

    /* Into place: the old output steps aside first, and comes back (with the user's entries) if
     * the new one cannot go in. What is left of the old one is wpgen's alone. */
    if (exists && rename(final, old)) {
        int e = errno;
        if (move_entries(&keep, tmp, final, err, errlen)) fprintf(stderr, "wpgen: warning: %s\n", err);
        names_free(&keep);
        rm_tree(tmp);
        return errmsg(err, errlen, "cannot move %s aside: %s", final, strerror(e));
    }
    if (rename(tmp, final)) {
        int e = errno;
        if (exists && rename(old, final)) fprintf(stderr, "wpgen: warning: %s was left as %s\n", final, old);
        else if (move_entries(&keep, tmp, final, err, errlen)) fprintf(stderr, "wpgen: warning: %s\n", err);
        names_free(&keep);
        rm_tree(tmp);
        return errmsg(err, errlen, "cannot rename %s to %s: %s", tmp, final, strerror(e));
    }
    names_free(&keep);
    if (wp_fsync_dir_of(final)) fprintf(stderr, "wpgen: warning: %s: fsync of the directory failed: %s\n", final, strerror(errno));
    if (exists && rm_tree(old)) fprintf(stderr, "wpgen: warning: could not remove %s: %s\n", old, strerror(errno));
    return 0;
}
