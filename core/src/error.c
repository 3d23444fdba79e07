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
