/* Whole-file reading, shared by every module that loads a file (case files, corpus entries,
 * statistics, finding reports).
 *
 * Ownership: on success *data is a malloc'd buffer the caller frees, with a NUL byte after the
 * *size bytes read (so text can be parsed in place; binary callers ignore it); on error *data
 * and *size are untouched. Only regular files are read: a FIFO, a device or a directory is
 * refused at once (a FIFO is opened without waiting for a writer), and the size is checked
 * against the limit (fstat) before a byte is read. */
#ifndef KVFUZZ_FILE_H
#define KVFUZZ_FILE_H

#include <stddef.h>

#include "kvfuzz/error.h"

#define KVF_READ_FILE_DEFAULT_MAX ((size_t)1 << 30)

/* Errors, one sentence naming the path: KVF_EINVAL (not a regular file), KVF_ELIMIT (larger
 * than max_size), KVF_EIO (cannot open or read), KVF_ENOMEM. */
int kvf_read_file_max(const char *path, size_t max_size, char **data, size_t *size, kvf_error *err);

/* kvf_read_file_max with KVF_READ_FILE_DEFAULT_MAX; -1 with errno set (ENOENT and the like,
 * EINVAL for a file that is not regular or too large, ENOMEM, EIO). */
int kvf_read_file(const char *path, char **data, size_t *size);

#endif
