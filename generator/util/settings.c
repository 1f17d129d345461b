/* wpgen's settings from the environment: the table (settings.h). */
#include "util/settings.h"

const WpSetting wpgen_settings[] = {
    { "WPGEN_HOME", SET_TEXT, "", 0, 0, NULL,
      "the tree holding schedules/, templates/ and runtime/ (unset: the one above the wpgen binary)" },
    { "WPGEN_THREADS", SET_COUNT, "", 1, 4096, NULL,
      "threads that write an emitted plan's rank files (unset: one per online CPU; at most 16, one per rank)" },
    { "WPGEN_PROGRESS", SET_SWITCH, "", 0, 1, NULL,
      "1: the search's progress lines on stderr, 0: none (unset: on a terminal only)" },
    { "WPGEN_SEARCH_TRACE", SET_SWITCH, "0", 0, 1, NULL,
      "1: every candidate of -s auto and compare, its bounds and its fate, one line each on stderr" },
    { "WPGEN_VERIFY_ALL", SET_SWITCH, "0", 0, 1, NULL,
      "1: the verifier runs every rank of a plan with replicas, not one replica and the images of the others" },
    { "WPGEN_PYTHON", SET_TEXT, "python3", 0, 0, NULL,
      "the Python that runs `wpgen data` (scripts/tokenize_data.py)" },
    { "WP_EXPORT_READ_LAYERS", SET_COUNT, "", 1, 2147483647, NULL,
      "layers `wpgen export` reads at a time, at most the model's (a test hook: a small model on the path of a large one)" },
};
const int wpgen_nsettings = (int)(sizeof wpgen_settings / sizeof wpgen_settings[0]);
