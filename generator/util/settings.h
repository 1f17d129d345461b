/* wpgen's settings from the environment (WPGEN_*, and the export's test hook), declared once as
 * the runtime's are (runtime/common/settings.h: the readers, the kinds, the messages); `wpgen
 * --help` prints this table. */
#ifndef WPGEN_SETTINGS_H
#define WPGEN_SETTINGS_H

#include "common/settings.h"

extern const WpSetting wpgen_settings[];
extern const int wpgen_nsettings;

/* A variable of the table by name: its number (exit 2 on a bad value, the message naming it), its
 * text (NULL unset and without default), whether the environment sets it. */
double wpgen_env_number(const char *name);
const char *wpgen_env_text(const char *name);
int wpgen_env_given(const char *name);

#endif
