/* fuzz_safetensors: every byte string either parses as a safetensors file whose tensors tile
 * its data section and re-encode to a file that parses to the same tensors and metadata, or is
 * rejected with one sentence, with no memory error or undefined behaviour on the way (built
 * with ASan + UBSan). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noinline)) static void violation(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_safetensors: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void check_message(const kvf_error *err, int rc) {
    if (rc >= 0) violation("a rejection returned a non-negative code", NULL);
    if (!err->msg[0]) violation("a rejection came without a message", NULL);
    if (strchr(err->msg, '\n')) violation("a rejection message spans lines", err->msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kvf_st_file f, g;
    kvf_error err = {0};
    int rc = kvf_st_parse(&f, data, size, "input", &err);
    if (rc) {
        check_message(&err, rc);
        return 0;
    }
    /* Every tensor lies inside the input and the ranges add up to the data section. */
    uint64_t total = 0;
    for (size_t i = 0; i < f.count; i++) {
        const kvf_st_tensor *t = &f.tensors[i];
        if (t->data < data || t->data + t->nbytes > data + size)
            violation("a tensor points outside the input", t->name);
        if ((uint64_t)t->elems * kvf_st_dtype_size(t->dtype) != t->nbytes)
            violation("a tensor's size disagrees with its shape", t->name);
        total += t->nbytes;
    }
    if (total > size) violation("the tensors hold more bytes than the input", NULL);
    unsigned sum = 0;
    for (size_t i = 0; i < f.count; i++)
        for (uint64_t b = 0; b < f.tensors[i].nbytes; b++)
            sum += f.tensors[i].data[b]; /* ASan sees any range past the end */
    if (sum == 0xFFFFFFFFu) fputc(' ', stderr);

    kvf_st_out *outs = calloc(f.count ? f.count : 1, sizeof *outs);
    if (!outs) return 0;
    for (size_t i = 0; i < f.count; i++) {
        outs[i].name = f.tensors[i].name;
        outs[i].dtype = f.tensors[i].dtype;
        outs[i].rank = f.tensors[i].rank;
        memcpy(outs[i].shape, f.tensors[i].shape, sizeof outs[i].shape);
        outs[i].data = f.tensors[i].data;
    }
    uint8_t *bytes;
    size_t n;
    if (kvf_st_encode(outs, f.count, (const char *const *)f.meta_keys,
                      (const char *const *)f.meta_values, f.meta_count, &bytes, &n, &err))
        violation("a parsed file does not encode", err.msg);
    if (kvf_st_parse(&g, bytes, n, "re-encoded input", &err))
        violation("an encoded file does not parse", err.msg);
    if (g.count != f.count || g.meta_count != f.meta_count)
        violation("re-encoding changed the number of tensors or metadata entries", NULL);
    for (size_t i = 0; i < f.count; i++) {
        const kvf_st_tensor *a = &f.tensors[i], *b = kvf_st_find(&g, a->name);
        if (!b || a->dtype != b->dtype || a->rank != b->rank ||
            memcmp(a->shape, b->shape, sizeof a->shape) != 0 || a->nbytes != b->nbytes ||
            (a->nbytes && memcmp(a->data, b->data, a->nbytes) != 0))
            violation("re-encoding changed a tensor", a->name);
    }
    for (size_t i = 0; i < f.meta_count; i++) {
        const char *v = kvf_st_meta(&g, f.meta_keys[i]);
        if (!v || strcmp(v, f.meta_values[i]) != 0)
            violation("re-encoding changed the metadata", f.meta_keys[i]);
    }
    kvf_st_free(&g);
    free(bytes);
    free(outs);
    kvf_st_free(&f);
    return 0;
}
