/* One-line error messages into a caller's buffer: the convention of every loader and writer here
 * (a function fails by returning -1 with the reason in err). */
#ifndef WP_ERRMSG_H
#define WP_ERRMSG_H

#include <stdarg.h>
#include <stdio.h>

/* Writes the message into err (if there is room for one) and returns -1. */
static inline int __attribute__((format(printf, 3, 4))) errmsg(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Makes a message one line whatever it quotes: control characters (a newline inside a JSON key,
 * the raw text a JSON parser's error shows "near") become '?'. Returns -1, like errmsg. */
static inline int errmsg_one_line(char *err) {
    for (char *p = err; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return -1;
}

#endif
