#include "kvfuzz/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *kvf_strerror(int code) {
    switch (code) {
    case KVF_OK:
        return "success";
#define KVF_ERRNO_TEXT(name, value, text)                                                          \
    case KVF_##name:                                                                               \
        return text;
        KVF_ERRNO_MAP(KVF_ERRNO_TEXT)
#undef KVF_ERRNO_TEXT
    default:
        return "unknown error";
    }
}

const char *kvf_errname(int code) {
    switch (code) {
    case KVF_OK:
        return "OK";
#define KVF_ERRNO_NAME(name, value, text)                                                          \
    case KVF_##name:                                                                               \
        return #name;
        KVF_ERRNO_MAP(KVF_ERRNO_NAME)
#undef KVF_ERRNO_NAME
    default:
        return "EUNKNOWN";
    }
}

int kvf_error_set(kvf_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* One sentence on one line: a path or a name taken from the input (a file name, a
         * tensor key) may hold a newline or another control byte. */
        for (char *p = err->msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
        err->code = code;
    }
    return code;
}

void kvf_error_clear(kvf_error *err) {
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}
