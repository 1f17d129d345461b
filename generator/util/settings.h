/* wpgen's settings from the environment (WPGEN_*, and the export's test hook), declared once as
 * the runtime's are (runtime/common/settings.h: the readers, the kinds, the messages); `wpgen
 * --help` prints this table. */
#ifndef WPGEN_SETTINGS_H
#define WPGEN_SETTINGS_H

#include "common/settings.h"

extern const WpSetting wpgen_settings[];
extern const int wpgen_nsettings;

/* A variable of the table by name (runtime/common/settings.h's readers on this table). */
#define wpgen_env_number(name) wp_settings_number(wpgen_settings, wpgen_nsettings, (name), "wpgen: ")
#define wpgen_env_text(name) wp_settings_text(wpgen_settings, wpgen_nsettings, (name))
#define wpgen_env_given(name) wp_settings_given(wpgen_settings, wpgen_nsettings, (name))

#endif
