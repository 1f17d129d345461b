/* What the fuzz harnesses share: FUZZ_REQUIRE, an invariant that must hold for every input (a
 * violation prints why and aborts, which libFuzzer reports as a crash and the corpus replay as a
 * failed test), and the entry point's declaration. Header-only. */
#ifndef WP_FUZZ_H
#define WP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_REQUIRE(cond, ...) do { \
    if (!(cond)) { \
        fprintf(stderr, "%s:%d: invariant %s broken: ", __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); \
    } \
} while (0)

/* An error message must be one non-empty line that names its source. */
static inline void fuzz_check_message(const char *err, const char *source) {
    FUZZ_REQUIRE(err[0] != '\0', "empty error message");
    FUZZ_REQUIRE(strchr(err, '\n') == NULL, "error message of more than one line: %s", err);
    FUZZ_REQUIRE(strncmp(err, source, strlen(source)) == 0, "error message not naming %s: %s", source, err);
}

#endif
