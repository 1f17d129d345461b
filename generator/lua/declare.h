/* What a strategy says of itself (declare.c): the table its script returns holds, beside
 * `build`, its own options (`options`: name, type, range, default, help and the values the
 * search tries), its `traits` (what the search's bounds may assume of its plans) and `label`
 * (how compare and -s auto name its choices). The script is run in the sandbox, with the
 * sandbox's default limits, once per strategy and process; the state is kept for the calls of
 * its traits, label and search functions. The C core reads the declarations and names no
 * strategy (docs/strategies.md, "Declaring a strategy"). */
#ifndef WP_DECLARE_H
#define WP_DECLARE_H

#include <stddef.h>
#include "lua/bridge.h"

typedef enum { OPT_INT, OPT_BOOL, OPT_CHOICE } OptType;

enum { DECL_MAX_CHOICES = 8 };

typedef struct OptDecl {
    char name[32];          /* ctx.opts key, "pass_micro_batches" */
    char flag[40];          /* "--pass-micro-batches" */
    OptType type;
    long long min, max;     /* int: the range a value given must lie in (the default may lie outside: "the strategy's choice") */
    int nchoices;
    char choices[DECL_MAX_CHOICES][32];
    OptVal def;             /* the default */
    char help[512];
    char default_words[96];  /* `default_words`: the default said in words where the value alone would
                              * mislead ("on for tied models, off otherwise"); "" for none */
    int searched;           /* it has `search` values: the search tries them where the flags do not fix it */
} OptDecl;

typedef struct lua_State lua_State;

typedef struct StrategyDecl {
    char name[64];          /* as -s gives it: NAME, or a path */
    char path[4096];
    char about[256];
    int ok;                 /* 0: err says why the declaration could not be read */
    char err[1024];
    int nopts;
    OptDecl opts[STRATEGY_MAX_OPTS];
    int has_traits, has_label;
    lua_State *L;           /* the sandboxed state holding the table (registry reference ref) */
    void *sb;
    int ref;
} StrategyDecl;

/* The wall-clock limit of each call into a declaration (reading it, its traits, label and
 * search): --lua-max-seconds, which the command line may give after the flags that read one.
 * 0: the sandbox's default. */
void strategy_decl_set_seconds(int max_seconds);

/* The declaration of strategy name (schedules/NAME.lua or a path), read once and cached; never
 * NULL: ->ok == 0 with ->err where the file is missing or its table is malformed. */
const StrategyDecl *strategy_decl(const char *name);

/* The option of d with that flag ("--rounds") or name ("rounds"); NULL if none. */
const OptDecl *decl_option(const StrategyDecl *d, const char *flag_or_name);
/* A value given on the command line for od, checked: 0, or -1 with err saying the flag, what was
 * expected and the valid range. text NULL for a bool. */
int decl_parse_value(const OptDecl *od, const char *text, OptVal *out, char *err, size_t errlen);
/* "0 .. 16384", "gather-once | full-shard", "flag" */
void decl_describe_range(const OptDecl *od, char *out, size_t len);
void decl_format_value(const OptVal *v, char *out, size_t len);   /* 2, true, "full-shard" */
/* The default as `wpgen list` and `plan --help` say it: its `default_words`, else the value;
 * own: what to say of an int default outside [min, max] (the strategy's own choice). */
void decl_describe_default(const OptDecl *od, const char *own, char *out, size_t len);

/* A flat table the declaration returned: traits by key, a label's JSON fields in order. */
enum { DECL_NUM = 'n', DECL_STR = 's', DECL_BOOL = 'b' };
typedef struct DeclField { char key[40]; char type; double num; char str[160]; } DeclField;
typedef struct DeclTable { int n; DeclField f[48]; } DeclTable;
const DeclField *decl_field(const DeclTable *t, const char *key);
double decl_num(const DeclTable *t, const char *key, double dflt);   /* a number, or a bool as 0/1 */
const char *decl_str(const DeclTable *t, const char *key, const char *dflt);

/* d's traits for the options o on nranks ranks (a table, or a function of ctx.opts and
 * ctx.model's layers); 0, or -1 (none declared, or an error: out empty). */
int decl_traits(const StrategyDecl *d, const StrategyOpts *o, int nranks, int layers, DeclTable *out);

/* d's label of the options o for `how` (compare's row: "name", "row", "auto-row"; -s auto's
 * words: "picked", "picked-after"; JSON: "json", "auto-json"), flags being the options as the
 * command line gives them. Strings into out ("" if none); JSON forms into *json (key, value
 * pairs in order). 0, or -1 on an error of the script (out empty). */
int decl_label(const StrategyDecl *d, const char *how, const StrategyOpts *o, const StrategyOpts *flags, int nranks,
               char *out, size_t len, DeclTable *json);

/* The values the search tries for option i of d (its `search`: a list, or a function of
 * {micro_batches, ranks (of a pipeline), layers, chunks}); returns how many (at most max), 0 where
 * it has none. */
typedef struct DeclSearchCtx { int micro_batches, ranks, layers, chunks; } DeclSearchCtx;
int decl_search_values(const StrategyDecl *d, int i, const DeclSearchCtx *ctx, OptVal *out, int max);

/* The options a plan's notes (plan.json) record, for calibrate to plan it again: each option
 * whose `from_notes` (a Lua pattern) matches notes is set in o, from its capture (or true). */
void decl_from_notes(const StrategyDecl *d, const char *notes, StrategyOpts *o);

/* The strategy of -s when none is given: the name in schedules/default-strategy (auto if none). */
const char *strategy_default(void);

#endif
