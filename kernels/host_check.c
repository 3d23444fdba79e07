/* The buffer layout and the post-run checks shared by the CPU and CUDA buffer hosts
 * (kernel_host.h). Everything here works on host images of the buffers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_internal.h"
#include "plugin_load.h"

int32_t *kvf__host_used_slots(const kvf_case *c, int64_t max_pages, kvf_error *err) {
    if (c->num_pages > max_pages) {
        kvf_error_set(err, KVF_ELIMIT,
                      "the page pool has %" PRId64 " pages, more than the %" PRId64
                      " the buffer host lays out",
                      c->num_pages, max_pages);
        return NULL;
    }
    int32_t *used = calloc((size_t)(c->num_pages > 0 ? c->num_pages : 1), sizeof *used);
    if (!used) {
        kvf_error_set(err, KVF_ENOMEM, "out of memory for the page map of %" PRId64 " pages",
                      c->num_pages);
        return NULL;
    }
    for (int32_t b = 0; b < c->batch_size; b++) {
        const int32_t beg = c->kv_indptr[b], end = c->kv_indptr[b + 1];
        for (int32_t e = beg; e < end; e++) {
            /* A page is read up to the last page length only where it is a sequence's last;
             * shared elsewhere it is read whole. */
            const int32_t n = e == end - 1 ? c->kv_last_page_len[b] : c->page_size;
            const int32_t p = c->kv_indices[e];
            if (n > used[p]) used[p] = n;
        }
    }
    return used;
}

void kvf__host_fill_guard(void *p, size_t n) {
    memset(p, KVF_HOST_GUARD_BYTE, n);
}

void kvf__host_poison_o(kvf_bf16 *o, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        o[i] = (kvf_bf16)KVF_HOST_POISON_O;
}

void kvf__host_poison_lse(float *lse, int64_t n) {
    const uint32_t bits = KVF_HOST_POISON_LSE;
    for (int64_t i = 0; i < n; i++)
        memcpy(&lse[i], &bits, sizeof bits);
}

int kvf__host_check_guard(const void *guard, size_t n, const char *name, const char *side,
                          kvf_error *err) {
    const uint8_t *g = guard;
    /* Eight bytes at a time while they hold, as they do after every correct run; the byte loop
     * below names the first changed byte. */
    const uint64_t intact = 0x0101010101010101ull * KVF_HOST_GUARD_BYTE;
    size_t start = 0;
    for (; start + 8 <= n; start += 8) {
        uint64_t w;
        memcpy(&w, g + start, sizeof w);
        if (w != intact) break;
    }
    for (size_t i = start; i < n; i++)
        if (g[i] != KVF_HOST_GUARD_BYTE) {
            /* Byte i of the guard after a buffer is byte i + 1 past its end; byte i of the
             * guard before it is n - i bytes before its start. */
            const int after = side[0] == 'a';
            return kvf_error_set(err, KVF_EOOBWRITE,
                                 "the kernel wrote outside %s: byte %zu %s it changed (guard "
                                 "byte 0x%02x became 0x%02x)",
                                 name, after ? i + 1 : n - i,
                                 after ? "past its end" : "before its start", KVF_HOST_GUARD_BYTE,
                                 g[i]);
        }
    return 0;
}

int kvf__host_check_outputs(const kvf_case *c, const kvf_bf16 *o, const float *lse,
                            kvf_error *err) {
    const int64_t hq = c->num_qo_heads, d = c->head_dim;
    int64_t unwritten = 0, first = -1;
    const int64_t no = kvf_case_o_elems(c);
    for (int64_t i = 0; i < no; i++)
        if (o[i] == (kvf_bf16)KVF_HOST_POISON_O) {
            if (first < 0) first = i;
            unwritten++;
        }
    if (unwritten)
        return kvf_error_set(err, KVF_EUNWRITTEN,
                             "the kernel left %" PRId64 " of %" PRId64
                             " o elements unwritten, the first at b %" PRId64 " h %" PRId64
                             " d %" PRId64,
                             unwritten, no, first / (hq * d), first / d % hq, first % d);
    const int64_t nl = kvf_case_lse_elems(c);
    for (int64_t i = 0; i < nl; i++) {
        uint32_t bits;
        memcpy(&bits, &lse[i], sizeof bits);
        if (bits == KVF_HOST_POISON_LSE) {
            if (first < 0) first = i;
            unwritten++;
        }
    }
    if (unwritten)
        return kvf_error_set(err, KVF_EUNWRITTEN,
                             "the kernel left %" PRId64 " of %" PRId64
                             " lse elements unwritten, the first at b %" PRId64 " h %" PRId64,
                             unwritten, nl, first / hq, first % hq);
    return 0;
}

int kvf__host_supports(const kvf_plugin_kernel *desc, const kvf_plugin_shape *shape,
                       kvf_error *err) {
    char why[KVF_ERROR_MSG_MAX] = {0};
    if (kvf__plugin_kernel_supports(desc, shape, why, sizeof why - 1)) return 0;
    why[sizeof why - 1] = 0; /* kvf__plugin_kernel_supports flattened it */
    return kvf_error_set(err, KVF_EUNSUPPORTED, "%s does not support this case: %s", desc->name,
                         why[0] ? why : "no reason given");
}

/* The plugin's message on one line, or `none` when it wrote nothing. */
static const char *plugin_message(char *buf, size_t n, const char *msg, const char *none) {
    snprintf(buf, n, "%s", msg ? msg : "");
    kvf__plugin_text_flatten(buf);
    return buf[0] ? buf : none;
}

int kvf__host_create_failed(const kvf_plugin_kernel *desc, int status, const char *msg,
                            kvf_error *err) {
    char buf[KVF_ERROR_MSG_MAX];
    return kvf_error_set(err, status == KVF_PLUGIN_NOMEM ? KVF_ENOMEM : KVF_EKERNEL,
                         "%s could not start: %s", desc->name,
                         plugin_message(buf, sizeof buf, msg, "create() failed without a message"));
}

int kvf__host_status(const kvf_plugin_kernel *desc, int status, const char *msg, const char *what,
                     kvf_error *err) {
    char buf[KVF_ERROR_MSG_MAX];
    const char *m =
        status == KVF_PLUGIN_OK ? "" : plugin_message(buf, sizeof buf, msg, "no message");
    switch (status) {
    case KVF_PLUGIN_OK:
        return 0;
    case KVF_PLUGIN_UNSUPPORTED:
        /* The host asked supports() first, so a refusal now contradicts it. */
        return kvf_error_set(err, KVF_EKERNEL,
                             "%s claims support it lacks: supports() accepted the case but %s() "
                             "refused it (%s)",
                             desc->name, what, m);
    case KVF_PLUGIN_NOMEM:
        return kvf_error_set(err, KVF_ENOMEM, "%s ran out of memory in %s(): %s", desc->name, what,
                             m);
    default:
        return kvf_error_set(err, KVF_EKERNEL, "%s reported an error from %s(): %s", desc->name,
                             what, m);
    }
}

int kvf__host_workspace_bytes(const kvf_plugin_kernel *desc, void *state,
                              const kvf_plugin_shape *shape, size_t *bytes, kvf_error *err) {
    *bytes = desc->workspace_bytes ? desc->workspace_bytes(state, shape) : 0;
    if (*bytes > KVF_PLUGIN_MAX_WORKSPACE_BYTES)
        return kvf_error_set(err, KVF_EKERNEL,
                             "%s asks for a workspace of %zu bytes, over kvfuzz's limit of %zu "
                             "(64 GiB)",
                             desc->name, *bytes, (size_t)KVF_PLUGIN_MAX_WORKSPACE_BYTES);
    return 0;
}

int kvf__host_check_case(const kvf_case *c, kvf_error *err) {
    if (c->num_qo_heads < 1 || c->num_kv_heads < 1 || c->num_qo_heads % c->num_kv_heads != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads %d is not a positive multiple of num_kv_heads %d",
                             c->num_qo_heads, c->num_kv_heads);
    if (c->head_dim < 1 || c->page_size < 1 || c->batch_size < 0 || c->num_pages < 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "head_dim %d, page_size %d, batch_size %d or num_pages %lld is out "
                             "of range",
                             c->head_dim, c->page_size, c->batch_size, (long long)c->num_pages);
    if (!c->kv_indptr || (c->batch_size > 0 && (!c->q || !c->kv_last_page_len)))
        return kvf_error_set(err, KVF_EINVAL, "the case has no q, kv_indptr or kv_last_page_len");
    if (c->kv_indptr[0] != 0)
        return kvf_error_set(err, KVF_EINVAL, "kv_indptr[0] is %d, not 0", c->kv_indptr[0]);
    for (int32_t b = 0; b < c->batch_size; ++b) {
        const int32_t n = c->kv_indptr[b + 1] - c->kv_indptr[b];
        if (c->kv_indptr[b + 1] < c->kv_indptr[b])
            return kvf_error_set(err, KVF_EINVAL, "kv_indptr decreases at index %d (%d < %d)",
                                 b + 1, c->kv_indptr[b + 1], c->kv_indptr[b]);
        const int32_t last = c->kv_last_page_len[b];
        if (n > 0 && (last < 1 || last > c->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] is %d, outside [1, page_size = %d]", b, last,
                                 c->page_size);
        if (n == 0 && (last < 0 || last > c->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] is %d for an empty sequence, outside [0, "
                                 "page_size = %d]",
                                 b, last, c->page_size);
    }
    const int64_t entries = c->kv_indptr[c->batch_size];
    if (entries > 0 && !c->kv_indices)
        return kvf_error_set(err, KVF_EINVAL, "the case has no kv_indices");
    for (int64_t i = 0; i < entries; ++i)
        if (c->kv_indices[i] < 0 || c->kv_indices[i] >= c->num_pages)
            return kvf_error_set(err, KVF_EINVAL, "kv_indices[%lld] is %d, outside [0, %lld)",
                                 (long long)i, c->kv_indices[i], (long long)c->num_pages);
    /* 128-bit: P * page bytes can pass 2^64 for absurd shapes; such a pool is never real. */
    const unsigned __int128 need =
        (unsigned __int128)c->num_pages * (uint64_t)kvf_case_page_elems(c) * 2u;
    if (need > ((unsigned __int128)1 << 62))
        return kvf_error_set(err, KVF_EUNSUPPORTED, "the page pool (%lld pages) is too large",
                             (long long)c->num_pages);
    return 0;
}
