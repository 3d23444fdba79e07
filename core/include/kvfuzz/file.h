/* Whole-file reading, shared by every module that loads a file (case files, corpus entries,
 * statistics, finding reports).
 *
 * Ownership: on success *data is a malloc'd buffer the caller frees, with a NUL byte after the
 * *size bytes read (so text can be parsed in place; binary callers ignore it).
 * Errors: -1 with errno set (ENOENT and the like from fopen, ENOMEM, EIO for a read error);
 * *data and *size are then untouched. */
#ifndef KVFUZZ_FILE_H
#define KVFUZZ_FILE_H

#include <stddef.h>

int kvf_read_file(const char *path, char **data, size_t *size);

#endif
