/* Error codes and messages shared by every kvfuzz module.
 *
 * Convention: functions return 0 on success or a negative KVF_E* code, and when they take a
 * `kvf_error *err` (which may be NULL) they write one sentence naming what is wrong into it.
 * The message buffer is owned by the caller; nothing here allocates. */
#ifndef KVFUZZ_ERROR_H
#define KVFUZZ_ERROR_H

#include <stddef.h>

/* One table: code, name, default message. kvf_strerror() and kvf_errname() are generated from
 * it so the numbers and the words cannot drift apart. */
#define KVF_ERRNO_MAP(X)                                                                           \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(ELIMIT, -3, "size beyond the configured limit")                                              \
    X(EFORMAT, -4, "malformed case file")                                                          \
    X(EIO, -5, "input/output error")                                                               \
    X(EDEVICE, -6, "device (CUDA) error")                                                          \
    X(EUNSUPPORTED, -7, "kernel does not support this case")                                       \
    X(ENOTFOUND, -8, "not found")                                                                  \
    X(EORACLE, -9, "oracle could not certify a rounding")                                          \
    X(EKERNEL, -10, "the kernel reported an error")                                                \
    X(EUNWRITTEN, -11, "the kernel left output elements unwritten")                                \
    X(EOOBWRITE, -12, "the kernel wrote outside its buffers")                                      \
    X(EINPUTMOD, -13, "the kernel modified its input")                                             \
    X(EINTR, -14, "stopped by request")

typedef enum kvf_errno {
    KVF_OK = 0,
#define KVF_ERRNO_ENUM(name, value, text) KVF_##name = (value),
    KVF_ERRNO_MAP(KVF_ERRNO_ENUM)
#undef KVF_ERRNO_ENUM
} kvf_errno;

#define KVF_ERROR_MSG_MAX 384

typedef struct kvf_error {
    int code;                    /* 0 or a KVF_E* value */
    char msg[KVF_ERROR_MSG_MAX]; /* one sentence, no trailing newline */
} kvf_error;

/* Default text for a code ("unknown error" for anything not in the table). */
const char *kvf_strerror(int code);
/* Symbolic name such as "EFORMAT". */
const char *kvf_errname(int code);

/* Formats the message into err (if non-NULL) and returns code, so callers can write
 * `return kvf_error_set(err, KVF_EINVAL, "...", ...);`. Control bytes in the result (a newline
 * in a file name the message quotes) become '?', so the message stays on one line. */
int kvf_error_set(kvf_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Clears err (code 0, empty message). */
void kvf_error_clear(kvf_error *err);

#endif
