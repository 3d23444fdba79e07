/* Case files: kvf_case_load reads, decodes and builds a .kvfz file, refusing one whose case
 * could not fit the memory budget before reading it; kvf_spec_save writes one atomically. The
 * bytes are spec_codec.c's; the budgets are cost.c's. */
#include "kvfuzz/spec.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "kvfuzz/file.h"

int kvf_case_load(const char *path, kvf_spec *spec_out, kvf_case *case_out, const kvf_limits *lim,
                  kvf_error *err) {
    char *text;
    size_t size;
    /* A case file holds at most its explicit tensors (q and the resident pages of both
     * caches, within max_resident_bytes) plus a table and a header. */
    const size_t max_file = (size_t)lim->max_resident_bytes * 2 + ((size_t)64 << 20);
    /* The case a file holds takes at least twice its size (the case and the kernel's copy,
     * docs/case-format.md, "Budgets"): a larger file is refused before it is read. */
    int64_t max_memory = 0, max_work = 0;
    int brc = kvf_limits_budgets(lim, &max_memory, &max_work, err);
    if (brc) return brc;
    struct stat st;
    char file_size[KVF_SIZE_TEXT_MAX], budget[KVF_SIZE_TEXT_MAX];
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (int64_t)st.st_size > max_memory / 2)
        return kvf_error_set(err, KVF_ELIMIT,
                             "%s is %s; the case it holds needs at least twice that, past the "
                             "memory budget of %s (KVF_MAX_MEMORY_MIB raises it)",
                             path, kvf_size_text((int64_t)st.st_size, file_size),
                             kvf_size_text(max_memory, budget));
    int rrc = kvf_read_file_max(path, max_file, &text, &size, err);
    if (rrc) return rrc;
    uint8_t *buf = (uint8_t *)text;
    kvf_spec spec;
    int rc = kvf_spec_decode(&spec, buf, size, lim, err);
    free(buf);
    if (rc) return rc;
    if (case_out) rc = kvf_case_build(case_out, &spec, lim, err);
    if (!rc && spec_out)
        *spec_out = spec;
    else
        kvf_spec_free(&spec);
    return rc;
}

int kvf_spec_save(const kvf_spec *s, const char *path, kvf_error *err) {
    uint8_t *data;
    size_t size;
    int rc = kvf_spec_encode(s, &data, &size, err);
    if (rc) return rc;
    rc = kvf_write_atomic_bytes(path, data, size, err);
    free(data);
    return rc;
}
