/* Whole-file reading and atomic writing, shared by every module that loads or writes a file
 * (case files, corpus entries, statistics, reports, finding reports).
 *
 * Ownership: on success *data is a malloc'd buffer the caller frees, with a NUL byte after the
 * *size bytes read (so text can be parsed in place; binary callers ignore it); on error *data
 * and *size are untouched. Only regular files are read: a FIFO, a device or a directory is
 * refused at once (a FIFO is opened without waiting for a writer), and the size is checked
 * against the limit (fstat) before a byte is read. */
#ifndef KVFUZZ_FILE_H
#define KVFUZZ_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "kvfuzz/error.h"

#define KVF_READ_FILE_DEFAULT_MAX ((size_t)1 << 30)

/* Errors, one sentence naming the path: KVF_EINVAL (not a regular file), KVF_ELIMIT (larger
 * than max_size), KVF_EIO (cannot open or read), KVF_ENOMEM. */
int kvf_read_file_max(const char *path, size_t max_size, char **data, size_t *size, kvf_error *err);

/* kvf_read_file_max with KVF_READ_FILE_DEFAULT_MAX; -1 with errno set (ENOENT and the like,
 * EINVAL for a file that is not regular or too large, ENOMEM, EIO). */
int kvf_read_file(const char *path, char **data, size_t *size);

/* Replaces path atomically: fill() writes the content to a temporary file in the same
 * directory and returns 0 (or nonzero, errno set, to abandon the write); the file is flushed,
 * fsync'd, renamed over path, and the directory is fsync'd. A reader sees the old file or the
 * new one, never a mix; on any failure the old file is left as it was. Errors: KVF_EIO (or
 * KVF_ENOMEM) with one sentence naming path; KVF_EINVAL when path is a device, a FIFO, a
 * socket or a directory, which is never replaced. */
int kvf_write_atomic(const char *path, int (*fill)(FILE *f, void *ctx), void *ctx, kvf_error *err);

/* The same for bytes already in memory. */
int kvf_write_atomic_bytes(const char *path, const void *data, size_t size, kvf_error *err);

/* How the _ex writers put the file in place. */
typedef enum kvf_write_mode {
    KVF_WRITE_REPLACE = 0,   /* rename() over path, as kvf_write_atomic does */
    KVF_WRITE_KEEP_EXISTING, /* link() to path: when path exists it is kept and nothing is
                                written, so of several writers of one name (other processes
                                included) the first wins */
} kvf_write_mode;

/* kvf_write_atomic and kvf_write_atomic_bytes with a mode. *created (may be NULL) is 1 when this
 * call put the file in place, 0 when KVF_WRITE_KEEP_EXISTING found path there or on an error.
 * The directory is fsync'd whenever the file was put in place. */
int kvf_write_atomic_ex(const char *path, kvf_write_mode mode, int (*fill)(FILE *f, void *ctx),
                        void *ctx, int *created, kvf_error *err);
int kvf_write_atomic_bytes_ex(const char *path, kvf_write_mode mode, const void *data, size_t size,
                              int *created, kvf_error *err);

/* Copies path into out (size bytes) with glob(3)'s special characters (* ? [ \\) escaped, so
 * a folder named "data[1]" is matched as itself when a pattern is built on it. 0, or -1 when
 * it does not fit. */
int kvf_glob_escape(const char *path, char *out, size_t size);

/* Creates dir and every missing folder above it (mkdir -p). Errors: KVF_EIO with one sentence
 * naming the path that could not be made, or saying it exists and is not a folder. */
int kvf_mkdirs(const char *dir, kvf_error *err);

/* Removes dir and everything below it, without following symbolic links (rm -r). 0, or -1 when
 * something could not be removed (what could be is gone). */
int kvf_remove_tree(const char *dir);

#endif
