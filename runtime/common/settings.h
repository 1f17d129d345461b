/* Settings from the environment, declared once: each variable a program reads is one row of a
 * table (its name, what kind of value, the default, the range or the choices, what it does), and
 * the code reads it through that row, so the parsing, the range check, the message for a bad
 * value and the --help text all come from one place. The runtime's table (WP_*: the trainers and
 * every emitted program) is settings.c's; the generator's (WPGEN_*) is generator/util/settings.c's,
 * on the same functions. tests/unit/test_settings.c checks that no getenv of a WP_ or WPGEN_
 * variable is left outside the tables.
 *
 * A variable unset or empty takes its default. A bad value is bad input: the reader gets -1 and
 * "NAME=VALUE: expected ..., (what it does)" in err, or, through the *_or_exit readers, that line on
 * stderr and exit status 2 (every rank of a job sees the same environment, so all of them stop). */
#ifndef WP_SETTINGS_H
#define WP_SETTINGS_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SET_SECONDS,   /* a number of seconds >= lo (decimals allowed) */
    SET_COUNT,     /* a whole number from lo to hi */
    SET_SWITCH,    /* 0 or 1 */
    SET_CHOICE,    /* one of choices ("a|b|c"); read as its index */
    SET_TEXT,      /* any text (a path, a program) */
} SettingKind;

typedef struct WpSetting {
    const char *name;
    SettingKind kind;
    const char *dflt;      /* the value when unset, as text ("" for "decided by the program") */
    double lo, hi;         /* SET_SECONDS, SET_COUNT */
    const char *choices;   /* SET_CHOICE: "a|b|c" */
    const char *help;      /* one line: what it does */
} WpSetting;

/* The runtime's table (settings.c), in the order --help prints it. */
extern const WpSetting wp_runtime_settings[];
extern const int wp_runtime_nsettings;

/* The row of name in table (n rows); NULL if none (a program asking for an undeclared variable
 * is a bug: the readers abort on it). */
const WpSetting *wp_setting_find(const WpSetting *table, int n, const char *name);

/* The value of a row: a number (SET_SECONDS, SET_COUNT, SET_SWITCH: 0 or 1, SET_CHOICE: the
 * index), or the text (SET_TEXT; NULL when unset and without default). *given: whether the
 * environment set it (NULL: not asked). 0, or -1 with err. */
int wp_setting_number(const WpSetting *s, double *out, int *given, char *err, size_t errlen);
const char *wp_setting_text(const WpSetting *s, int *given);

/* A variable of table by name (an undeclared name is a bug: it aborts): its number, exiting with
 * status 2 on a bad value (the message, prefixed by prog, names it); its text (NULL unset and
 * without default); whether the environment sets it (not empty). */
double wp_settings_number(const WpSetting *table, int n, const char *name, const char *prog);
const char *wp_settings_text(const WpSetting *table, int n, const char *name);
int wp_settings_given(const WpSetting *table, int n, const char *name);

/* The same for the runtime's table. */
#define wp_env_number(name) wp_settings_number(wp_runtime_settings, wp_runtime_nsettings, (name), "")
#define wp_env_text(name) wp_settings_text(wp_runtime_settings, wp_runtime_nsettings, (name))
#define wp_env_given(name) wp_settings_given(wp_runtime_settings, wp_runtime_nsettings, (name))

/* The rows as --help prints them: "  NAME=VALUE   what it does (default D; range)". */
void wp_settings_print(FILE *f, const WpSetting *table, int n);

#ifdef __cplusplus
}
#endif

#endif
