/* Signals while wpgen writes (interrupt.h). The handler does only what is async-signal-safe:
 * unlink a temporary file whose name was stored before, or note the signal for the writer. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "util/interrupt.h"
#include "common/durable.h"

static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
#define NSIGS ((int)(sizeof sigs / sizeof sigs[0]))
static struct sigaction saved[NSIGS];
static char tmp_file[4200];              /* a temporary to remove on a signal, or "" */
static volatile sig_atomic_t deferring, pending, installed;

static void on_signal(int sig) {
    if (deferring) { pending = sig; return; }
    if (tmp_file[0]) unlink(tmp_file);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install(void) {
    if (installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;   /* the writers carry on to their next check, not fail half-way */
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NSIGS; i++) {
        sigaction(sigs[i], &sa, &saved[i]);
        if (saved[i].sa_handler == SIG_IGN) sigaction(sigs[i], &saved[i], NULL);   /* ignored (nohup, a background job): still ignored */
    }
    installed = 1;
}

static void uninstall(void) {
    if (!installed) return;
    for (int i = 0; i < NSIGS; i++) sigaction(sigs[i], &saved[i], NULL);
    installed = 0;
}

FILE *interrupt_fopen(const char *path, char *tmp, size_t len) {
    /* not a file to replace (/dev/null, /dev/stdout, a pipe): written as it is, since renaming a
     * temporary onto it would put a file where the device was */
    struct stat st;
    if (len > 0 && stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        tmp[0] = 0;
        return fopen(path, "w");
    }
    if (wp_tmp_path(tmp, len, path, WP_TMP_DASH) || strlen(tmp) >= sizeof tmp_file) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    memcpy(tmp_file, tmp, strlen(tmp) + 1);
    install();
    FILE *f = fopen(tmp, "w");
    if (!f) { tmp_file[0] = 0; uninstall(); }
    return f;
}

int interrupt_commit(FILE *f, const char *tmp, const char *path) {
    int bad = ferror(f);
    if (!tmp[0]) return fclose(f) || bad ? -1 : 0;   /* written in place (interrupt_fopen) */
    int rc = fclose(f) || bad || rename(tmp, path) ? -1 : 0;
    int e = errno;
    if (rc) unlink(tmp);
    tmp_file[0] = 0;
    uninstall();
    errno = e;
    return rc;
}

void interrupt_begin(void) {
    pending = 0;
    deferring = 1;
    install();
}

int interrupt_pending(void) { return pending; }

void interrupt_end(void) {
    deferring = 0;
    uninstall();
    if (pending) raise(pending);
}
