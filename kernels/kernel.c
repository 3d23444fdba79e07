/* Running kernels and resolving --kernel arguments (kernel.h): the one path every kernel takes.
 * A kernel with a descriptor runs through the buffer host; a plugin kernel is a descriptor
 * found in its library when the process that runs it creates it; a kernel with only the
 * case-level vtable calls it directly. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvfuzz/kernel.h"
#include "kvfuzz/kernel_host.h"
#include "kvfuzz/relation.h"
#include "plugin_load.h"
#include "plugin_probe.h"
#ifdef KVF_HAVE_PYTHON_KERNELS
#include "python/python_kernel.h"
#endif

#define SUPPORTS_MEMO 1024

typedef struct memo_slot {
    int filled;
    kvf_plugin_shape shape;
    int answer;
    char why[160];
} memo_slot;

/* What a plugin kernel carries: its library, its name there, the probe shared by every kernel
 * of that library (owned by the first), and the answers supports() gave. */
struct kvf__plugin_ref {
    char *path;
    char *kernel_name;
    uint32_t index;
    kvf__probe *probe; /* one reference held */
    pthread_mutex_t mu;
    memo_slot *memo;
};

/* The state behind a kernel with a descriptor: the host, and for a plugin its library. */
typedef struct hosted {
    kvf__plugin_lib lib;
    const kvf_plugin_kernel *desc;
    kvf_host *host;
} hosted;

static int hosted_kernel(const kvf_kernel *k) {
    return k->desc != NULL || k->plugin != NULL;
}

int kvf_kernel_create(const kvf_kernel *k, void **state, kvf_error *err) {
    *state = NULL;
    if (!hosted_kernel(k)) return k->create ? k->create(state, err) : 0;
    hosted *h = calloc(1, sizeof *h);
    if (!h) return kvf_error_set(err, KVF_ENOMEM, "out of memory for kernel %s", k->name);
    const kvf_plugin_kernel *desc = k->desc;
    if (!desc) {
        int rc = kvf__plugin_open(k->plugin->path, &h->lib, err);
        if (rc) {
            free(h);
            return rc;
        }
        int i = kvf__plugin_kernel_index(h->lib.desc, k->plugin->kernel_name);
        if (i < 0) {
            kvf__plugin_close(&h->lib);
            free(h);
            return kvf_error_set(err, KVF_ENOTFOUND, "plugin %s no longer lists kernel %s",
                                 k->plugin->path, k->plugin->kernel_name);
        }
        desc = kvf__plugin_kernel_at(h->lib.desc, (uint32_t)i);
    }
    h->desc = desc;
    int rc = kvf_host_create(desc, &h->host, err);
    if (rc) {
        /* Not closed: the plugin's create() may have run, and plugin.h promises that a library
         * whose kernel kvfuzz has called stays mapped until the process exits. */
        free(h);
        return rc;
    }
    *state = h;
    return 0;
}

int kvf_kernel_concurrent_states(const kvf_kernel *k, void *state) {
    if (!hosted_kernel(k)) return k->concurrent_states > 1 ? k->concurrent_states : 1;
    if (!state) return 1;
    const int32_t n = kvf__plugin_kernel_states(((hosted *)state)->desc);
    return n > 1 ? (int)n : 1;
}

int kvf_kernel_run(const kvf_kernel *k, void *state, const kvf_case *c, kvf_bf16 *o, float *lse,
                   kvf_error *err) {
    if (!hosted_kernel(k)) return k->run(state, c, o, lse, err);
    return kvf_host_run(((hosted *)state)->host, c, o, lse, err);
}

int kvf_kernel_takes_layouts(const kvf_kernel *k) {
    return k->device != KVF_DEVICE_CUDA;
}

int kvf_kernel_takes_quant(const kvf_kernel *k) {
    if (k->desc)
        return (kvf__plugin_kernel_kv_dtypes(k->desc) & ~1u) != 0 &&
               (kvf__plugin_kernel_scale_granularities(k->desc) & ~1u) != 0;
    if (!k->plugin) return 0; /* a case-level kernel reads bf16 only */
    /* A plugin kernel's masks live in its probe: ask it about a small shape, FP8 with
     * per-tensor scales, beside the same shape in bf16 (a kernel that declines both says
     * nothing of FP8, so its cases decide). */
    kvf_plugin_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.struct_size = sizeof sh;
    sh.num_qo_heads = sh.num_kv_heads = 1;
    sh.head_dim = 128;
    sh.page_size = 16;
    sh.batch_size = sh.num_pages = sh.num_entries = 1;
    sh.total_tokens = sh.max_seq_len = 16;
    sh.sm_scale = 0.125f;
    kvf_kernel_shape_dense_strides(&sh);
    char why[KVF_ERROR_MSG_MAX];
    if (kvf_kernel_supports(k, &sh, why, sizeof why) != 1) return 1;
    sh.k_dtype = sh.v_dtype = KVF_KV_E4M3;
    sh.scale_granularity = KVF_SCALE_TENSOR;
    return kvf_kernel_supports(k, &sh, why, sizeof why) == 1;
}

int kvf_kernel_compiles_per_shape(const kvf_kernel *k) {
#ifdef KVF_HAVE_PYTHON_KERNELS
    return k->release == kvf__python_kernel_free && kvf__python_kernel_on_gpu(k);
#else
    (void)k;
    return 0;
#endif
}

int kvf_kernel_can_graph_replay(const kvf_kernel *k) {
    return k->device == KVF_DEVICE_CUDA && hosted_kernel(k);
}

int kvf_kernel_graph_replay(const kvf_kernel *k, void *state, const kvf_case *capture,
                            const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    if (!kvf_kernel_can_graph_replay(k))
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "graph replay applies to CUDA kernels run through the buffer host; "
                             "%s is not one",
                             k->name);
    return kvf_host_graph_replay(((hosted *)state)->host, capture, c, o, lse, err);
}

int kvf_kernel_overlaps(const kvf_kernel *k, void *state) {
    if (!hosted_kernel(k)) return k->submit && k->collect;
    return state && kvf_host_overlaps(((hosted *)state)->host);
}

int kvf_kernel_submit(const kvf_kernel *k, void *state, const kvf_case *c, kvf_error *err) {
    if (!kvf_kernel_overlaps(k, state))
        return kvf_error_set(err, KVF_EINVAL, "%s does not run in two phases", k->name);
    if (!hosted_kernel(k)) return k->submit(state, c, err);
    return kvf_host_submit(((hosted *)state)->host, c, err);
}

int kvf_kernel_collect(const kvf_kernel *k, void *state, kvf_bf16 *o, float *lse, kvf_error *err) {
    if (!kvf_kernel_overlaps(k, state))
        return kvf_error_set(err, KVF_EINVAL, "%s does not run in two phases", k->name);
    if (!hosted_kernel(k)) return k->collect(state, o, lse, err);
    return kvf_host_collect(((hosted *)state)->host, o, lse, err);
}

void kvf_kernel_destroy(const kvf_kernel *k, void *state) {
    if (!hosted_kernel(k)) {
        if (k->destroy) k->destroy(state);
        return;
    }
    hosted *h = state;
    if (!h) return;
    kvf_host_destroy(h->host);
    /* The library stays mapped: a plugin may have registered exit-time work (CUDA's runtime
     * does) that must not find its code gone. */
    free(h);
}

void kvf_kernel_describe(const kvf_kernel *k, void *state, char *buf, size_t buf_size) {
    if (!buf_size) return;
    buf[0] = 0;
    if (hosted_kernel(k) && state) kvf_host_describe(((hosted *)state)->host, buf, buf_size);
}

int kvf_kernel_run_once(const kvf_kernel *kernel, const kvf_case *c, kvf_bf16 *o, float *lse,
                        kvf_error *err) {
    void *state = NULL;
    int rc = kvf_kernel_create(kernel, &state, err);
    if (rc) return rc;
    rc = kvf_kernel_run(kernel, state, c, o, lse, err);
    kvf_kernel_destroy(kernel, state);
    return rc;
}

/* The shape's strides under layout l. */
static void set_strides(kvf_plugin_shape *s, const kvf_layout *l) {
    kvf_strides st;
    kvf_layout_strides(l, s->num_qo_heads, s->num_kv_heads, s->head_dim, s->page_size, &st);
    s->q_stride_batch = st.q_batch, s->q_stride_head = st.q_head;
    s->kv_stride_page = st.kv_page, s->kv_stride_slot = st.kv_slot, s->kv_stride_head = st.kv_head;
    s->o_stride_batch = st.o_batch, s->o_stride_head = st.o_head;
    s->lse_stride_batch = st.lse_batch;
}

void kvf_kernel_shape_dense_strides(kvf_plugin_shape *s) {
    const kvf_layout dense = {0};
    set_strides(s, &dense);
}

int kvf_kernel_graph_relation_run(const kvf_kernel *k, void *state, const kvf_case *c,
                                  uint64_t seed, const kvf_limits *lim, kvf_bf16 *o, float *lse,
                                  kvf_error *err) {
    kvf_relation_pair p;
    int rc = kvf_relation_derive(&p, KVF_RELATION_GRAPH_REPLAY, c, seed, lim, err);
    if (!rc) rc = kvf_kernel_graph_replay(k, state, &p.derived, c, o, lse, err);
    kvf_relation_pair_free(&p);
    return rc;
}

void kvf_kernel_shape(const kvf_case *c, kvf_plugin_shape *s) {
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->num_qo_heads = c->num_qo_heads;
    s->num_kv_heads = c->num_kv_heads;
    s->head_dim = c->head_dim;
    s->page_size = c->page_size;
    s->batch_size = c->batch_size;
    s->num_pages = c->num_pages;
    s->num_entries = c->kv_indptr ? c->kv_indptr[c->batch_size] : 0;
    s->total_tokens = kvf_case_total_tokens(c);
    s->max_seq_len = kvf_case_max_seq_len(c);
    s->sm_scale = c->sm_scale;
    set_strides(s, &c->layout);
    s->k_dtype = c->quant.k_dtype;
    s->v_dtype = c->quant.v_dtype;
    s->scale_granularity = c->quant.granularity;
}

/* FNV-1a over the shape's fields (not its padding). */
static uint64_t shape_hash(const kvf_plugin_shape *s) {
    const int64_t f[] = {
        s->num_qo_heads,     s->num_kv_heads,   s->head_dim,       s->page_size,
        s->batch_size,       s->num_pages,      s->num_entries,    s->total_tokens,
        s->max_seq_len,      s->q_stride_batch, s->q_stride_head,  s->kv_stride_page,
        s->kv_stride_slot,   s->kv_stride_head, s->o_stride_batch, s->o_stride_head,
        s->lse_stride_batch, s->k_dtype,        s->v_dtype,        s->scale_granularity};
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)f;
    for (size_t i = 0; i < sizeof f; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    uint32_t scale;
    memcpy(&scale, &s->sm_scale, sizeof scale);
    return (h ^ scale) * 1099511628211ull;
}

static int shape_equal(const kvf_plugin_shape *a, const kvf_plugin_shape *b) {
    return a->num_qo_heads == b->num_qo_heads && a->num_kv_heads == b->num_kv_heads &&
           a->head_dim == b->head_dim && a->page_size == b->page_size &&
           a->batch_size == b->batch_size && a->num_pages == b->num_pages &&
           a->num_entries == b->num_entries && a->total_tokens == b->total_tokens &&
           a->max_seq_len == b->max_seq_len &&
           memcmp(&a->sm_scale, &b->sm_scale, sizeof a->sm_scale) == 0 &&
           a->q_stride_batch == b->q_stride_batch && a->q_stride_head == b->q_stride_head &&
           a->kv_stride_page == b->kv_stride_page && a->kv_stride_slot == b->kv_stride_slot &&
           a->kv_stride_head == b->kv_stride_head && a->o_stride_batch == b->o_stride_batch &&
           a->o_stride_head == b->o_stride_head && a->lse_stride_batch == b->lse_stride_batch &&
           a->k_dtype == b->k_dtype && a->v_dtype == b->v_dtype &&
           a->scale_granularity == b->scale_granularity;
}

int kvf_kernel_supports(const kvf_kernel *k, const kvf_plugin_shape *shape, char *why,
                        size_t why_size) {
    if (why && why_size) why[0] = 0;
    if (k->desc) {
        char buf[KVF_ERROR_MSG_MAX] = {0};
        int yes = kvf__plugin_kernel_supports(k->desc, shape, buf, sizeof buf - 1);
        if (!yes && why && why_size) snprintf(why, why_size, "%s", buf);
        return yes ? 1 : 0;
    }
    if (!k->plugin) return 1;
    kvf__plugin_ref *r = k->plugin;
    memo_slot *slot = &r->memo[shape_hash(shape) % SUPPORTS_MEMO];
    pthread_mutex_lock(&r->mu);
    if (slot->filled && shape_equal(&slot->shape, shape)) {
        int a = slot->answer;
        if (!a && why && why_size) snprintf(why, why_size, "%s", slot->why);
        pthread_mutex_unlock(&r->mu);
        return a;
    }
    pthread_mutex_unlock(&r->mu);
    char buf[160] = {0};
    int a = kvf__probe_supports(r->probe, r->index, shape, buf, sizeof buf);
    if (a < 0) return a;
    pthread_mutex_lock(&r->mu);
    slot->filled = 1;
    slot->shape = *shape;
    slot->answer = a;
    snprintf(slot->why, sizeof slot->why, "%s", buf);
    pthread_mutex_unlock(&r->mu);
    if (!a && why && why_size) snprintf(why, why_size, "%s", buf);
    return a;
}

/* ---- resolving ------------------------------------------------------------------------------ */

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Whether spec names a plugin library: a path (it has a slash), or ends in .so. */
static int looks_like_library(const char *path) {
    return strchr(path, '/') != NULL || has_suffix(path, ".so") || strstr(path, ".so.") != NULL;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void plugin_kernel_release(kvf_kernel *k) {
    kvf__plugin_ref *r = k->plugin;
    kvf__probe_stop(r->probe);
    pthread_mutex_destroy(&r->mu);
    free(r->path);
    free(r->kernel_name);
    free(r->memo);
    free(r);
    free((char *)k->name);
    free((char *)k->description);
    free((char *)k->precision);
    free((char *)k->promises);
    free((char *)k->models);
    free(k);
}

static kvf_kernel *plugin_kernel_new(const char *path, const kvf__probe_kernel *pk, uint32_t index,
                                     kvf__probe *probe) {
    kvf_kernel *k = calloc(1, sizeof *k);
    kvf__plugin_ref *r = calloc(1, sizeof *r);
    size_t n = strlen(path) + strlen(pk->name) + 2;
    char *name = malloc(n);
    char *desc = dup_str(pk->description);
    if (r) {
        r->path = dup_str(path);
        r->kernel_name = dup_str(pk->name);
        r->memo = calloc(SUPPORTS_MEMO, sizeof *r->memo);
    }
    if (!k || !r || !name || !desc || !r->path || !r->kernel_name || !r->memo) {
        if (r) {
            free(r->path);
            free(r->kernel_name);
            free(r->memo);
        }
        free(k);
        free(r);
        free(name);
        free(desc);
        return NULL;
    }
    snprintf(name, n, "%s:%s", path, pk->name);
    r->index = index;
    r->probe = probe;
    kvf__probe_retain(probe);
    pthread_mutex_init(&r->mu, NULL);
    k->name = name;
    k->description = desc;
    k->device = pk->device == KVF_PLUGIN_DEVICE_CUDA ? KVF_DEVICE_CUDA : KVF_DEVICE_CPU;
    k->role = pk->role;
    k->plugin = r;
    k->release = plugin_kernel_release;
    /* A failed copy of the declared model would judge the kernel under f32 without a word:
     * treated as the allocation failure it is. */
    /* A mutant is a kernel with a bug class (kvf_kernel.models), named or not. */
    const char *models = pk->models[0] ? pk->models : "plugin";
    if ((pk->precision[0] && !(k->precision = dup_str(pk->precision))) ||
        (pk->promises[0] && !(k->promises = dup_str(pk->promises))) ||
        (pk->role == KVF_PLUGIN_ROLE_MUTANT && !(k->models = dup_str(models)))) {
        plugin_kernel_release(k);
        return NULL;
    }
    return k;
}

int kvf_kernel_list_push(kvf_kernel_list *list, const kvf_kernel *k, kvf_error *err) {
    if (list->count == list->cap) {
        /* Doubling: a plugin's thousands of kernels cost a dozen reallocations. */
        size_t cap = list->cap ? list->cap * 2 : 8;
        const kvf_kernel **items =
            cap > SIZE_MAX / sizeof *items ? NULL : realloc(list->items, cap * sizeof *items);
        if (!items) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernel list");
        list->items = items;
        list->cap = cap;
    }
    list->items[list->count++] = k;
    return 0;
}

void kvf_kernel_list_free(kvf_kernel_list *list) {
    for (size_t i = 0; i < list->count; i++)
        kvf_kernel_free(list->items[i]);
    free(list->items);
    memset(list, 0, sizeof *list);
}

/* Releases the kernels appended after `from`, leaving the list as it was then. */
static void list_truncate(kvf_kernel_list *list, size_t from) {
    while (list->count > from)
        kvf_kernel_free(list->items[--list->count]);
}

static int resolve_plugin(const char *path, const char *only, kvf_kernel_list *list,
                          kvf_error *err) {
    kvf__probe *probe = NULL;
    kvf__probe_kernel *probed = NULL;
    uint32_t n = 0;
    int rc = kvf__probe_start(path, &probe, &probed, &n, err);
    if (rc) return rc;
    const size_t before = list->count;
    for (uint32_t i = 0; i < n && !rc; i++) {
        if (only && strcmp(probed[i].name, only) != 0) continue;
        kvf_kernel *k = plugin_kernel_new(path, &probed[i], i, probe);
        if (!k) {
            rc = kvf_error_set(err, KVF_ENOMEM, "out of memory for plugin kernels");
            break;
        }
        if ((rc = kvf_kernel_list_push(list, k, err))) kvf_kernel_free(k);
    }
    if (!rc && only && list->count == before) {
        char names[256] = {0};
        size_t at = 0;
        for (uint32_t i = 0; i < n && at + 2 < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                                   probed[i].name);
        rc = kvf_error_set(err, KVF_ENOTFOUND, "plugin %s has no kernel %s (it has: %s)", path,
                           only, names);
    }
    free(probed);
    if (rc) list_truncate(list, before);
    kvf__probe_stop(probe); /* the kernels hold their own references */
    return rc;
}

int kvf_kernel_resolve_list(const char *spec, kvf_kernel_lookup_fn extra, kvf_kernel_list *list,
                            kvf_error *err) {
    if (!spec || !*spec) return kvf_error_set(err, KVF_EINVAL, "an empty kernel name");
    if (strncmp(spec, "python:", 7) == 0 || has_suffix(spec, ".json")) {
#ifdef KVF_HAVE_PYTHON_KERNELS
        kvf_kernel *k = NULL;
        int rc = kvf__python_kernel_make(spec, &k, err);
        if (rc) return rc;
        k->release = kvf__python_kernel_free;
        if ((rc = kvf_kernel_list_push(list, k, err))) kvf_kernel_free(k);
        return rc;
#else
        return kvf_error_set(err, KVF_EINVAL,
                             "kernel %s is a Python kernel, and this kvfuzz was built without "
                             "Python kernel support",
                             spec);
#endif
    }
    const kvf_kernel *k = kvf_kernel_find(spec);
    if (!k && extra) k = extra(spec);
    if (k) return kvf_kernel_list_push(list, k, err);
    if (is_file(spec)) return resolve_plugin(spec, NULL, list, err);
    /* KERNEL/mut=ID of a built-in kernel names a mutant, not a file. */
    const char *mut = strstr(spec, "/mut=");
    if (mut && !is_file(spec)) {
        char base[128];
        const size_t n = (size_t)(mut - spec);
        if (n < sizeof base) {
            memcpy(base, spec, n);
            base[n] = 0;
            if (kvf_kernel_find(base) || (extra && extra(base)))
                return kvf_error_set(err, KVF_ENOTFOUND,
                                     "kernel %s has no mutant %s (`kvfuzz kernels` lists them)",
                                     base, mut + 5);
        }
    }
    /* PATH:NAME, split at the last colon (a kernel name has none). */
    const char *colon = strrchr(spec, ':');
    if (colon && !colon[1])
        return kvf_error_set(err, KVF_EINVAL,
                             "kernel %s ends with ':' and names no kernel (PATH.so:NAME)", spec);
    if (colon && colon > spec && colon[1]) {
        char path[4096];
        size_t n = (size_t)(colon - spec);
        if (n < sizeof path) {
            memcpy(path, spec, n);
            path[n] = 0;
            if (is_file(path) || looks_like_library(path))
                return resolve_plugin(path, colon + 1, list, err);
        }
    }
    if (looks_like_library(spec)) return resolve_plugin(spec, NULL, list, err);
    return kvf_error_set(err, KVF_ENOTFOUND,
                         "unknown kernel %s (`kvfuzz kernels` lists the built-in ones; a plugin "
                         "is PATH.so or PATH.so:NAME)",
                         spec);
}

/* The fixed-array form, for callers whose own limit is real (a harness's counters per kernel):
 * resolved in full first, so the limit is checked against what spec names, never half-added. */
int kvf_kernel_resolve(const char *spec, kvf_kernel_lookup_fn extra, const kvf_kernel **out,
                       size_t max, size_t *count, kvf_error *err) {
    kvf_kernel_list got = {0};
    int rc = kvf_kernel_resolve_list(spec, extra, &got, err);
    if (rc) return rc;
    if (got.count > max - (*count < max ? *count : max)) {
        kvf_kernel_list_free(&got);
        return kvf_error_set(err, KVF_ELIMIT, "too many kernels: at most %zu", max);
    }
    for (size_t i = 0; i < got.count; i++)
        out[(*count)++] = got.items[i];
    free(got.items);
    return 0;
}

void kvf_kernel_free(const kvf_kernel *k) {
    if (k && k->release) k->release((kvf_kernel *)k);
}

int kvf_kernel_load_descriptor(const kvf_kernel *k, const kvf_plugin_kernel **desc,
                               kvf_error *err) {
    if (k->desc) {
        *desc = k->desc;
        return 0;
    }
    if (!k->plugin)
        return kvf_error_set(err, KVF_EINVAL, "kernel %s has no plugin descriptor", k->name);
    kvf__plugin_lib lib; /* kept open: the descriptor lives in it */
    int rc = kvf__plugin_open(k->plugin->path, &lib, err);
    if (rc) return rc;
    int i = kvf__plugin_kernel_index(lib.desc, k->plugin->kernel_name);
    if (i < 0) {
        kvf__plugin_close(&lib);
        return kvf_error_set(err, KVF_ENOTFOUND, "plugin %s no longer lists kernel %s",
                             k->plugin->path, k->plugin->kernel_name);
    }
    *desc = kvf__plugin_kernel_at(lib.desc, (uint32_t)i);
    return 0;
}

const char *kvf_kernel_plugin_path(const kvf_kernel *k) {
    return k && k->plugin ? k->plugin->path : NULL;
}

unsigned kvf_kernel_promises(const kvf_kernel *k) {
    unsigned mask = kvf_relation_default_promises();
    if (k->promises) kvf_relation_promises_parse(k->promises, &mask, NULL);
    return mask;
}
