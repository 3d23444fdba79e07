/* Streaming error statistics: collection, merging and the v1 stats file (docs/reports.md).
 *
 * Design constraints, and how they are met:
 * - bounded memory: elements only bump counters in sparse maps keyed by bucket or coordinate
 *   class; the only per-element records are the worst N per (kernel, rule, output);
 * - exact merges: every statistic is an integer count or sum, or a maximum; the worst list is
 *   the top N under a total order, so top-N(a ∪ b) does not depend on how the union was formed;
 * - crash safety: files are replaced by rename, so a run that dies leaves the previous write. */
#include "stats_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "kvfuzz/prng.h"

/* ------------------------------------------------------------------------------------------ */
/* Map                                                                                         */
/* ------------------------------------------------------------------------------------------ */

void kvf_map_init(kvf_map *m, size_t vsize) {
    memset(m, 0, sizeof *m);
    m->vsize = vsize;
}

void kvf_map_free(kvf_map *m) {
    free(m->keys);
    free(m->used);
    free(m->vals);
    size_t vsize = m->vsize;
    kvf_map_init(m, vsize);
}

static size_t map_hash(int64_t key, size_t cap) {
    uint64_t x = (uint64_t)key * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing */
    return (size_t)(x >> 17) & (cap - 1);
}

static size_t map_slot(const kvf_map *m, int64_t key) {
    size_t i = map_hash(key, m->cap);
    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int map_grow(kvf_map *m) {
    size_t ncap = m->cap ? m->cap * 2 : 16;
    kvf_map n = {m->vsize, 0, ncap, NULL, NULL, NULL, 0, 0, 0};
    n.keys = malloc(ncap * sizeof *n.keys);
    n.used = calloc(ncap, 1);
    n.vals = malloc(ncap * m->vsize);
    if (!n.keys || !n.used || !n.vals) {
        free(n.keys);
        free(n.used);
        free(n.vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        size_t j = map_slot(&n, m->keys[i]);
        n.used[j] = 1;
        n.keys[j] = m->keys[i];
        memcpy(n.vals + j * m->vsize, m->vals + i * m->vsize, m->vsize);
        n.count++;
    }
    free(m->keys);
    free(m->used);
    free(m->vals);
    *m = n;
    return 0;
}

const void *kvf_map_find(const kvf_map *m, int64_t key) {
    if (m->cap == 0) return NULL;
    size_t i = map_slot(m, key);
    return m->used[i] ? m->vals + i * m->vsize : NULL;
}

void *kvf_map_get(kvf_map *m, int64_t key, int create) {
    if (m->has_last && m->last_key == key) return m->vals + m->last_slot * m->vsize;
    if (m->cap) {
        size_t i = map_slot(m, key);
        if (m->used[i]) {
            m->has_last = 1;
            m->last_key = key;
            m->last_slot = i;
            return m->vals + i * m->vsize;
        }
    }
    if (!create) return NULL;
    /* Keep the load at most 1/2 so probe sequences stay short. */
    if ((m->count + 1) * 2 > m->cap && map_grow(m)) return NULL;
    size_t i = map_slot(m, key);
    m->used[i] = 1;
    m->keys[i] = key;
    memset(m->vals + i * m->vsize, 0, m->vsize);
    m->count++;
    m->has_last = 1;
    m->last_key = key;
    m->last_slot = i;
    return m->vals + i * m->vsize;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t *kvf_map_sorted_keys(const kvf_map *m, size_t *n) {
    *n = 0;
    if (m->count == 0) return NULL;
    int64_t *keys = malloc(m->count * sizeof *keys);
    if (!keys) return NULL;
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i]) keys[(*n)++] = m->keys[i];
    qsort(keys, *n, sizeof *keys, cmp_i64);
    return keys;
}

/* ------------------------------------------------------------------------------------------ */
/* Buckets                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* The doubles nearest 2^(1/4), 2^(1/2) and 2^(3/4), written in hex so no libm is involved. */
static const double QUARTER_EDGE[4] = {1.0, 0x1.306fe0a31b715p+0, 0x1.6a09e667f3bcdp+0,
                                       0x1.ae89f995ad3adp+0};

int32_t kvf_stats_bucket(double v) {
    int e;
    double m = 2 * frexp(v, &e); /* v = m 2^(e-1), m in [1, 2): exact, subnormals included */
    int j = (m >= QUARTER_EDGE[1]) + (m >= QUARTER_EDGE[2]) + (m >= QUARTER_EDGE[3]);
    return 4 * (e - 1) + j;
}

double kvf_stats_bucket_lo(int32_t i) {
    int32_t k = i >= 0 ? i / 4 : -((-i + 3) / 4); /* floor(i / 4) */
    return ldexp(QUARTER_EDGE[i - 4 * k], k);
}

int32_t kvf_stats_octave(double v) {
    if (v == 0) return KVF_OCT_ZERO;
    if (isinf(v)) return KVF_OCT_INF;
    int e;
    frexp(v, &e);
    return e - 1;
}

static int hist_add(kvf_hist *h, double v) {
    h->total++;
    if (isnan(v)) {
        h->nan++;
    } else if (v == 0) {
        h->zero++;
    } else if (isinf(v)) {
        h->inf++;
    } else {
        int64_t *c = kvf_map_get(&h->buckets, kvf_stats_bucket(fabs(v)), 1);
        if (!c) return -1;
        (*c)++;
    }
    return 0;
}

static int counts_merge(kvf_map *dst, const kvf_map *src) {
    for (size_t i = 0; i < src->cap; i++) {
        if (!src->used[i]) continue;
        int64_t *c = kvf_map_get(dst, src->keys[i], 1);
        if (!c) return -1;
        *c += *(const int64_t *)(src->vals + i * src->vsize);
    }
    return 0;
}

static int hist_merge(kvf_hist *dst, const kvf_hist *src) {
    dst->total += src->total;
    dst->zero += src->zero;
    dst->inf += src->inf;
    dst->nan += src->nan;
    return counts_merge(&dst->buckets, &src->buckets);
}

/* ------------------------------------------------------------------------------------------ */
/* Cells                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void cell_init(kvf_cell *c) {
    memset(c, 0, sizeof *c);
}

/* bits: round(1024 log2(ulps + 1)), computed once per element by the caller. */
static void cell_add(kvf_cell *c, const kvf_element_error *e, int finite_pair, int mismatch,
                     int64_t bits) {
    c->n++;
    if (e->fails) c->fails++;
    if (mismatch) c->nonfinite++;
    if (e->ulps >= 0) {
        c->bits_n++;
        c->bits_sum += bits;
        if (e->ulps > c->max_ulps) c->max_ulps = e->ulps;
    }
    if (finite_pair && e->abs_error > c->max_abs) c->max_abs = e->abs_error;
    if (e->margin > c->max_margin) c->max_margin = e->margin;
}

static void cell_merge(kvf_cell *dst, const kvf_cell *src) {
    dst->n += src->n;
    dst->fails += src->fails;
    dst->nonfinite += src->nonfinite;
    dst->bits_n += src->bits_n;
    dst->bits_sum += src->bits_sum;
    if (src->max_ulps > dst->max_ulps) dst->max_ulps = src->max_ulps;
    if (src->max_abs > dst->max_abs) dst->max_abs = src->max_abs;
    if (src->max_margin > dst->max_margin) dst->max_margin = src->max_margin;
}

static kvf_cell *cell_get(kvf_map *m, int64_t key) {
    kvf_cell *c = kvf_map_get(m, key, 1);
    if (c && c->n == 0) cell_init(c); /* a fresh, zeroed value */
    return c;
}

/* ------------------------------------------------------------------------------------------ */
/* Case records and the worst-element ranking                                                  */
/* ------------------------------------------------------------------------------------------ */

static void ci_unref(kvf_case_info *ci) {
    if (!ci || --ci->refs > 0) return;
    free(ci->path);
    free(ci->hex);
    free(ci);
}

static kvf_case_info *ci_new(int has_hash, uint64_t hash, const char *path, const uint8_t *bytes,
                             size_t size, const char *hex) {
    kvf_case_info *ci = calloc(1, sizeof *ci);
    if (!ci) return NULL;
    ci->refs = 1;
    ci->has_hash = has_hash;
    ci->hash = hash;
    if (path && !(ci->path = strdup(path))) goto oom;
    if (hex) {
        if (!(ci->hex = strdup(hex))) goto oom;
    } else if (bytes && size <= KVF_STATS_EMBED_MAX) {
        static const char digits[] = "0123456789abcdef";
        if (!(ci->hex = malloc(2 * size + 1))) goto oom;
        for (size_t i = 0; i < size; i++) {
            ci->hex[2 * i] = digits[bytes[i] >> 4];
            ci->hex[2 * i + 1] = digits[bytes[i] & 15];
        }
        ci->hex[2 * size] = 0;
    }
    return ci;
oom:
    ci_unref(ci);
    return NULL;
}

static int cmp_str_null(const char *a, const char *b) {
    return strcmp(a ? a : "", b ? b : "");
}

static int cmp_ci(const kvf_case_info *a, const kvf_case_info *b) {
    if (a == b) return 0;
    if (!a || !b) return a ? -1 : 1;
    if (a->has_hash != b->has_hash) return a->has_hash ? -1 : 1;
    if (a->hash != b->hash) return a->hash < b->hash ? -1 : 1;
    return cmp_str_null(a->path, b->path);
}

#define CMP_DESC(x, y)                                                                             \
    do {                                                                                           \
        if ((x) != (y)) return (x) > (y) ? -1 : 1;                                                 \
    } while (0)
#define CMP_ASC(x, y)                                                                              \
    do {                                                                                           \
        if ((x) != (y)) return (x) < (y) ? -1 : 1;                                                 \
    } while (0)

/* NaN compares as larger than any number, so NaN-valued fields still order totally. */
static int cmp_dbl_desc(double x, double y) {
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y) ? 0 : (isnan(x) ? -1 : 1);
    CMP_DESC(x, y);
    return 0;
}

int kvf_worst_cmp(const kvf_worst *x, const kvf_worst *y) {
    int c;
    /* Headroom first: the margin alone puts every bf16 tie (margin ~1 for the correctly
     * rounded value) ahead of real errors that are smaller than a rounding. */
    if ((c = cmp_dbl_desc(x->e.excess_margin, y->e.excess_margin))) return c;
    if ((c = cmp_dbl_desc(x->e.margin, y->e.margin))) return c;
    /* A one-sided NaN (distance -1) is the worst distance of all. */
    uint64_t ux = (uint64_t)x->e.ulps, uy = (uint64_t)y->e.ulps;
    CMP_DESC(ux, uy);
    if ((c = cmp_dbl_desc(x->e.abs_error, y->e.abs_error))) return c;
    if ((c = cmp_ci(x->ci, y->ci))) return c;
    CMP_ASC(x->e.b, y->e.b);
    CMP_ASC(x->e.h, y->e.h);
    CMP_ASC(x->e.d, y->e.d);
    CMP_ASC(x->e.kernel_bits, y->e.kernel_bits);
    CMP_ASC(x->e.rounded_bits, y->e.rounded_bits);
    if ((c = cmp_dbl_desc(x->e.exact_value, y->e.exact_value))) return c;
    CMP_ASC(x->e.out_of_model, y->e.out_of_model);
    return 0;
}

/* Would cand enter the list? (Checked before copying anything.) */
static int worst_wants(const kvf_outstats *o, int worst_n, const kvf_worst *cand) {
    return o->worst_count < worst_n || kvf_worst_cmp(cand, &o->worst[o->worst_count - 1]) < 0;
}

/* Inserts cand (whose ci reference is handed over) keeping the list sorted and at most
 * worst_n long. */
static void worst_insert(kvf_outstats *o, int worst_n, kvf_worst cand) {
    int n = o->worst_count;
    if (n == worst_n) {
        ci_unref(o->worst[n - 1].ci);
        n--;
    }
    int pos = n;
    while (pos > 0 && kvf_worst_cmp(&cand, &o->worst[pos - 1]) < 0) {
        o->worst[pos] = o->worst[pos - 1];
        pos--;
    }
    o->worst[pos] = cand;
    o->worst_count = n + 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Groups, create, free                                                                        */
/* ------------------------------------------------------------------------------------------ */

static void outstats_free(kvf_outstats *o) {
    kvf_map_free(&o->abs.buckets);
    kvf_map_free(&o->rel.buckets);
    kvf_map_free(&o->ulp.buckets);
    kvf_map_free(&o->margin.buckets);
    kvf_map_free(&o->dens);
    for (int k = 0; k < KVF_CLASS_COUNT; k++)
        kvf_map_free(&o->by[k]);
    for (int i = 0; i < o->worst_count; i++)
        ci_unref(o->worst[i].ci);
    free(o->worst);
}

static int outstats_init(kvf_outstats *o, int worst_n) {
    memset(o, 0, sizeof *o);
    kvf_map_init(&o->abs.buckets, sizeof(int64_t));
    kvf_map_init(&o->rel.buckets, sizeof(int64_t));
    kvf_map_init(&o->ulp.buckets, sizeof(int64_t));
    kvf_map_init(&o->margin.buckets, sizeof(int64_t));
    kvf_map_init(&o->dens, sizeof(int64_t));
    for (int k = 0; k < KVF_CLASS_COUNT; k++)
        kvf_map_init(&o->by[k], sizeof(kvf_cell));
    o->worst = calloc((size_t)worst_n, sizeof *o->worst);
    return o->worst ? 0 : -1;
}

static void group_free(kvf_group *g) {
    if (!g) return;
    free(g->kernel);
    free(g->rule);
    for (int i = 0; i < 2; i++) {
        outstats_free(&g->out[i]);
        outstats_free(&g->oom[i]);
    }
    free(g);
}

/* Finds or adds the (kernel, rule) group; NULL on OOM. */
static kvf_group *group_get(kvf_stats *s, const char *kernel, const char *rule) {
    for (size_t i = 0; i < s->ngroups; i++)
        if (strcmp(s->groups[i]->kernel, kernel) == 0 && strcmp(s->groups[i]->rule, rule) == 0)
            return s->groups[i];
    if (s->ngroups == s->cap_groups) {
        size_t ncap = s->cap_groups ? s->cap_groups * 2 : 8;
        kvf_group **ng = realloc(s->groups, ncap * sizeof *ng);
        if (!ng) return NULL;
        s->groups = ng;
        s->cap_groups = ncap;
    }
    kvf_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->kernel = strdup(kernel);
    g->rule = strdup(rule);
    int bad = !g->kernel || !g->rule;
    for (int i = 0; i < 2; i++) {
        bad |= outstats_init(&g->out[i], s->worst_n) != 0;
        bad |= outstats_init(&g->oom[i], s->worst_n) != 0;
    }
    if (bad) {
        group_free(g);
        return NULL;
    }
    s->groups[s->ngroups++] = g;
    return g;
}

static kvf_kernel_runs *kernel_runs_get(kvf_stats *s, const char *kernel) {
    for (size_t i = 0; i < s->nkernels; i++)
        if (strcmp(s->kernels[i].kernel, kernel) == 0) return &s->kernels[i];
    kvf_kernel_runs *nk = realloc(s->kernels, (s->nkernels + 1) * sizeof *nk);
    if (!nk) return NULL;
    s->kernels = nk;
    kvf_kernel_runs *k = &s->kernels[s->nkernels];
    memset(k, 0, sizeof *k);
    if (!(k->kernel = strdup(kernel))) return NULL;
    s->nkernels++;
    return k;
}

static void source_free(kvf_source *src) {
    free(src->command);
    free(src->host);
    free(src->started);
    free(src->written);
}

static void utc_now(char *buf, size_t size) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void kvf_stats_opts_default(kvf_stats_opts *opts) {
    memset(opts, 0, sizeof *opts);
    opts->worst_n = KVF_STATS_WORST_DEFAULT;
    opts->flush_interval_s = 60;
}

static kvf_stats *stats_alloc(int worst_n) {
    kvf_stats *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->worst_n = worst_n;
    s->flush_interval_s = 60;
    s->own_source = -1;
    clock_gettime(CLOCK_MONOTONIC, &s->last_write);
    return s;
}

int kvf_stats_create(kvf_stats **out, const kvf_stats_opts *opts, kvf_error *err) {
    kvf_stats_opts def;
    if (!opts) {
        kvf_stats_opts_default(&def);
        opts = &def;
    }
    *out = NULL;
    if (opts->worst_n < 1 || opts->worst_n > KVF_STATS_WORST_MAX)
        return kvf_error_set(err, KVF_EINVAL, "worst_n must be in [1, %d], got %d",
                             KVF_STATS_WORST_MAX, opts->worst_n);
    if (!(opts->flush_interval_s >= 0))
        return kvf_error_set(err, KVF_EINVAL, "the flush interval must be >= 0 seconds");
    kvf_stats *s = stats_alloc(opts->worst_n);
    if (!s) return kvf_error_set(err, KVF_ENOMEM, "out of memory creating statistics");
    s->flush_interval_s = opts->flush_interval_s;
    s->require_overflow = opts->require_overflow != 0;
    char resolved[PATH_MAX];
    const char *dir = opts->findings_dir;
    if (dir && realpath(dir, resolved)) dir = resolved;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char now[32];
    utc_now(now, sizeof now);
    s->sources = calloc(1, sizeof *s->sources);
    int bad = !s->sources;
    if (!bad) {
        s->nsources = 1;
        s->own_source = 0;
        kvf_source *src = &s->sources[0];
        src->pid = (int64_t)getpid();
        bad |= opts->command && !(src->command = strdup(opts->command));
        bad |= !(src->host = strdup(host)) || !(src->started = strdup(now)) ||
               !(src->written = strdup(now));
    }
    bad |= opts->label && !(s->label = strdup(opts->label));
    bad |= dir && !(s->findings_dir = strdup(dir));
    if (bad) {
        kvf_stats_free(s);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory creating statistics");
    }
    *out = s;
    return 0;
}

void kvf_stats_free(kvf_stats *s) {
    if (!s) return;
    for (size_t i = 0; i < s->ngroups; i++)
        group_free(s->groups[i]);
    free(s->groups);
    for (size_t i = 0; i < s->nkernels; i++)
        free(s->kernels[i].kernel);
    free(s->kernels);
    for (size_t i = 0; i < s->nsources; i++)
        source_free(&s->sources[i]);
    free(s->sources);
    free(s->label);
    free(s->findings_dir);
    free(s);
}

int64_t kvf_stats_elements(const kvf_stats *s) {
    int64_t n = 0;
    for (size_t i = 0; s && i < s->ngroups; i++)
        for (int k = 0; k < 2; k++)
            n += s->groups[i]->out[k].elements + s->groups[i]->oom[k].elements;
    return n;
}

static int cmp_group_ptr(const void *a, const void *b);

size_t kvf_stats_verdicts(const kvf_stats *s, kvf_verdict_counts *out, size_t max) {
    if (!s) return 0;
    kvf_group **sorted = malloc((s->ngroups ? s->ngroups : 1) * sizeof *sorted);
    if (!sorted) return 0;
    if (s->ngroups) memcpy(sorted, s->groups, s->ngroups * sizeof *sorted);
    if (s->ngroups) qsort(sorted, s->ngroups, sizeof *sorted, cmp_group_ptr);
    for (size_t i = 0; i < s->ngroups && i < max; i++) {
        const kvf_group *g = sorted[i];
        kvf_verdict_counts *c = &out[i];
        memset(c, 0, sizeof *c);
        c->kernel = g->kernel;
        c->rule = g->rule;
        c->cases = g->cases;
        c->passed = g->passed;
        c->out_of_model = g->out_of_model;
        c->rejects_rounded = g->rejects_rounded;
        memcpy(c->findings, g->findings, sizeof c->findings);
        c->signatures = -1;
        c->require_overflow = s->require_overflow;
    }
    free(sorted);
    return s->ngroups;
}

/* ------------------------------------------------------------------------------------------ */
/* Observing                                                                                   */
/* ------------------------------------------------------------------------------------------ */

int kvf_stats_begin(kvf_stats_scope *scope, kvf_stats *s, const char *kernel, const kvf_rule *rule,
                    const kvf_case *c, const kvf_stats_case *ref, kvf_error *err) {
    memset(scope, 0, sizeof *scope);
    if (!s || !kernel || !rule || !c)
        return kvf_error_set(err, KVF_EINVAL,
                             "statistics need a stats object, a kernel name, a rule and a case");
    kvf_group *g = group_get(s, kernel, rule->name);
    if (!g) {
        s->incomplete = 1;
        return kvf_error_set(err, KVF_ENOMEM, "out of memory adding statistics for %s / %s", kernel,
                             rule->name);
    }
    scope->stats = s;
    scope->group = g;
    scope->c = c;
    if (ref) scope->ref = *ref;
    scope->has_hash = scope->ref.kvfz != NULL;
    if (scope->has_hash) scope->hash = kvf_hash64(scope->ref.kvfz, scope->ref.kvfz_size);
    return 0;
}

/* The scope's case record, created on the first worst-list entry it makes. The scope keeps
 * one reference until it ends, so evictions within the same case cannot free it under us. */
static kvf_case_info *scope_case(kvf_stats_scope *sc) {
    if (sc->case_info) return sc->case_info;
    const kvf_stats_case *r = &sc->ref;
    sc->case_info = ci_new(sc->has_hash, sc->hash, r->path, r->kvfz, r->kvfz_size, NULL);
    return sc->case_info;
}

void kvf_stats_observe_element(void *ctx, const kvf_element_error *e) {
    kvf_stats_scope *sc = ctx;
    if (!sc || !sc->group || (e->output != KVF_OUTPUT_O && e->output != KVF_OUTPUT_LSE)) return;
    kvf_stats *s = sc->stats;
    kvf_group *g = sc->group;
    kvf_outstats *o = e->out_of_model ? &g->oom[e->output] : &g->out[e->output];
    const kvf_case *c = sc->c;
    double a = e->kernel_value, r = e->rounded_value;
    int finite_pair = isfinite(a) && isfinite(r);
    int mismatch = !finite_pair && !(a == r); /* the judge's definition */
    int bad = 0;

    o->elements++;
    if (e->fails) o->violations++;
    if (mismatch) o->nonfinite++;
    if (finite_pair) {
        if (e->abs_error > o->max_abs) o->max_abs = e->abs_error;
        if (e->rel_error > o->max_rel) o->max_rel = e->rel_error;
    }
    if (e->ulps > o->max_ulps) o->max_ulps = e->ulps;
    if (e->margin > o->max_margin) o->max_margin = e->margin;
    if (e->excess_margin > o->max_excess) o->max_excess = e->excess_margin;
    bad |= hist_add(&o->abs, e->abs_error);
    bad |= hist_add(&o->rel, e->rel_error);
    bad |= hist_add(&o->ulp, e->ulps < 0 ? NAN : (double)e->ulps);
    bad |= hist_add(&o->margin, e->margin);
    if (!isnan(e->abs_error) && !isnan(e->exact_value)) {
        int64_t key =
            KVF_DENS_KEY(kvf_stats_octave(e->abs_error), kvf_stats_octave(fabs(e->exact_value)));
        int64_t *cnt = kvf_map_get(&o->dens, key, 1);
        if (cnt)
            (*cnt)++;
        else
            bad = 1;
    }

    /* Coordinate classes. The position class of both o and lse is the slot of the row's last
     * token: it is what separates full from partial last pages, where page-table bugs live. */
    int64_t len = 0;
    int32_t S = c->page_size;
    if (e->b >= 0 && e->b < c->batch_size) len = kvf_case_seq_len(c, e->b);
    int64_t keys[KVF_CLASS_COUNT] = {e->h, e->d, len == 0 ? 0 : 1 + kvf_stats_octave((double)len),
                                     len > 0 ? KVF_SLOT_KEY(S, (len - 1) % S) : 0};
    int wanted[KVF_CLASS_COUNT] = {1, e->d >= 0, 1, len > 0};
    int64_t bits = e->ulps > 0 ? llround(KVF_BITS_SCALE * log2((double)e->ulps + 1.0)) : 0;
    for (int k = 0; k < KVF_CLASS_COUNT; k++) {
        if (!wanted[k]) continue;
        kvf_cell *cell = cell_get(&o->by[k], keys[k]);
        if (cell)
            cell_add(cell, e, finite_pair, mismatch, bits);
        else
            bad = 1;
    }

    /* Rank against a stack copy of the case identity first; the record (with its hex copy of
     * the case) is only built once this case actually enters a list. */
    kvf_case_info probe = {0};
    probe.has_hash = sc->has_hash;
    probe.hash = sc->hash;
    probe.path = (char *)sc->ref.path;
    kvf_worst cand = {*e, len, S, sc->case_info ? (kvf_case_info *)sc->case_info : &probe};
    if (worst_wants(o, s->worst_n, &cand)) {
        kvf_case_info *ci = scope_case(sc);
        if (!ci && (sc->ref.path || sc->ref.kvfz)) {
            bad = 1;
        } else {
            if (ci) ci->refs++;
            cand.ci = ci;
            worst_insert(o, s->worst_n, cand);
        }
    }
    if (bad) s->incomplete = 1;
}

void kvf_stats_end(kvf_stats_scope *scope) {
    if (!scope) return;
    ci_unref(scope->case_info);
    memset(scope, 0, sizeof *scope);
}

void kvf_stats_observe_verdict(kvf_stats_scope *scope, const kvf_verdict *v) {
    if (scope && scope->group && v) {
        kvf_group *g = scope->group;
        g->cases++;
        switch (kvf_verdict_status_of(v, scope->stats->require_overflow)) {
        case KVF_VERDICT_PASS:
            g->passed++;
            break;
        case KVF_VERDICT_OUT_OF_MODEL:
            g->out_of_model++;
            break;
        case KVF_VERDICT_RULE_REJECTS_ROUNDED:
            g->rejects_rounded++;
            break;
        default:
            if ((unsigned)v->finding < KVF_FINDING_CLASS_COUNT) g->findings[v->finding]++;
            break;
        }
    }
    kvf_stats_end(scope);
}

int kvf_stats_judge(kvf_stats *s, const char *kernel, const kvf_stats_case *ref, kvf_verdict *out,
                    const kvf_rule *rule, const kvf_case *c, const kvf_oracle_result *oracle,
                    const kvf_bf16 *o, const float *lse, kvf_error *err) {
    if (!s) return kvf_judge(out, rule, c, oracle, o, lse, err);
    kvf_stats_scope sc;
    kvf_error serr = {0};
    if (kvf_stats_begin(&sc, s, kernel, rule, c, ref, &serr)) {
        /* Still judge: losing statistics must not lose a verdict. */
        int rc = kvf_judge(out, rule, c, oracle, o, lse, err);
        if (rc) return rc;
        if (err) *err = serr;
        return serr.code;
    }
    int rc = kvf_judge_observe(out, rule, c, oracle, o, lse, kvf_stats_observe_element, &sc, err);
    if (rc) {
        kvf_stats_end(&sc);
        return rc;
    }
    kvf_stats_observe_verdict(&sc, out);
    return 0;
}

int kvf_stats_count_run(kvf_stats *s, const char *kernel, int outcome, kvf_error *err) {
    if (!s || !kernel)
        return kvf_error_set(err, KVF_EINVAL, "counting a run needs a stats object and a kernel");
    if (outcome != KVF_STATS_RAN && outcome != KVF_STATS_UNSUPPORTED &&
        outcome != KVF_FINDING_KERNEL_ERROR && outcome != KVF_FINDING_CRASH &&
        outcome != KVF_FINDING_HANG && outcome != KVF_FINDING_NONDETERMINISM)
        return kvf_error_set(err, KVF_EINVAL,
                             "a run outcome must be ran, unsupported, kernel-error, crash, hang "
                             "or nondeterminism, got %d",
                             outcome);
    kvf_kernel_runs *k = kernel_runs_get(s, kernel);
    if (!k) {
        s->incomplete = 1;
        return kvf_error_set(err, KVF_ENOMEM, "out of memory counting a run of %s", kernel);
    }
    if (outcome == KVF_STATS_RAN)
        k->ran++;
    else if (outcome == KVF_STATS_UNSUPPORTED)
        k->unsupported++;
    else
        k->errors[outcome]++;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Serialising                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static const char *const OUTPUT_NAME[2] = {"o", "lse"};
static const char *const CLASS_NAME[KVF_CLASS_COUNT] = {"by_head", "by_dim", "by_seqlen",
                                                        "by_slot"};
static const int RUN_ERROR_CLASSES[] = {KVF_FINDING_KERNEL_ERROR, KVF_FINDING_CRASH,
                                        KVF_FINDING_HANG, KVF_FINDING_NONDETERMINISM};
#define N_RUN_ERRORS ((int)(sizeof RUN_ERROR_CLASSES / sizeof RUN_ERROR_CLASSES[0]))

static int cmp_group_ptr(const void *a, const void *b) {
    const kvf_group *x = *(kvf_group *const *)a, *y = *(kvf_group *const *)b;
    int c = strcmp(x->kernel, y->kernel);
    return c ? c : strcmp(x->rule, y->rule);
}

static int cmp_kernel_runs(const void *a, const void *b) {
    return strcmp(((const kvf_kernel_runs *)a)->kernel, ((const kvf_kernel_runs *)b)->kernel);
}

static int cmp_ci_ptr(const void *a, const void *b) {
    return cmp_ci(*(kvf_case_info *const *)a, *(kvf_case_info *const *)b);
}

static void write_hist(FILE *f, const kvf_hist *h) {
    fprintf(f,
            "{\"total\": %" PRId64 ", \"zero\": %" PRId64 ", \"inf\": %" PRId64
            ", \"nan\": %" PRId64 ", \"buckets\": [",
            h->total, h->zero, h->inf, h->nan);
    size_t n;
    int64_t *keys = kvf_map_sorted_keys(&h->buckets, &n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "", keys[i],
                *(const int64_t *)kvf_map_find(&h->buckets, keys[i]));
    free(keys);
    fputs("]}", f);
}

static void write_octave(FILE *f, int32_t oct) {
    if (oct == KVF_OCT_ZERO)
        fputs("\"zero\"", f);
    else if (oct == KVF_OCT_INF)
        fputs("\"inf\"", f);
    else
        fprintf(f, "%d", (int)oct);
}

static void write_cell(FILE *f, const kvf_cell *c) {
    fprintf(f, "%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", ",
            c->n, c->fails, c->nonfinite, c->bits_n, c->bits_sum, c->max_ulps);
    kvf_json_write_double(f, c->max_abs);
    fputs(", ", f);
    kvf_json_write_double(f, c->max_margin);
}

/* The id of ci in the sorted, de-duplicated case table. */
static long case_id(kvf_case_info *const *table, size_t n, const kvf_case_info *ci) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp_ci(table[mid], ci);
        if (c == 0) return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static void write_outstats(FILE *f, const kvf_outstats *o, kvf_case_info *const *cases,
                           size_t ncases) {
    fprintf(f,
            "{\"elements\": %" PRId64 ", \"violations\": %" PRId64 ", \"nonfinite\": %" PRId64
            ", \"max_abs\": ",
            o->elements, o->violations, o->nonfinite);
    kvf_json_write_double(f, o->max_abs);
    fputs(", \"max_rel\": ", f);
    kvf_json_write_double(f, o->max_rel);
    fprintf(f, ", \"max_ulps\": %" PRId64 ", \"max_margin\": ", o->max_ulps);
    kvf_json_write_double(f, o->max_margin);
    fputs(", \"max_excess_margin\": ", f);
    kvf_json_write_double(f, o->max_excess);
    fputs(",\n     \"hist\": {\"abs\": ", f);
    write_hist(f, &o->abs);
    fputs(",\n       \"rel\": ", f);
    write_hist(f, &o->rel);
    fputs(",\n       \"ulp\": ", f);
    write_hist(f, &o->ulp);
    fputs(",\n       \"margin\": ", f);
    write_hist(f, &o->margin);
    fputs("},\n     \"abs_vs_exact\": [", f);
    size_t n;
    int64_t *keys = kvf_map_sorted_keys(&o->dens, &n);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", [" : "[", f);
        write_octave(f, KVF_DENS_ABS(keys[i]));
        fputs(", ", f);
        write_octave(f, KVF_DENS_EXACT(keys[i]));
        fprintf(f, ", %" PRId64 "]", *(const int64_t *)kvf_map_find(&o->dens, keys[i]));
    }
    free(keys);
    fputs("]", f);
    for (int k = 0; k < KVF_CLASS_COUNT; k++) {
        fprintf(f, ",\n     \"%s\": [", CLASS_NAME[k]);
        keys = kvf_map_sorted_keys(&o->by[k], &n);
        for (size_t i = 0; i < n; i++) {
            const kvf_cell *c = kvf_map_find(&o->by[k], keys[i]);
            if (k == KVF_CLASS_SLOT)
                fprintf(f, "%s[%" PRId64 ", %" PRId64 ", ", i ? ",\n       " : "", keys[i] / 65536,
                        keys[i] % 65536);
            else
                fprintf(f, "%s[%" PRId64 ", ", i ? ",\n       " : "", keys[i]);
            write_cell(f, c);
            fputc(']', f);
        }
        free(keys);
        fputc(']', f);
    }
    fputs(",\n     \"worst\": [", f);
    for (int i = 0; i < o->worst_count; i++) {
        const kvf_worst *w = &o->worst[i];
        const kvf_element_error *e = &w->e;
        long id = w->ci ? case_id(cases, ncases, w->ci) : -1;
        fprintf(f, "%s{\"case\": ", i ? ",\n       " : "");
        if (id >= 0)
            fprintf(f, "%ld", id);
        else
            fputs("null", f);
        fprintf(f,
                ", \"b\": %d, \"h\": %d, \"d\": %d, \"seq_len\": %" PRId64
                ", \"page_size\": %d, \"a\": ",
                (int)e->b, (int)e->h, (int)e->d, w->seq_len, (int)w->page_size);
        kvf_json_write_double(f, e->kernel_value);
        fputs(", \"r\": ", f);
        kvf_json_write_double(f, e->rounded_value);
        fputs(", \"x\": ", f);
        kvf_json_write_double(f, e->exact_value);
        fprintf(f, ", \"a_bits\": %u, \"r_bits\": %u, \"abs\": ", (unsigned)e->kernel_bits,
                (unsigned)e->rounded_bits);
        kvf_json_write_double(f, e->abs_error);
        fputs(", \"rel\": ", f);
        kvf_json_write_double(f, e->rel_error);
        if (e->ulps < 0)
            fputs(", \"ulps\": null", f); /* a NaN/inf mismatch has no distance */
        else
            fprintf(f, ", \"ulps\": %" PRId64, e->ulps);
        fputs(", \"allowed\": ", f);
        kvf_json_write_double(f, e->allowed);
        fputs(", \"margin\": ", f);
        kvf_json_write_double(f, e->margin);
        fputs(", \"excess_margin\": ", f);
        kvf_json_write_double(f, e->excess_margin);
        fprintf(f, ", \"fails\": %s, \"out_of_model\": %s}", e->fails ? "true" : "false",
                e->out_of_model ? "true" : "false");
    }
    fputs("]}", f);
}

int kvf_stats_serialize(const kvf_stats *s, FILE *f, int provenance) {
    /* Sorted views, so that equal statistics always print the same bytes. */
    kvf_group **groups = malloc((s->ngroups ? s->ngroups : 1) * sizeof *groups);
    kvf_kernel_runs *kernels = malloc((s->nkernels ? s->nkernels : 1) * sizeof *kernels);
    size_t ncases = 0, cap = 0;
    for (size_t i = 0; i < s->ngroups; i++)
        for (int out = 0; out < 2; out++)
            cap +=
                (size_t)(s->groups[i]->out[out].worst_count + s->groups[i]->oom[out].worst_count);
    kvf_case_info **cases = malloc((cap ? cap : 1) * sizeof *cases);
    if (!groups || !kernels || !cases) {
        free(groups);
        free(kernels);
        free(cases);
        errno = ENOMEM;
        return -1;
    }
    /* (memcpy and qsort want non-NULL pointers even for zero items.) */
    if (s->ngroups) {
        memcpy(groups, s->groups, s->ngroups * sizeof *groups);
        qsort(groups, s->ngroups, sizeof *groups, cmp_group_ptr);
    }
    if (s->nkernels) {
        memcpy(kernels, s->kernels, s->nkernels * sizeof *kernels);
        qsort(kernels, s->nkernels, sizeof *kernels, cmp_kernel_runs);
    }
    for (size_t i = 0; i < s->ngroups; i++)
        for (int out = 0; out < 2; out++)
            for (int w = 0; w < s->groups[i]->out[out].worst_count; w++)
                if (s->groups[i]->out[out].worst[w].ci)
                    cases[ncases++] = s->groups[i]->out[out].worst[w].ci;
    for (size_t i = 0; i < s->ngroups; i++)
        for (int out = 0; out < 2; out++)
            for (int w = 0; w < s->groups[i]->oom[out].worst_count; w++)
                if (s->groups[i]->oom[out].worst[w].ci)
                    cases[ncases++] = s->groups[i]->oom[out].worst[w].ci;
    qsort(cases, ncases, sizeof *cases, cmp_ci_ptr);
    size_t uniq = 0;
    for (size_t i = 0; i < ncases; i++)
        if (uniq == 0 || cmp_ci(cases[uniq - 1], cases[i]) != 0) cases[uniq++] = cases[i];
    ncases = uniq;

    fprintf(f,
            "{\"format\": \"%s\", \"version\": %d, \"buckets_per_octave\": %d, "
            "\"bits_scale\": %d, \"worst_n\": %d, \"incomplete\": %s, "
            "\"require_overflow\": %s,\n",
            KVF_STATS_FORMAT, KVF_STATS_VERSION, KVF_STATS_BUCKETS_PER_OCTAVE, KVF_BITS_SCALE,
            s->worst_n, s->incomplete ? "true" : "false", s->require_overflow ? "true" : "false");
    if (provenance) {
        fputs(" \"label\": ", f);
        kvf_json_write_string(f, s->label);
        fputs(", \"findings_dir\": ", f);
        kvf_json_write_string(f, s->findings_dir);
        fputs(",\n \"sources\": [", f);
        for (size_t i = 0; i < s->nsources; i++) {
            const kvf_source *src = &s->sources[i];
            fputs(i ? ",\n   {\"command\": " : "{\"command\": ", f);
            kvf_json_write_string(f, src->command);
            fputs(", \"host\": ", f);
            kvf_json_write_string(f, src->host);
            fprintf(f, ", \"pid\": %" PRId64 ", \"started\": ", src->pid);
            kvf_json_write_string(f, src->started);
            fputs(", \"written\": ", f);
            kvf_json_write_string(f, src->written);
            fputc('}', f);
        }
        fputs("],\n", f);
    }
    fputs(" \"kernels\": [", f);
    for (size_t i = 0; i < s->nkernels; i++) {
        fputs(i ? ",\n   {\"kernel\": " : "{\"kernel\": ", f);
        kvf_json_write_string(f, kernels[i].kernel);
        fprintf(f, ", \"ran\": %" PRId64 ", \"unsupported\": %" PRId64, kernels[i].ran,
                kernels[i].unsupported);
        for (int j = 0; j < N_RUN_ERRORS; j++)
            fprintf(f, ", \"%s\": %" PRId64,
                    kvf_finding_class_name((kvf_finding_class)RUN_ERROR_CLASSES[j]),
                    kernels[i].errors[RUN_ERROR_CLASSES[j]]);
        fputc('}', f);
    }
    fputs("],\n \"cases\": [", f);
    for (size_t i = 0; i < ncases; i++) {
        fputs(i ? ",\n   {\"hash\": " : "{\"hash\": ", f);
        if (cases[i]->has_hash)
            fprintf(f, "\"%016" PRIx64 "\"", cases[i]->hash);
        else
            fputs("null", f);
        fputs(", \"path\": ", f);
        kvf_json_write_string(f, cases[i]->path);
        fputs(", \"kvfz_hex\": ", f);
        kvf_json_write_string(f, cases[i]->hex);
        fputc('}', f);
    }
    fputs("],\n \"groups\": [", f);
    for (size_t i = 0; i < s->ngroups; i++) {
        const kvf_group *g = groups[i];
        fputs(i ? ",\n  {\"kernel\": " : "\n  {\"kernel\": ", f);
        kvf_json_write_string(f, g->kernel);
        fputs(", \"rule\": ", f);
        kvf_json_write_string(f, g->rule);
        fprintf(f,
                ", \"cases\": %" PRId64 ", \"passed\": %" PRId64 ", \"out_of_model\": %" PRId64
                ", \"rule_rejects_rounded\": %" PRId64 ", \"findings\": {",
                g->cases, g->passed, g->out_of_model, g->rejects_rounded);
        for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
            fprintf(f, "%s\"%s\": %" PRId64, c > 1 ? ", " : "",
                    kvf_finding_class_name((kvf_finding_class)c), g->findings[c]);
        fputs("},", f);
        for (int out = 0; out < 2; out++) {
            fprintf(f, "\n   \"%s\": ", OUTPUT_NAME[out]);
            write_outstats(f, &g->out[out], cases, ncases);
            fputc(',', f);
        }
        fputs("\n   \"out_of_model_rows\": {", f);
        for (int out = 0; out < 2; out++) {
            fprintf(f, "%s\"%s\": ", out ? ",\n    " : "", OUTPUT_NAME[out]);
            write_outstats(f, &g->oom[out], cases, ncases);
        }
        fputs("}}", f);
    }
    fputs("]}\n", f);
    free(groups);
    free(kernels);
    free(cases);
    return 0;
}

static int fill_stats(FILE *f, void *ctx) {
    return kvf_stats_serialize(ctx, f, 1);
}

int kvf_stats_write(kvf_stats *s, const char *path, kvf_error *err) {
    if (!s || !path) return kvf_error_set(err, KVF_EINVAL, "writing statistics needs a path");
    if (s->own_source >= 0) {
        char now[32];
        utc_now(now, sizeof now);
        char *w = strdup(now);
        if (w) {
            free(s->sources[s->own_source].written);
            s->sources[s->own_source].written = w;
        }
    }
    int rc = kvf_write_atomic(path, fill_stats, s, err);
    if (rc) return rc;
    clock_gettime(CLOCK_MONOTONIC, &s->last_write);
    if (s->incomplete)
        return kvf_error_set(err, KVF_ENOMEM,
                             "the statistics written to %s are incomplete: memory ran out "
                             "while counting",
                             path);
    return 0;
}

int kvf_stats_tick(kvf_stats *s, const char *path, kvf_error *err) {
    if (!s) return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double dt = (double)(now.tv_sec - s->last_write.tv_sec) +
                1e-9 * (double)(now.tv_nsec - s->last_write.tv_nsec);
    return dt >= s->flush_interval_s ? kvf_stats_write(s, path, err) : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct reader {
    const char *path;
    kvf_error *err;
    int failed;
} reader;

static int bad(reader *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int bad(reader *r, const char *fmt, ...) {
    if (!r->failed) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        kvf_error_set(r->err, KVF_EFORMAT, "malformed stats file %s: %s", r->path, msg);
        r->failed = 1;
    }
    return -1;
}

static int get_i64(reader *r, const kvf_json *obj, const char *key, int64_t lo, int64_t *out,
                   const char *ctx) {
    if (kvf_json_i64(kvf_json_get(obj, key), out) || *out < lo)
        return bad(r, "%s: \"%s\" is missing or not an integer >= %lld", ctx, key, (long long)lo);
    return 0;
}

static int get_num(reader *r, const kvf_json *obj, const char *key, double *out, const char *ctx) {
    if (kvf_json_num(kvf_json_get(obj, key), out))
        return bad(r, "%s: \"%s\" is missing or not a number", ctx, key);
    return 0;
}

/* A string member (strdup'd into *out) or null / absent (*out = NULL). */
static int get_opt_str(reader *r, const kvf_json *obj, const char *key, char **out,
                       const char *ctx) {
    const kvf_json *v = kvf_json_get(obj, key);
    *out = NULL;
    if (!v || v->type == KVF_JSON_NULL) return 0;
    if (v->type != KVF_JSON_STRING) return bad(r, "%s: \"%s\" is not a string", ctx, key);
    if (!(*out = strdup(v->string))) return bad(r, "out of memory");
    return 0;
}

static const kvf_json *get_array(reader *r, const kvf_json *obj, const char *key, const char *ctx) {
    const kvf_json *v = kvf_json_get(obj, key);
    if (!v || v->type != KVF_JSON_ARRAY) {
        bad(r, "%s: \"%s\" is missing or not an array", ctx, key);
        return NULL;
    }
    return v;
}

/* Bucket indices span the positive doubles: 4 * [-1075, 1024). */
#define BUCKET_MIN (-4 * 1075)
#define BUCKET_MAX (4 * 1024)

static int read_hist(reader *r, const kvf_json *v, kvf_hist *h, const char *ctx) {
    if (!v || v->type != KVF_JSON_OBJECT) return bad(r, "%s is missing or not an object", ctx);
    if (get_i64(r, v, "total", 0, &h->total, ctx) || get_i64(r, v, "zero", 0, &h->zero, ctx) ||
        get_i64(r, v, "inf", 0, &h->inf, ctx) || get_i64(r, v, "nan", 0, &h->nan, ctx))
        return -1;
    const kvf_json *b = get_array(r, v, "buckets", ctx);
    if (!b) return -1;
    int64_t sum = h->zero + h->inf + h->nan;
    for (size_t i = 0; i < b->count; i++) {
        const kvf_json *p = &b->items[i];
        int64_t idx, cnt;
        if (p->type != KVF_JSON_ARRAY || p->count != 2 || kvf_json_i64(&p->items[0], &idx) ||
            kvf_json_i64(&p->items[1], &cnt) || idx < BUCKET_MIN || idx >= BUCKET_MAX || cnt < 0)
            return bad(r, "%s: buckets[%zu] is not a [bucket, count] pair in range", ctx, i);
        int64_t *c = kvf_map_get(&h->buckets, idx, 1);
        if (!c) return bad(r, "out of memory");
        *c += cnt;
        sum += cnt;
    }
    if (sum != h->total)
        return bad(r, "%s: the counts add up to %lld, not the stated total %lld", ctx,
                   (long long)sum, (long long)h->total);
    return 0;
}

static int read_octave(const kvf_json *v, int32_t *out) {
    int64_t i;
    if (v->type == KVF_JSON_STRING && strcmp(v->string, "zero") == 0) {
        *out = KVF_OCT_ZERO;
    } else if (v->type == KVF_JSON_STRING && strcmp(v->string, "inf") == 0) {
        *out = KVF_OCT_INF;
    } else if (kvf_json_i64(v, &i) == 0 && i >= -1075 && i < 1024) {
        *out = (int32_t)i;
    } else {
        return -1;
    }
    return 0;
}

static int read_cells(reader *r, const kvf_json *arr, kvf_map *m, int slot, const char *ctx) {
    size_t first = slot ? 2 : 1;
    for (size_t i = 0; i < arr->count; i++) {
        const kvf_json *p = &arr->items[i];
        int64_t key, key2 = 0, ints[6];
        double dbl[2];
        int ok = p->type == KVF_JSON_ARRAY && p->count == first + 8 &&
                 kvf_json_i64(&p->items[0], &key) == 0 && key >= 0 &&
                 (!slot || (kvf_json_i64(&p->items[1], &key2) == 0 && key >= 1 && key < 65536 &&
                            key2 >= 0 && key2 < key));
        for (size_t j = 0; ok && j < 6; j++)
            ok = kvf_json_i64(&p->items[first + j], &ints[j]) == 0 && ints[j] >= 0;
        for (size_t j = 0; ok && j < 2; j++)
            ok = kvf_json_num(&p->items[first + 6 + j], &dbl[j]) == 0 && !(dbl[j] < 0);
        if (!ok || (key > INT32_MAX && !slot))
            return bad(r, "%s[%zu] is not a well-formed class cell", ctx, i);
        kvf_cell *c = kvf_map_get(m, slot ? KVF_SLOT_KEY(key, key2) : key, 1);
        if (!c) return bad(r, "out of memory");
        if (c->n) return bad(r, "%s[%zu] repeats a class already listed", ctx, i);
        c->n = ints[0];
        c->fails = ints[1];
        c->nonfinite = ints[2];
        c->bits_n = ints[3];
        c->bits_sum = ints[4];
        c->max_ulps = ints[5];
        c->max_abs = dbl[0];
        c->max_margin = dbl[1];
        if (c->n == 0) return bad(r, "%s[%zu] is a class with no elements", ctx, i);
    }
    return 0;
}

static int read_worst(reader *r, const kvf_json *v, kvf_worst *w, kvf_case_info *const *cases,
                      size_t ncases, kvf_output_kind output, const char *ctx) {
    memset(w, 0, sizeof *w);
    kvf_element_error *e = &w->e;
    e->output = output;
    if (!v || v->type != KVF_JSON_OBJECT) return bad(r, "%s is not an object", ctx);
    const kvf_json *cv = kvf_json_get(v, "case");
    int64_t id, b, h, d, len, S, abits, rbits, ulps = -1;
    if (cv && cv->type != KVF_JSON_NULL) {
        if (kvf_json_i64(cv, &id) || id < 0 || (size_t)id >= ncases)
            return bad(r, "%s: \"case\" is not an index into the cases table", ctx);
        w->ci = cases[id];
    }
    if (get_i64(r, v, "b", 0, &b, ctx) || get_i64(r, v, "h", 0, &h, ctx) ||
        get_i64(r, v, "d", -1, &d, ctx) || get_i64(r, v, "seq_len", 0, &len, ctx) ||
        get_i64(r, v, "page_size", 0, &S, ctx) || get_i64(r, v, "a_bits", 0, &abits, ctx) ||
        get_i64(r, v, "r_bits", 0, &rbits, ctx) || get_num(r, v, "a", &e->kernel_value, ctx) ||
        get_num(r, v, "r", &e->rounded_value, ctx) || get_num(r, v, "x", &e->exact_value, ctx) ||
        get_num(r, v, "abs", &e->abs_error, ctx) || get_num(r, v, "rel", &e->rel_error, ctx) ||
        get_num(r, v, "allowed", &e->allowed, ctx) || get_num(r, v, "margin", &e->margin, ctx) ||
        get_num(r, v, "excess_margin", &e->excess_margin, ctx))
        return -1;
    const kvf_json *uv = kvf_json_get(v, "ulps");
    if (!uv || (uv->type != KVF_JSON_NULL && (kvf_json_i64(uv, &ulps) || ulps < 0)))
        return bad(r, "%s: \"ulps\" is missing or not an integer >= 0 or null", ctx);
    const kvf_json *fv = kvf_json_get(v, "fails"), *ov = kvf_json_get(v, "out_of_model");
    if (!fv || fv->type != KVF_JSON_BOOL) return bad(r, "%s: \"fails\" is not a boolean", ctx);
    if (!ov || ov->type != KVF_JSON_BOOL)
        return bad(r, "%s: \"out_of_model\" is not a boolean", ctx);
    e->out_of_model = ov->boolean;
    if (b > INT32_MAX || h > INT32_MAX || d > INT32_MAX || S > INT32_MAX || abits > UINT32_MAX ||
        rbits > UINT32_MAX)
        return bad(r, "%s: a coordinate or bit pattern is out of range", ctx);
    e->b = (int32_t)b;
    e->h = (int32_t)h;
    e->d = (int32_t)d;
    e->kernel_bits = (uint32_t)abits;
    e->rounded_bits = (uint32_t)rbits;
    e->ulps = ulps;
    e->fails = fv->boolean;
    w->seq_len = len;
    w->page_size = (int32_t)S;
    if (w->ci) w->ci->refs++;
    return 0;
}

static int read_outstats(reader *r, const kvf_json *v, kvf_outstats *o, int worst_n,
                         kvf_case_info *const *cases, size_t ncases, kvf_output_kind output,
                         const char *ctx) {
    char sub[256];
    if (!v || v->type != KVF_JSON_OBJECT) return bad(r, "%s is missing or not an object", ctx);
    if (get_i64(r, v, "elements", 0, &o->elements, ctx) ||
        get_i64(r, v, "violations", 0, &o->violations, ctx) ||
        get_i64(r, v, "nonfinite", 0, &o->nonfinite, ctx) ||
        get_num(r, v, "max_abs", &o->max_abs, ctx) || get_num(r, v, "max_rel", &o->max_rel, ctx) ||
        get_i64(r, v, "max_ulps", 0, &o->max_ulps, ctx) ||
        get_num(r, v, "max_margin", &o->max_margin, ctx) ||
        get_num(r, v, "max_excess_margin", &o->max_excess, ctx))
        return -1;
    const kvf_json *hist = kvf_json_get(v, "hist");
    kvf_hist *hs[4] = {&o->abs, &o->rel, &o->ulp, &o->margin};
    static const char *const hn[4] = {"abs", "rel", "ulp", "margin"};
    for (int i = 0; i < 4; i++) {
        snprintf(sub, sizeof sub, "%s.hist.%s", ctx, hn[i]);
        if (read_hist(r, kvf_json_get(hist, hn[i]), hs[i], sub)) return -1;
        if (hs[i]->total != o->elements)
            return bad(r, "%s counts %lld elements, not %lld", sub, (long long)hs[i]->total,
                       (long long)o->elements);
    }
    const kvf_json *dens = get_array(r, v, "abs_vs_exact", ctx);
    if (!dens) return -1;
    for (size_t i = 0; i < dens->count; i++) {
        const kvf_json *p = &dens->items[i];
        int32_t ao, xo;
        int64_t cnt;
        if (p->type != KVF_JSON_ARRAY || p->count != 3 || read_octave(&p->items[0], &ao) ||
            read_octave(&p->items[1], &xo) || kvf_json_i64(&p->items[2], &cnt) || cnt < 0)
            return bad(r,
                       "%s.abs_vs_exact[%zu] is not an [abs octave, exact octave, count] "
                       "triple",
                       ctx, i);
        int64_t *c = kvf_map_get(&o->dens, KVF_DENS_KEY(ao, xo), 1);
        if (!c) return bad(r, "out of memory");
        *c += cnt;
    }
    for (int k = 0; k < KVF_CLASS_COUNT; k++) {
        snprintf(sub, sizeof sub, "%s.%s", ctx, CLASS_NAME[k]);
        const kvf_json *arr = get_array(r, v, CLASS_NAME[k], ctx);
        if (!arr || read_cells(r, arr, &o->by[k], k == KVF_CLASS_SLOT, sub)) return -1;
    }
    const kvf_json *worst = get_array(r, v, "worst", ctx);
    if (!worst) return -1;
    if (worst->count > (size_t)worst_n)
        return bad(r, "%s.worst lists %zu elements, more than worst_n = %d", ctx, worst->count,
                   worst_n);
    for (size_t i = 0; i < worst->count; i++) {
        kvf_worst w;
        snprintf(sub, sizeof sub, "%s.worst[%zu]", ctx, i);
        if (read_worst(r, &worst->items[i], &w, cases, ncases, output, sub)) return -1;
        worst_insert(o, worst_n, w); /* re-sorts: a hand-edited file cannot break the ranking */
    }
    return 0;
}

static int read_hex_u64(const char *s, uint64_t *out) {
    if (strlen(s) != 16) return -1;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

static int read_stats(reader *r, const kvf_json *root, kvf_stats **result) {
    char ctx[64];
    kvf_case_info **cases = NULL;
    size_t ncases = 0;
    kvf_stats *s = NULL;
    int rc = -1;
    if (root->type != KVF_JSON_OBJECT) return bad(r, "the top level is not an object");
    const kvf_json *fmt = kvf_json_get(root, "format");
    if (!fmt || fmt->type != KVF_JSON_STRING || strcmp(fmt->string, KVF_STATS_FORMAT) != 0)
        return bad(r, "\"format\" is not \"%s\"", KVF_STATS_FORMAT);
    int64_t version, bpo, scale, worst_n;
    if (get_i64(r, root, "version", 0, &version, "top level")) return -1;
    if (version != KVF_STATS_VERSION)
        return bad(r, "it has version %lld and this kvfuzz reads version %d", (long long)version,
                   KVF_STATS_VERSION);
    if (get_i64(r, root, "buckets_per_octave", 0, &bpo, "top level") ||
        get_i64(r, root, "bits_scale", 0, &scale, "top level") ||
        get_i64(r, root, "worst_n", 1, &worst_n, "top level"))
        return -1;
    if (bpo != KVF_STATS_BUCKETS_PER_OCTAVE || scale != KVF_BITS_SCALE)
        return bad(r, "buckets_per_octave must be %d and bits_scale %d",
                   KVF_STATS_BUCKETS_PER_OCTAVE, KVF_BITS_SCALE);
    if (worst_n > KVF_STATS_WORST_MAX)
        return bad(r, "worst_n %lld is above %d", (long long)worst_n, KVF_STATS_WORST_MAX);
    if (!(s = stats_alloc((int)worst_n))) return bad(r, "out of memory");
    const kvf_json *inc = kvf_json_get(root, "incomplete");
    if (inc && inc->type != KVF_JSON_BOOL) {
        bad(r, "\"incomplete\" is not a boolean");
        goto done;
    }
    s->incomplete = inc && inc->boolean;
    const kvf_json *ro = kvf_json_get(root, "require_overflow");
    if (!ro || ro->type != KVF_JSON_BOOL) {
        bad(r, "\"require_overflow\" is missing or not a boolean");
        goto done;
    }
    s->require_overflow = ro->boolean;
    if (get_opt_str(r, root, "label", &s->label, "top level") ||
        get_opt_str(r, root, "findings_dir", &s->findings_dir, "top level"))
        goto done;

    const kvf_json *sources = kvf_json_get(root, "sources");
    if (sources && sources->type != KVF_JSON_ARRAY) {
        bad(r, "\"sources\" is not an array");
        goto done;
    }
    if (sources && sources->count) {
        if (!(s->sources = calloc(sources->count, sizeof *s->sources))) {
            bad(r, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < sources->count; i++) {
            const kvf_json *src = &sources->items[i];
            kvf_source *d = &s->sources[s->nsources++];
            snprintf(ctx, sizeof ctx, "sources[%zu]", i);
            if (src->type != KVF_JSON_OBJECT) {
                bad(r, "%s is not an object", ctx);
                goto done;
            }
            const kvf_json *pid = kvf_json_get(src, "pid");
            if (pid && pid->type != KVF_JSON_NULL && kvf_json_i64(pid, &d->pid)) {
                bad(r, "%s: \"pid\" is not an integer", ctx);
                goto done;
            }
            if (get_opt_str(r, src, "command", &d->command, ctx) ||
                get_opt_str(r, src, "host", &d->host, ctx) ||
                get_opt_str(r, src, "started", &d->started, ctx) ||
                get_opt_str(r, src, "written", &d->written, ctx))
                goto done;
        }
    }

    const kvf_json *kernels = get_array(r, root, "kernels", "top level");
    if (!kernels) goto done;
    for (size_t i = 0; i < kernels->count; i++) {
        const kvf_json *k = &kernels->items[i];
        const kvf_json *name = kvf_json_get(k, "kernel");
        snprintf(ctx, sizeof ctx, "kernels[%zu]", i);
        if (!name || name->type != KVF_JSON_STRING) {
            bad(r, "%s: \"kernel\" is missing or not a string", ctx);
            goto done;
        }
        for (size_t j = 0; j < s->nkernels; j++)
            if (strcmp(s->kernels[j].kernel, name->string) == 0) {
                bad(r, "%s: kernel \"%s\" is listed twice", ctx, name->string);
                goto done;
            }
        kvf_kernel_runs *kr = kernel_runs_get(s, name->string);
        if (!kr) {
            bad(r, "out of memory");
            goto done;
        }
        if (get_i64(r, k, "ran", 0, &kr->ran, ctx) ||
            get_i64(r, k, "unsupported", 0, &kr->unsupported, ctx))
            goto done;
        for (int j = 0; j < N_RUN_ERRORS; j++)
            if (get_i64(r, k, kvf_finding_class_name((kvf_finding_class)RUN_ERROR_CLASSES[j]), 0,
                        &kr->errors[RUN_ERROR_CLASSES[j]], ctx))
                goto done;
    }

    const kvf_json *ct = get_array(r, root, "cases", "top level");
    if (!ct) goto done;
    if (ct->count && !(cases = calloc(ct->count, sizeof *cases))) {
        bad(r, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ct->count; i++) {
        const kvf_json *cv = &ct->items[i];
        snprintf(ctx, sizeof ctx, "cases[%zu]", i);
        const kvf_json *hv = kvf_json_get(cv, "hash");
        uint64_t hash = 0;
        int has_hash = hv && hv->type != KVF_JSON_NULL;
        if (cv->type != KVF_JSON_OBJECT ||
            (has_hash && (hv->type != KVF_JSON_STRING || read_hex_u64(hv->string, &hash)))) {
            bad(r, "%s: \"hash\" is not 16 lowercase hex digits or null", ctx);
            goto done;
        }
        char *path, *hex;
        if (get_opt_str(r, cv, "path", &path, ctx)) goto done;
        if (get_opt_str(r, cv, "kvfz_hex", &hex, ctx)) {
            free(path);
            goto done;
        }
        size_t hl = hex ? strlen(hex) : 0;
        int hex_ok = hl % 2 == 0 && hl <= 2 * KVF_STATS_EMBED_MAX;
        for (size_t j = 0; hex_ok && j < hl; j++)
            hex_ok = (hex[j] >= '0' && hex[j] <= '9') || (hex[j] >= 'a' && hex[j] <= 'f');
        if (!hex_ok) {
            free(path);
            free(hex);
            bad(r, "%s: \"kvfz_hex\" is not an even run of lowercase hex digits", ctx);
            goto done;
        }
        cases[ncases] = ci_new(has_hash, hash, path, NULL, 0, hex);
        free(path);
        free(hex);
        if (!cases[ncases]) {
            bad(r, "out of memory");
            goto done;
        }
        ncases++;
    }

    const kvf_json *groups = get_array(r, root, "groups", "top level");
    if (!groups) goto done;
    for (size_t i = 0; i < groups->count; i++) {
        const kvf_json *gv = &groups->items[i];
        const kvf_json *kn = kvf_json_get(gv, "kernel"), *rn = kvf_json_get(gv, "rule");
        snprintf(ctx, sizeof ctx, "groups[%zu]", i);
        if (!kn || kn->type != KVF_JSON_STRING || !rn || rn->type != KVF_JSON_STRING) {
            bad(r, "%s: \"kernel\" or \"rule\" is missing or not a string", ctx);
            goto done;
        }
        size_t before = s->ngroups;
        kvf_group *g = group_get(s, kn->string, rn->string);
        if (!g) {
            bad(r, "out of memory");
            goto done;
        }
        if (s->ngroups == before) {
            bad(r, "%s: kernel \"%s\" with rule \"%s\" appears twice", ctx, kn->string, rn->string);
            goto done;
        }
        if (get_i64(r, gv, "cases", 0, &g->cases, ctx) ||
            get_i64(r, gv, "passed", 0, &g->passed, ctx) ||
            get_i64(r, gv, "out_of_model", 0, &g->out_of_model, ctx) ||
            get_i64(r, gv, "rule_rejects_rounded", 0, &g->rejects_rounded, ctx))
            goto done;
        const kvf_json *fv = kvf_json_get(gv, "findings");
        if (!fv || fv->type != KVF_JSON_OBJECT) {
            bad(r, "%s: \"findings\" is missing or not an object", ctx);
            goto done;
        }
        for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++) {
            /* The buffer-violation classes came after the first stats files were written: a
             * file without them recorded none. */
            const char *name = kvf_finding_class_name((kvf_finding_class)c);
            if (c >= KVF_FINDING_UNWRITTEN_OUTPUT && !kvf_json_get(fv, name)) continue;
            if (get_i64(r, fv, name, 0, &g->findings[c], ctx)) goto done;
        }
        for (int out = 0; out < 2; out++) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.%s", ctx, OUTPUT_NAME[out]);
            if (read_outstats(r, kvf_json_get(gv, OUTPUT_NAME[out]), &g->out[out], s->worst_n,
                              cases, ncases, (kvf_output_kind)out, sub))
                goto done;
        }
        const kvf_json *oomv = kvf_json_get(gv, "out_of_model_rows");
        for (int out = 0; out < 2; out++) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.out_of_model_rows.%s", ctx, OUTPUT_NAME[out]);
            if (read_outstats(r, kvf_json_get(oomv, OUTPUT_NAME[out]), &g->oom[out], s->worst_n,
                              cases, ncases, (kvf_output_kind)out, sub))
                goto done;
        }
        int64_t failed = 0;
        for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
            failed += g->findings[c];
        if (g->passed + g->out_of_model + g->rejects_rounded + failed != g->cases) {
            bad(r,
                "%s: passed, out_of_model, rule_rejects_rounded and findings add up to %lld, "
                "not the %lld cases",
                ctx, (long long)(g->passed + g->out_of_model + g->rejects_rounded + failed),
                (long long)g->cases);
            goto done;
        }
    }
    rc = 0;
done:
    for (size_t i = 0; i < ncases; i++)
        ci_unref(cases[i]); /* worst entries hold their own references */
    free(cases);
    if (rc) {
        kvf_stats_free(s);
        return -1;
    }
    *result = s;
    return 0;
}

int kvf_stats_read(kvf_stats **out, const char *path, kvf_error *err) {
    *out = NULL;
    char *data;
    size_t size;
    if (kvf_read_file(path, &data, &size))
        return kvf_error_set(err, errno == ENOMEM ? KVF_ENOMEM : KVF_EIO, "cannot read %s: %s",
                             path, strerror(errno));
    kvf_json root;
    char msg[200];
    if (kvf_json_parse(&root, data, size, msg, sizeof msg)) {
        free(data);
        return kvf_error_set(err, KVF_EFORMAT, "malformed stats file %s: invalid JSON (%s)", path,
                             msg);
    }
    free(data);
    reader r = {path, err, 0};
    int rc = read_stats(&r, &root, out);
    kvf_json_free(&root);
    return rc ? (err && err->code ? err->code : KVF_EFORMAT) : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Merging and comparing                                                                       */
/* ------------------------------------------------------------------------------------------ */

static int outstats_merge(kvf_outstats *d, const kvf_outstats *s, int worst_n) {
    d->elements += s->elements;
    d->violations += s->violations;
    d->nonfinite += s->nonfinite;
    if (s->max_abs > d->max_abs) d->max_abs = s->max_abs;
    if (s->max_rel > d->max_rel) d->max_rel = s->max_rel;
    if (s->max_ulps > d->max_ulps) d->max_ulps = s->max_ulps;
    if (s->max_margin > d->max_margin) d->max_margin = s->max_margin;
    if (s->max_excess > d->max_excess) d->max_excess = s->max_excess;
    if (hist_merge(&d->abs, &s->abs) || hist_merge(&d->rel, &s->rel) ||
        hist_merge(&d->ulp, &s->ulp) || hist_merge(&d->margin, &s->margin) ||
        counts_merge(&d->dens, &s->dens))
        return -1;
    for (int k = 0; k < KVF_CLASS_COUNT; k++) {
        const kvf_map *m = &s->by[k];
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->used[i]) continue;
            kvf_cell *c = cell_get(&d->by[k], m->keys[i]);
            if (!c) return -1;
            cell_merge(c, (const kvf_cell *)(m->vals + i * m->vsize));
        }
    }
    for (int i = 0; i < s->worst_count; i++) {
        kvf_worst w = s->worst[i];
        if (!worst_wants(d, worst_n, &w)) break; /* s is sorted: the rest rank lower still */
        if (w.ci) {
            w.ci = ci_new(w.ci->has_hash, w.ci->hash, w.ci->path, NULL, 0, w.ci->hex);
            if (!w.ci) return -1;
        }
        worst_insert(d, worst_n, w);
    }
    return 0;
}

static char *dup_or_null(const char *s, int *bad_flag) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *bad_flag = 1;
    return d;
}

void kvf_stats_mark_incomplete(kvf_stats *s) {
    if (s) s->incomplete = 1;
}

static int merge_into(kvf_stats *dst, const kvf_stats *src, int with_sources, kvf_error *err);

int kvf_stats_merge(kvf_stats *dst, const kvf_stats *src, kvf_error *err) {
    return merge_into(dst, src, 1, err);
}

int kvf_stats_merge_shard(kvf_stats *dst, const kvf_stats *src, kvf_error *err) {
    return merge_into(dst, src, 0, err);
}

static int merge_into(kvf_stats *dst, const kvf_stats *src, int with_sources, kvf_error *err) {
    if (!dst || !src) return kvf_error_set(err, KVF_EINVAL, "merging needs two stats objects");
    if (dst == src)
        return kvf_error_set(err, KVF_EINVAL, "a stats object cannot be merged into itself");
    if (src->worst_n > dst->worst_n) {
        for (size_t i = 0; i < dst->ngroups; i++)
            for (int out = 0; out < 4; out++) {
                kvf_outstats *o =
                    out < 2 ? &dst->groups[i]->out[out] : &dst->groups[i]->oom[out - 2];
                kvf_worst *nw = realloc(o->worst, (size_t)src->worst_n * sizeof *nw);
                if (!nw) goto oom;
                o->worst = nw;
            }
        dst->worst_n = src->worst_n;
    }
    for (size_t i = 0; i < src->ngroups; i++) {
        const kvf_group *sg = src->groups[i];
        kvf_group *g = group_get(dst, sg->kernel, sg->rule);
        if (!g) goto oom;
        g->cases += sg->cases;
        g->passed += sg->passed;
        g->out_of_model += sg->out_of_model;
        g->rejects_rounded += sg->rejects_rounded;
        for (int c = 0; c < KVF_FINDING_CLASS_COUNT; c++)
            g->findings[c] += sg->findings[c];
        for (int out = 0; out < 2; out++)
            if (outstats_merge(&g->out[out], &sg->out[out], dst->worst_n) ||
                outstats_merge(&g->oom[out], &sg->oom[out], dst->worst_n))
                goto oom;
    }
    for (size_t i = 0; i < src->nkernels; i++) {
        kvf_kernel_runs *k = kernel_runs_get(dst, src->kernels[i].kernel);
        if (!k) goto oom;
        k->ran += src->kernels[i].ran;
        k->unsupported += src->kernels[i].unsupported;
        for (int c = 0; c < KVF_FINDING_CLASS_COUNT; c++)
            k->errors[c] += src->kernels[i].errors[c];
    }
    if (with_sources && src->nsources) {
        kvf_source *ns = realloc(dst->sources, (dst->nsources + src->nsources) * sizeof *ns);
        if (!ns) goto oom;
        dst->sources = ns;
        for (size_t i = 0; i < src->nsources; i++) {
            int b = 0;
            kvf_source *d = &dst->sources[dst->nsources++];
            const kvf_source *sv = &src->sources[i];
            d->command = dup_or_null(sv->command, &b);
            d->host = dup_or_null(sv->host, &b);
            d->started = dup_or_null(sv->started, &b);
            d->written = dup_or_null(sv->written, &b);
            d->pid = sv->pid;
            if (b) goto oom;
        }
    }
    int b = 0;
    if (!dst->label) dst->label = dup_or_null(src->label, &b);
    if (!dst->findings_dir) dst->findings_dir = dup_or_null(src->findings_dir, &b);
    if (b) goto oom;
    dst->incomplete |= src->incomplete;
    /* A merge of runs that disagree says so the strict way: some of its out-of-model failures
     * were counted as kernel failures. */
    dst->require_overflow |= src->require_overflow;
    return 0;
oom:
    dst->incomplete = 1;
    return kvf_error_set(err, KVF_ENOMEM, "out of memory merging statistics");
}

static char *serialize_to_string(const kvf_stats *s) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return NULL;
    int rc = kvf_stats_serialize(s, f, 0);
    if (fclose(f) != 0 || rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

int kvf_stats_equal(const kvf_stats *a, const kvf_stats *b) {
    char *x = serialize_to_string(a), *y = serialize_to_string(b);
    int eq = x && y && strcmp(x, y) == 0;
    free(x);
    free(y);
    return eq;
}

/* ------------------------------------------------------------------------------------------ */
/* Derived figures                                                                             */
/* ------------------------------------------------------------------------------------------ */

double kvf_outstats_mean_bits(const kvf_outstats *o) {
    /* Every element lands in exactly one q-head cell, so the head cells sum to the output. */
    int64_t n = 0, sum = 0;
    const kvf_map *m = &o->by[KVF_CLASS_HEAD];
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        const kvf_cell *c = (const kvf_cell *)(m->vals + i * m->vsize);
        n += c->bits_n;
        sum += c->bits_sum;
    }
    return n ? (double)sum / KVF_BITS_SCALE / (double)n : NAN;
}

int64_t kvf_outstats_ulp_quantile(const kvf_outstats *o, double q) {
    const kvf_hist *h = &o->ulp;
    if (h->total == 0) return -1;
    int64_t rank = (int64_t)ceil(q * (double)h->total);
    if (rank < 1) rank = 1;
    int64_t cum = h->zero;
    if (cum >= rank) return 0;
    size_t n;
    int64_t *keys = kvf_map_sorted_keys(&h->buckets, &n);
    int64_t result = -1;
    for (size_t i = 0; i < n; i++) {
        cum += *(const int64_t *)kvf_map_find(&h->buckets, keys[i]);
        if (cum >= rank) {
            /* The largest integer below the bucket's upper edge. */
            double hi = kvf_stats_bucket_lo((int32_t)keys[i] + 1);
            double top = ceil(hi) - 1;
            result = top > 9e18 ? INT64_MAX : (int64_t)top;
            break;
        }
    }
    free(keys);
    return result;
}
