/* wpgen_home (home.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lua/home.h"
#include "util/settings.h"

/* The repository root: WPGEN_HOME, else the parent of the directory holding the executable. */
const char *wpgen_home(void) {
    static char home[4096];
    if (home[0]) return home;
    const char *env = wpgen_env_text("WPGEN_HOME");
    if (env) { snprintf(home, sizeof home, "%s", env); return home; }
    ssize_t n = readlink("/proc/self/exe", home, sizeof home - 1);
    if (n <= 0) { snprintf(home, sizeof home, "."); return home; }
    home[n] = 0;
    for (int i = 0; i < 2; i++) {
        char *slash = strrchr(home, '/');
        if (slash) *slash = 0;
    }
    if (!home[0]) snprintf(home, sizeof home, "/");
    return home;
}
