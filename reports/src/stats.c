/* The statistics' data model (stats_internal.h): case records and the worst-element
 * ranking, groups, creation and release, and the figures derived from them. Collecting, writing,
 * reading and merging each have a file of their own. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stats_internal.h"

const char *const kvf__output_name[2] = {"o", "lse"};
const char *const kvf__class_name[KVF_CLASS_COUNT] = {"by_head", "by_dim", "by_seqlen", "by_slot"};
/* A class is listed when its producer is RUN or HOST (stats_internal.h). */
#define KVF__RUN_ERROR_JUDGE(c)
#define KVF__RUN_ERROR_RUN(c) c,
#define KVF__RUN_ERROR_HOST(c) c,
const int kvf__run_error_classes[KVF__N_RUN_ERRORS] = {
#define KVF_FINDING_CLASS(id, name, producer, fails, doc)                                          \
    KVF__RUN_ERROR_##producer(KVF_FINDING_##id)
#include "kvfuzz/finding_classes.def"
#undef KVF_FINDING_CLASS
};

int kvf__group_ptr_cmp(const void *a, const void *b) {
    const kvf__group *x = *(kvf__group *const *)a, *y = *(kvf__group *const *)b;
    int c = strcmp(x->kernel, y->kernel);
    return c ? c : strcmp(x->rule, y->rule);
}

/* ------------------------------------------------------------------------------------------ */
/* Case records and the worst-element ranking                                                  */
/* ------------------------------------------------------------------------------------------ */

void kvf__case_info_unref(kvf__case_info *ci) {
    if (!ci || --ci->refs > 0) return;
    free(ci->path);
    free(ci->hex);
    free(ci);
}

void kvf__hex_bytes(const char *hex, uint8_t *out) {
    for (size_t i = 0; hex[i] && hex[i + 1]; i += 2) {
        const int hi = hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10;
        const int lo = hex[i + 1] <= '9' ? hex[i + 1] - '0' : hex[i + 1] - 'a' + 10;
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
}

kvf__case_info *kvf__case_info_new(int has_hash, uint64_t hash, const char *path,
                                   const uint8_t *bytes, size_t size, const char *hex) {
    kvf__case_info *ci = calloc(1, sizeof *ci);
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
    kvf__case_info_unref(ci);
    return NULL;
}

static int cmp_str_null(const char *a, const char *b) {
    return strcmp(a ? a : "", b ? b : "");
}

int kvf__case_info_cmp(const kvf__case_info *a, const kvf__case_info *b) {
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

int kvf__worst_cmp(const kvf__worst *x, const kvf__worst *y) {
    int c;
    /* Headroom first: the margin alone puts every bf16 tie (margin ~1 for the correctly
     * rounded value) ahead of real errors that are smaller than a rounding. */
    if ((c = cmp_dbl_desc(x->e.excess_margin, y->e.excess_margin))) return c;
    if ((c = cmp_dbl_desc(x->e.margin, y->e.margin))) return c;
    /* A one-sided NaN (distance -1) is the worst distance of all. */
    uint64_t ux = (uint64_t)x->e.ulps, uy = (uint64_t)y->e.ulps;
    CMP_DESC(ux, uy);
    if ((c = cmp_dbl_desc(x->e.abs_error, y->e.abs_error))) return c;
    if ((c = kvf__case_info_cmp(x->ci, y->ci))) return c;
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
int kvf__worst_wants(const kvf__outstats *o, int worst_n, const kvf__worst *cand) {
    return o->worst_count < worst_n || kvf__worst_cmp(cand, &o->worst[o->worst_count - 1]) < 0;
}

/* How a descending field of the order above (NaN ranks ahead of every number) places an
 * entry's value v against a candidate's 0: ahead (1), level (0) or behind (-1). */
static int against_zero(double v) {
    return v > 0 || isnan(v) ? 1 : v == 0 ? 0 : -1;
}

/* The list is full and its last entry ranks ahead of any all-zero candidate on the excess
 * margin, the margin, the distance or the error. An all-zero last entry leaves the order to
 * the case and the position, which only the candidate itself can settle. */
int kvf__worst_shuts_out_zero(const kvf__outstats *o, int worst_n) {
    if (worst_n <= 0) return 1;
    if (o->worst_count < worst_n) return 0;
    const kvf_element_error *w = &o->worst[o->worst_count - 1].e;
    int k;
    if ((k = against_zero(w->excess_margin)) || (k = against_zero(w->margin))) return k > 0;
    if (w->ulps != 0) return 1; /* compared unsigned: a one-sided NaN's -1 is the largest */
    return against_zero(w->abs_error) > 0;
}

/* Inserts cand (whose ci reference is handed over) keeping the list sorted and at most
 * worst_n long. */
void kvf__worst_insert(kvf__outstats *o, int worst_n, kvf__worst cand) {
    int n = o->worst_count;
    if (n == worst_n) {
        kvf__case_info_unref(o->worst[n - 1].ci);
        n--;
    }
    int pos = n;
    while (pos > 0 && kvf__worst_cmp(&cand, &o->worst[pos - 1]) < 0) {
        o->worst[pos] = o->worst[pos - 1];
        pos--;
    }
    o->worst[pos] = cand;
    o->worst_count = n + 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Groups, create, free                                                                        */
/* ------------------------------------------------------------------------------------------ */

static void outstats_free(kvf__outstats *o) {
    kvf__map_free(&o->abs.buckets);
    kvf__map_free(&o->rel.buckets);
    kvf__map_free(&o->ulp.buckets);
    kvf__map_free(&o->margin.buckets);
    kvf__map_free(&o->dens);
    for (int k = 0; k < KVF_CLASS_COUNT; k++)
        kvf__map_free(&o->by[k]);
    for (int i = 0; i < o->worst_count; i++)
        kvf__case_info_unref(o->worst[i].ci);
    free(o->worst);
}

static int outstats_init(kvf__outstats *o, int worst_n) {
    memset(o, 0, sizeof *o);
    kvf__map_init(&o->abs.buckets, sizeof(int64_t));
    kvf__map_init(&o->rel.buckets, sizeof(int64_t));
    kvf__map_init(&o->ulp.buckets, sizeof(int64_t));
    kvf__map_init(&o->margin.buckets, sizeof(int64_t));
    kvf__map_init(&o->dens, sizeof(int64_t));
    for (int k = 0; k < KVF_CLASS_COUNT; k++)
        kvf__map_init(&o->by[k], sizeof(kvf__cell));
    o->worst = calloc((size_t)worst_n, sizeof *o->worst);
    return o->worst ? 0 : -1;
}

static void group_free(kvf__group *g) {
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
kvf__group *kvf__group_get(kvf_stats *s, const char *kernel, const char *rule) {
    for (size_t i = 0; i < s->ngroups; i++)
        if (strcmp(s->groups[i]->kernel, kernel) == 0 && strcmp(s->groups[i]->rule, rule) == 0)
            return s->groups[i];
    if (s->ngroups == s->cap_groups) {
        size_t ncap = s->cap_groups ? s->cap_groups * 2 : 8;
        kvf__group **ng = realloc(s->groups, ncap * sizeof *ng);
        if (!ng) return NULL;
        s->groups = ng;
        s->cap_groups = ncap;
    }
    kvf__group *g = calloc(1, sizeof *g);
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

kvf__kernel_runs *kvf__kernel_runs_get(kvf_stats *s, const char *kernel) {
    for (size_t i = 0; i < s->nkernels; i++)
        if (strcmp(s->kernels[i].kernel, kernel) == 0) return &s->kernels[i];
    kvf__kernel_runs *nk = realloc(s->kernels, (s->nkernels + 1) * sizeof *nk);
    if (!nk) return NULL;
    s->kernels = nk;
    kvf__kernel_runs *k = &s->kernels[s->nkernels];
    memset(k, 0, sizeof *k);
    if (!(k->kernel = strdup(kernel))) return NULL;
    s->nkernels++;
    return k;
}

static void source_free(kvf__source *src) {
    free(src->devices);
    free(src->command);
    free(src->host);
    free(src->started);
    free(src->written);
}

void kvf__utc_now(char *buf, size_t size) {
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

kvf_stats *kvf__stats_alloc(int worst_n) {
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
    kvf_stats *s = kvf__stats_alloc(opts->worst_n);
    if (!s) return kvf_error_set(err, KVF_ENOMEM, "out of memory creating statistics");
    s->flush_interval_s = opts->flush_interval_s;
    s->require_overflow = opts->require_overflow != 0;
    char resolved[PATH_MAX];
    const char *dir = opts->findings_dir;
    if (dir && realpath(dir, resolved)) dir = resolved;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char now[32];
    kvf__utc_now(now, sizeof now);
    s->sources = calloc(1, sizeof *s->sources);
    int bad = !s->sources;
    if (!bad) {
        s->nsources = 1;
        s->own_source = 0;
        kvf__source *src = &s->sources[0];
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
    kvf__pending_free(s->spare_pending);
    free(s);
}

int64_t kvf_stats_elements(const kvf_stats *s) {
    int64_t n = 0;
    for (size_t i = 0; s && i < s->ngroups; i++)
        for (int k = 0; k < 2; k++)
            n += s->groups[i]->out[k].elements + s->groups[i]->oom[k].elements;
    return n;
}

size_t kvf_stats_verdicts(const kvf_stats *s, kvf_verdict_counts *out, size_t max) {
    if (!s) return 0;
    kvf__group **sorted = malloc((s->ngroups ? s->ngroups : 1) * sizeof *sorted);
    if (!sorted) return 0;
    if (s->ngroups) memcpy(sorted, s->groups, s->ngroups * sizeof *sorted);
    if (s->ngroups) qsort(sorted, s->ngroups, sizeof *sorted, kvf__group_ptr_cmp);
    for (size_t i = 0; i < s->ngroups && i < max; i++) {
        const kvf__group *g = sorted[i];
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
/* Derived figures                                                                             */
/* ------------------------------------------------------------------------------------------ */

double kvf__outstats_mean_bits(const kvf__outstats *o) {
    /* Every element lands in exactly one q-head cell, so the head cells sum to the output. */
    int64_t n = 0, sum = 0;
    const kvf__map *m = &o->by[KVF_CLASS_HEAD];
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        const kvf__cell *c = (const kvf__cell *)(m->vals + i * m->vsize);
        n += c->bits_n;
        sum += c->bits_sum;
    }
    return n ? (double)sum / KVF_BITS_SCALE / (double)n : NAN;
}

int64_t kvf__outstats_ulp_quantile(const kvf__outstats *o, double q) {
    const kvf__hist *h = &o->ulp;
    if (h->total == 0) return -1;
    int64_t rank = (int64_t)ceil(q * (double)h->total);
    if (rank < 1) rank = 1;
    int64_t cum = h->zero;
    if (cum >= rank) return 0;
    size_t n;
    int64_t *keys = kvf__map_sorted_keys(&h->buckets, &n);
    int64_t result = -1;
    for (size_t i = 0; i < n; i++) {
        cum += *(const int64_t *)kvf__map_find(&h->buckets, keys[i]);
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

int kvf_stats_set_devices(kvf_stats *s, const kvf_stats_device *d, size_t n, kvf_error *err) {
    if (s->nsources != 1 || s->own_source != 0)
        return kvf_error_set(err, KVF_EINVAL, "per-device figures belong to one run's statistics");
    kvf_stats_device *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (n && !copy) return kvf_error_set(err, KVF_ENOMEM, "out of memory for device figures");
    if (n) memcpy(copy, d, n * sizeof *copy);
    free(s->sources[0].devices);
    s->sources[0].devices = copy;
    s->sources[0].ndevices = n;
    return 0;
}
