/* The strategies' own options on the command line: a flag main.c does not know is looked up in
 * the declarations (lua/declare.h) of the strategy named by -s, of compare's --strategies and of
 * the shipped ones; its value is checked against the declaring strategy's type and range; plan,
 * emit and sim refuse an option their strategy does not declare, naming the one that does.
 * compare and -s auto take an option given as fixed for every strategy that declares it; the
 * others are not affected. Also the help of those options and the labels strategies declare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "lua/declare.h"
#include "lua/sandbox.h"

enum { MAX_LOOKUP = 64 };

/* The strategies whose options the command line may hold: -s's (not auto), --strategies', the
 * shipped ones; *nsingle: 1 where the command runs one strategy (plan, emit, sim without auto). */
static int lookup_names(const Args *a, char names[][64], int max, int *single) {
    int n = 0;
    *single = strcmp(a->cmd, "compare") && strcmp(a->strategy, "auto");
    if (*single) { snprintf(names[n++], 64, "%.63s", a->strategy); return n; }
    if (a->strategies) {
        const char *s = a->strategies;
        while (*s && n < max) {
            size_t l = strcspn(s, ",");
            if (l > 0 && l < 64 && strncmp(s, "auto", l)) { memcpy(names[n], s, l); names[n++][l] = 0; }
            else if (l == 4 && !strncmp(s, "auto", 4) && n + 32 < max) n += shipped_strategies(names + n, max - n);
            s += l + (s[l] == ',');
        }
        return n;
    }
    return shipped_strategies(names, max);
}

int strategy_flag_known(const Args *a, const char *flag, int *takes_value) {
    char names[MAX_LOOKUP][64];
    int single, n = lookup_names(a, names, MAX_LOOKUP, &single);
    char all[MAX_LOOKUP][64];
    int na = single ? shipped_strategies(all, MAX_LOOKUP) : 0;   /* another strategy's option: refused later, by name */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < (pass ? na : n); i++) {
            const OptDecl *od = decl_option(strategy_decl(pass ? all[i] : names[i]), flag);
            if (od) { *takes_value = od->type != OPT_BOOL; return 1; }
        }
    return 0;
}

/* "a" or "a, b and c": the shipped strategies declaring flag. */
static void takers(const char *flag, char *out, size_t len, int *count) {
    char all[MAX_LOOKUP][64];
    int na = shipped_strategies(all, MAX_LOOKUP), k = 0;
    const char *t[MAX_LOOKUP];
    for (int i = 0; i < na; i++)
        if (decl_option(strategy_decl(all[i]), flag)) t[k++] = all[i];
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < k && n < len; i++)
        n += snprintf(out + n, len - n, "%s%s", i ? (i + 1 == k ? " and " : ", ") : "", t[i]);
    *count = k;
}

int strategy_options_check(Args *a) {
    if (!a->nraw) return 0;
    char names[MAX_LOOKUP][64];
    int single, n = lookup_names(a, names, MAX_LOOKUP, &single);
    for (int r = 0; r < a->nraw; r++) {
        const char *flag = a->raw[r].flag, *value = a->raw[r].value;
        OptVal v;
        int found = 0;
        for (int i = 0; i < n; i++) {
            const StrategyDecl *d = strategy_decl(names[i]);
            if (!d->ok) {
                if (single) { fprintf(stderr, "wpgen: %s\n", d->err); return -1; }
                continue;
            }
            const OptDecl *od = decl_option(d, flag);
            if (!od) continue;
            char err[600];
            OptVal w;
            if (decl_parse_value(od, value, &w, err, sizeof err)) { fprintf(stderr, "wpgen: %s\n", err); return -1; }
            if (!found) v = w;
            found = 1;
        }
        if (!found) {
            char who[600];
            int k;
            takers(flag, who, sizeof who, &k);
            if (single && k) fprintf(stderr, "wpgen: %s: strategy %s does not take it (%s %s)\n", flag, a->strategy, who, k > 1 ? "do" : "does");
            else if (single) fprintf(stderr, "wpgen: %s: strategy %s does not take it\n", flag, a->strategy);
            else fprintf(stderr, "wpgen: %s: none of the strategies %s takes it%s%s%s\n", flag,
                         !strcmp(a->cmd, "compare") ? "compared" : "-s auto searches", k ? " (" : "", k ? who : "", k > 1 ? " do)" : k ? " does)" : "");
            return -1;
        }
        int at = a->ngiven;
        for (int i = 0; i < a->ngiven; i++)
            if (!strcmp(a->given[i].name, v.name)) at = i;   /* given twice: the last */
        a->given[at] = v;
        if (at == a->ngiven) a->ngiven++;
    }
    return 0;
}

static void option_line(FILE *f, const OptDecl *od) {
    char range[400], def[128], arg[48];
    decl_describe_range(od, range, sizeof range);
    decl_describe_default(od, "none (the strategy's own choice)", def, sizeof def);
    snprintf(arg, sizeof arg, "%s%s", od->flag, od->type == OPT_INT ? " N" : od->type == OPT_CHOICE ? " VALUE" : "");
    fprintf(f, "  %-28s %s; default %s%s\n", arg, range, def, od->searched ? "; compare and -s auto search it" : "");
    if (od->help[0]) fprintf(f, "  %-28s %s\n", "", od->help);
}

static void strategy_help_one(FILE *f, const char *name) {
    const StrategyDecl *d = strategy_decl(name);
    if (!d->ok) { fprintf(f, "%s: %s\n", name, d->err); return; }
    if (!d->nopts) { fprintf(f, "%s takes no options of its own.\n", name); return; }
    fprintf(f, "Options of %s (declared by %s; other strategies refuse them):\n", name, sandbox_script_name(d->path));
    for (int i = 0; i < d->nopts; i++) option_line(f, &d->opts[i]);
}

void strategy_options_help(FILE *f, const char *strategy) {
    if (strategy && strcmp(strategy, "auto")) { strategy_help_one(f, strategy); return; }
    char names[MAX_LOOKUP][64];
    int n = shipped_strategies(names, MAX_LOOKUP);
    fprintf(f, "The strategies' own options (wpgen plan --help -s NAME for one):\n");
    for (int i = 0; i < n; i++) strategy_help_one(f, names[i]);
}

void cand_label(const Cand *c, const StrategyOpts *flags, const char *how, char *out, size_t len) {
    decl_label(strategy_decl(c->strategy), how, &c->o, flags, 0, out, len, NULL);
}

void cand_label_json(const Cand *c, const StrategyOpts *flags, const char *how, json_t *obj) {
    DeclTable t;
    decl_label(strategy_decl(c->strategy), how, &c->o, flags, 0, NULL, 0, &t);
    for (int i = 0; i < t.n; i++) {
        const DeclField *x = &t.f[i];
        json_t *v = x->type == DECL_STR ? json_string(x->str) : x->type == DECL_BOOL ? json_boolean(x->num != 0)
                    : x->num == (double)(long long)x->num ? json_integer((json_int_t)x->num) : json_real(x->num);
        json_object_set_new(obj, x->key, v);
    }
}
