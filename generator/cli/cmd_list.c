/* wpgen list: the model presets, the strategies in schedules/ with their one-line descriptions
 * and the options they declare, and the topologies in topologies/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include "common/modelcfg.h"
#include "lua/bridge.h"
#include "lua/declare.h"
#include "cli/cli.h"

int cmd_list(int argc, char **argv) {
    if (cli_help_asked(argc, argv)) {
        printf("usage: wpgen list   (the model presets, the strategies with their options, the topologies)\n");
        return 0;
    }
    if (argc > 2) {
        fprintf(stderr, "wpgen list: takes no arguments, got \"%s\"\n", argv[2]);
        return EXIT_BAD_INPUT;
    }
    int n;
    const ModelPreset *m = model_presets(&n);
    printf("Models (-m NAME, or a Hugging Face config.json):\n");
    for (int i = 0; i < n; i++)
        printf("  %-16s H=%-5d L=%-3d heads=%d/%d ffn=%d vocab=%d  %s\n", m[i].name, m[i].cfg.hidden, m[i].cfg.layers,
               m[i].cfg.heads, m[i].cfg.kv_heads, m[i].cfg.ffn, m[i].cfg.vocab, m[i].about);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/schedules", wpgen_home());
    printf("Strategies (-s NAME, or a path to a .lua file), in %s:\n", "schedules/");
    struct dirent **ents;
    int k = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < k; i++) {
        size_t l = strlen(ents[i]->d_name);
        if (l > 4 && !strcmp(ents[i]->d_name + l - 4, ".lua")) {
            char path[4500], about[256];
            snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
            strategy_about(path, about, sizeof about);
            printf("  %-20.*s %s\n", (int)(l - 4), ents[i]->d_name, about);
            /* its own options, as its file declares them (wpgen plan --help -s NAME: their help) */
            char sname[64];
            snprintf(sname, sizeof sname, "%.*s", (int)(l - 4), ents[i]->d_name);
            const StrategyDecl *d = strategy_decl(sname);
            for (int k = 0; d->ok && k < d->nopts; k++) {
                const OptDecl *od = &d->opts[k];
                char range[400], def[128];
                decl_describe_range(od, range, sizeof range);
                decl_describe_default(od, "its own", def, sizeof def);
                printf("  %-20s   %s%s: %s, default %s%s\n", "", od->flag, od->type == OPT_INT ? " N" : od->type == OPT_CHOICE ? " VALUE" : "",
                       range, def, od->searched ? " (searched)" : "");
            }
            if (!d->ok) printf("  %-20s   (%s)\n", "", d->err);
        }
        free(ents[i]);
    }
    if (k >= 0) free(ents);
    printf("  %-20s %s\n", "auto", "searches the others and their parameters with the simulator; the fastest plan that fits");
    snprintf(dir, sizeof dir, "%s/topologies", wpgen_home());
    printf("Topologies (-t FILE), in topologies/:\n");
    k = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < k; i++) {
        if (strstr(ents[i]->d_name, ".json")) printf("  %s\n", ents[i]->d_name);
        free(ents[i]);
    }
    if (k >= 0) free(ents);
    return 0;
}
