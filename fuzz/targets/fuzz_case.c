/* fuzz_case: every byte string either decodes to a spec that encodes back to the same bytes
 * and expands into a case that passes validation, or is rejected with one sentence, with no
 * memory error or undefined behaviour on the way (built with ASan + UBSan). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noinline)) static void violation(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_case: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void check_message(const kvf_error *err, int rc) {
    if (rc >= 0) violation("a rejection returned a non-negative code", NULL);
    if (!err->msg[0]) violation("a rejection came without a message", NULL);
    if (strchr(err->msg, '\n')) violation("a rejection message spans lines", err->msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    /* Small enough that every input expands in milliseconds; the checks do not depend on it. */
    lim.max_resident_bytes = (int64_t)8 << 20;
    kvf_spec spec, again;
    kvf_error err = {0};
    int rc = kvf_spec_decode(&spec, data, size, &lim, &err);
    if (rc) {
        check_message(&err, rc);
        return 0;
    }
    uint8_t *bytes;
    size_t n;
    if (kvf_spec_encode(&spec, &bytes, &n, &err))
        violation("a decoded spec does not encode", err.msg);
    if (n != size || memcmp(bytes, data, size) != 0)
        violation("the encoding is not canonical: encode(decode(b)) != b", NULL);
    if (kvf_spec_decode(&again, bytes, n, &lim, &err))
        violation("an encoded spec does not decode", err.msg);
    if (!kvf_spec_equal(&spec, &again)) violation("decode(encode(s)) != s", NULL);
    kvf_spec_free(&again);
    free(bytes);

    kvf_case c;
    kvf_error_clear(&err);
    rc = kvf_case_build(&c, &spec, &lim, &err);
    if (rc) {
        check_message(&err, rc);
        kvf_spec_free(&spec);
        return 0;
    }
    kvf_error_clear(&err);
    if (kvf_case_validate(&c, &lim, &err)) violation("a built case fails validation", err.msg);
    for (int64_t i = 1; i < c.num_resident_pages; i++)
        if (c.resident_pages[i] <= c.resident_pages[i - 1])
            violation("resident pages are not ascending and unique", NULL);
    if (c.num_resident_pages &&
        (c.resident_pages[0] < 0 || c.resident_pages[c.num_resident_pages - 1] >= c.num_pages))
        violation("a resident page is outside the pool", NULL);
    /* Read every used k/v element: ASan sees any page-table entry the build let through that
     * points outside the pool mapping. */
    unsigned sum = 0;
    for (int32_t b = 0; b < c.batch_size; b++) {
        int64_t len = kvf_case_seq_len(&c, b);
        for (int64_t t = 0; t < len; t++)
            for (int32_t g = 0; g < c.num_kv_heads; g++) {
                int64_t off = kvf_case_kv_offset(&c, b, t, g, 0);
                sum += c.k_cache[off] ^ c.v_cache[off + c.head_dim - 1];
            }
    }
    if (sum == 0xFFFFFFFFu) fputc(' ', stderr); /* keeps the reads */
    kvf_case_free(&c);
    kvf_spec_free(&spec);
    return 0;
}
