/* The safetensors container (docs/fib.md, "safetensors"): an 8-byte little-endian header size
 * N, N bytes of JSON header ({name: {dtype, shape, data_offsets: [begin, end]}, optional
 * "__metadata__": {string: string}}), then the data section the offsets point into.
 *
 * The reader checks everything before a caller sees a tensor: N at most 100 MB
 * (KVF_ST_MAX_HEADER, the limit of the reference implementation) and within the file, the
 * header a JSON object without duplicate keys, every dtype in the table below, every shape a
 * list of at most KVF_ST_MAX_RANK non-negative integers, every tensor's element count times
 * its dtype size equal to its byte range, and the ranges together tiling the data section
 * exactly: no overlap, no gap, nothing past the end and nothing left over. A Git LFS pointer
 * file (the text git leaves where it has not pulled the data) is recognised and named.
 *
 * Ownership: kvf_st_parse fills a caller-owned kvf_st_file whose tensors point into the bytes
 * given (the caller keeps them alive); kvf_st_load reads a file and the kvf_st_file owns the
 * bytes. kvf_st_free releases what either allocated; a zeroed struct is fine. kvf_st_write
 * copies nothing it is given and writes the file atomically (core's kvf_write_atomic).
 * Errors, one sentence each: KVF_EFORMAT (not a safetensors file, with the first thing that is
 * wrong), KVF_ELIMIT (header over 100 MB, file over the caller's size limit), KVF_EIO (cannot
 * read or write), KVF_ENOMEM. */
#ifndef KVFUZZ_SAFETENSORS_H
#define KVFUZZ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/error.h"

#define KVF_ST_MAX_HEADER ((uint64_t)100000000) /* bytes of header JSON */
#define KVF_ST_MAX_RANK 8

typedef enum kvf_st_dtype {
    KVF_ST_BOOL = 0,
    KVF_ST_U8,
    KVF_ST_I8,
    KVF_ST_F8_E5M2,
    KVF_ST_F8_E4M3,
    KVF_ST_I16,
    KVF_ST_U16,
    KVF_ST_F16,
    KVF_ST_BF16,
    KVF_ST_I32,
    KVF_ST_U32,
    KVF_ST_F32,
    KVF_ST_F64,
    KVF_ST_I64,
    KVF_ST_U64,
    KVF_ST_DTYPE_COUNT
} kvf_st_dtype;

/* "BF16", "I32", ... and bytes per element; NULL / 0 for a value outside the table. */
const char *kvf_st_dtype_name(int dtype);
size_t kvf_st_dtype_size(int dtype);
/* The dtype named by a safetensors string, or -1. */
int kvf_st_dtype_parse(const char *name);

typedef struct kvf_st_tensor {
    char *name;
    int dtype; /* kvf_st_dtype */
    int rank;  /* 0 for a scalar */
    int64_t shape[KVF_ST_MAX_RANK];
    int64_t elems;
    const uint8_t *data; /* the tensor's bytes, little-endian, row-major */
    uint64_t nbytes;
} kvf_st_tensor;

typedef struct kvf_st_file {
    kvf_st_tensor *tensors; /* in header order */
    size_t count;
    char **meta_keys, **meta_values; /* "__metadata__", in header order */
    size_t meta_count;
    uint8_t *owned;     /* the file's bytes when kvf_st_load read them */
    size_t owned_bytes; /* how many */
} kvf_st_file;

/* Parses size bytes. `what` names the input in messages (a path, "the blob"). */
int kvf_st_parse(kvf_st_file *out, const uint8_t *bytes, size_t size, const char *what,
                 kvf_error *err);
/* Reads path (at most max_size bytes) and parses it. */
int kvf_st_load(kvf_st_file *out, const char *path, size_t max_size, kvf_error *err);
void kvf_st_free(kvf_st_file *f);

/* The tensor named `name`, or NULL; the metadata value for `key`, or NULL. */
const kvf_st_tensor *kvf_st_find(const kvf_st_file *f, const char *name);
const char *kvf_st_meta(const kvf_st_file *f, const char *key);

/* Whether the bytes are a Git LFS pointer file rather than data. */
int kvf_st_is_lfs_pointer(const uint8_t *bytes, size_t size);

/* One tensor to write: data holds elems(shape) * dtype size bytes, little-endian. */
typedef struct kvf_st_out {
    const char *name;
    int dtype;
    int rank;
    int64_t shape[KVF_ST_MAX_RANK];
    const void *data;
} kvf_st_out;

/* Writes tensors (in the order given, names unique) and metadata pairs (may be 0) to path
 * atomically. The header is padded with spaces to a multiple of 8 bytes so the data section
 * starts aligned, as the reference writer does. */
int kvf_st_write(const char *path, const kvf_st_out *tensors, size_t count,
                 const char *const *meta_keys, const char *const *meta_values, size_t meta_count,
                 kvf_error *err);

/* The same into a malloc'd buffer (for tests and the fuzz target). */
int kvf_st_encode(const kvf_st_out *tensors, size_t count, const char *const *meta_keys,
                  const char *const *meta_values, size_t meta_count, uint8_t **out,
                  size_t *out_size, kvf_error *err);

#endif
