/* wpgen data: text files or JSONL into token shards for train --data. The tokenizing is done by
 * a Hugging Face tokenizer through its Python package, so this command runs wpgen's script
 * scripts/tokenize_data.py (found through wpgen_home) with the arguments as given; the script
 * checks them, installs the package if missing and writes the shards (its top comment says how).
 * WPGEN_PYTHON names the interpreter (default python3 from PATH).
 * Exit status: the script's: 0 done, 1 failed, 2 bad input (SIGTERM or SIGHUP: killed by it, once the
 * script has removed what it was writing); 1 where no Python can be run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "lua/home.h"
#include "util/settings.h"
#include "util/xalloc.h"

int cmd_data(int argc, char **argv) {
    char script[4200];
    snprintf(script, sizeof script, "%s/scripts/tokenize_data.py", wpgen_home());
    if (access(script, R_OK)) {
        fprintf(stderr, "wpgen data: %s: %s (set WPGEN_HOME to wpgen's folder)\n", script, strerror(errno));
        return EXIT_FAILED;
    }
    const char *python = wpgen_env_text("WPGEN_PYTHON");   /* python3 by default */
    /* python3 SCRIPT ARGS...: argv[2..] passed on as they are */
    char **args = xcalloc((size_t)argc + 2, sizeof *args);
    args[0] = (char *)python;
    args[1] = script;
    for (int i = 2; i < argc; i++) args[i] = argv[i];
    fflush(NULL);
    execvp(python, args);
    fprintf(stderr, "wpgen data: cannot run %s: %s (wpgen data needs Python 3; WPGEN_PYTHON names another)\n", python,
            strerror(errno));
    free(args);
    return EXIT_FAILED;
}
