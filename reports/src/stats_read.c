/* Reading a stats file (docs/reports.md), through jansson: every key checked, every count
 * cross-checked, and the first problem named in one sentence; and a folder of them, merged. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvfuzz/json_io.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"
#include "stats_internal.h"

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

/* Classes that came after the first stats files were written (the host's buffer violations,
 * and every class from invariance on): a file without one recorded none of it. */
static int added_later(kvf_finding_class c) {
    return kvf_finding_class_producer(c) == KVF_FINDING_BY_HOST || c >= KVF_FINDING_INVARIANCE;
}

static int get_i64(reader *r, const json_t *obj, const char *key, int64_t lo, int64_t *out,
                   const char *ctx) {
    if (kvf_json_to_i64(json_object_get(obj, key), out) || *out < lo)
        return bad(r, "%s: \"%s\" is missing or not an integer >= %lld", ctx, key, (long long)lo);
    return 0;
}

static int get_num(reader *r, const json_t *obj, const char *key, double *out, const char *ctx) {
    if (kvf_json_to_double(json_object_get(obj, key), out))
        return bad(r, "%s: \"%s\" is missing or not a number", ctx, key);
    return 0;
}

/* A number no statistic can hold below 0 or as NaN: an error, a margin, a time. Checked only
 * where `check` (a maximum over no element is the writer's starting value). */
static int get_nonneg(reader *r, const json_t *obj, const char *key, int check, double *out,
                      const char *ctx) {
    if (get_num(r, obj, key, out, ctx)) return -1;
    if (check && !(*out >= 0))
        return bad(r, "%s: \"%s\" is %g; it is a number >= 0", ctx, key, *out);
    return 0;
}

/* A count that cannot pass another (violations among elements). */
static int check_within(reader *r, int64_t part, const char *pname, int64_t whole,
                        const char *wname, const char *ctx) {
    if (part > whole)
        return bad(r, "%s: %s %lld is more than its %lld %s", ctx, pname, (long long)part,
                   (long long)whole, wname);
    return 0;
}

/* A kernel or rule name: 1 to 4096 bytes, no control character (it is printed on a line). */
static int name_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f) return 0;
    return n >= 1 && n <= 4096;
}

/* A string member (strdup'd into *out) or null / absent (*out = NULL). */
static int get_opt_str(reader *r, const json_t *obj, const char *key, char **out, const char *ctx) {
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return bad(r, "%s: \"%s\" is not a string", ctx, key);
    if (!(*out = strdup(json_string_value(v)))) return bad(r, "out of memory");
    return 0;
}

static const json_t *get_array(reader *r, const json_t *obj, const char *key, const char *ctx) {
    const json_t *v = json_object_get(obj, key);
    if (!v || !json_is_array(v)) {
        bad(r, "%s: \"%s\" is missing or not an array", ctx, key);
        return NULL;
    }
    return v;
}

/* A run's per-device figures (optional: runs without --devices have none). */
static int read_devices(reader *r, const json_t *v, kvf__source *src, const char *ctx) {
    if (!v || json_is_null(v)) return 0;
    if (!json_is_array(v)) return bad(r, "%s: \"devices\" is not an array", ctx);
    size_t n = json_array_size(v);
    if (n > 4096) return bad(r, "%s: \"devices\" lists %zu devices", ctx, n);
    if (n == 0) return 0;
    if (!(src->devices = calloc(n, sizeof *src->devices))) return bad(r, "out of memory");
    src->ndevices = n;
    for (size_t k = 0; k < n; k++) {
        const json_t *dj = json_array_get(v, k);
        kvf_stats_device *d = &src->devices[k];
        int64_t ord;
        if (!json_is_object(dj)) return bad(r, "%s: devices[%zu] is not an object", ctx, k);
        if (get_i64(r, dj, "device", 0, &ord, ctx) || get_i64(r, dj, "cases", 0, &d->cases, ctx) ||
            get_nonneg(r, dj, "seconds", 1, &d->seconds, ctx) ||
            get_i64(r, dj, "crashes", 0, &d->crashes, ctx) ||
            get_i64(r, dj, "hangs", 0, &d->hangs, ctx) ||
            get_i64(r, dj, "kernel_errors", 0, &d->kernel_errors, ctx))
            return -1;
        if (ord > 1000000) return bad(r, "%s: devices[%zu]: device %lld", ctx, k, (long long)ord);
        if (isinf(d->seconds)) return bad(r, "%s: devices[%zu]: \"seconds\" is not finite", ctx, k);
        d->ordinal = (int)ord;
        const json_t *ret = json_object_get(dj, "retired"), *why = json_object_get(dj, "why");
        if (!json_is_boolean(ret))
            return bad(r, "%s: devices[%zu]: \"retired\" is missing or not a boolean", ctx, k);
        d->retired = json_is_true(ret);
        if (why && json_is_string(why))
            snprintf(d->why, sizeof d->why, "%s", json_string_value(why));
        else if (why && !json_is_null(why))
            return bad(r, "%s: devices[%zu]: \"why\" is not a string", ctx, k);
    }
    return 0;
}

/* Bucket indices span the positive doubles: 4 * [-1075, 1024). */
#define BUCKET_MIN (-4 * 1075)
#define BUCKET_MAX (4 * 1024)

static int read_hist(reader *r, const json_t *v, kvf__hist *h, const char *ctx) {
    if (!v || !json_is_object(v)) return bad(r, "%s is missing or not an object", ctx);
    if (get_i64(r, v, "total", 0, &h->total, ctx) || get_i64(r, v, "zero", 0, &h->zero, ctx) ||
        get_i64(r, v, "inf", 0, &h->inf, ctx) || get_i64(r, v, "nan", 0, &h->nan, ctx))
        return -1;
    const json_t *b = get_array(r, v, "buckets", ctx);
    if (!b) return -1;
    int64_t sum = h->zero;
    if (kvf__count_add(&sum, h->inf) || kvf__count_add(&sum, h->nan))
        return bad(r, "%s: the counts add up past 2^63 - 1", ctx);
    for (size_t i = 0; i < json_array_size(b); i++) {
        const json_t *p = json_array_get(b, i);
        int64_t idx, cnt;
        if (!json_is_array(p) || json_array_size(p) != 2 ||
            kvf_json_to_i64(json_array_get(p, 0), &idx) ||
            kvf_json_to_i64(json_array_get(p, 1), &cnt) || idx < BUCKET_MIN || idx >= BUCKET_MAX ||
            cnt < 0)
            return bad(r, "%s: buckets[%zu] is not a [bucket, count] pair in range", ctx, i);
        int64_t *c = kvf__map_get(&h->buckets, idx, 1);
        if (!c) return bad(r, "out of memory");
        if (kvf__count_add(c, cnt) || kvf__count_add(&sum, cnt))
            return bad(r, "%s: the counts add up past 2^63 - 1", ctx);
    }
    if (sum != h->total)
        return bad(r, "%s: the counts add up to %lld, not the stated total %lld", ctx,
                   (long long)sum, (long long)h->total);
    return 0;
}

static int read_octave(const json_t *v, int32_t *out) {
    int64_t i;
    if (json_is_string(v) && strcmp(json_string_value(v), "zero") == 0) {
        *out = KVF_OCT_ZERO;
    } else if (json_is_string(v) && strcmp(json_string_value(v), "inf") == 0) {
        *out = KVF_OCT_INF;
    } else if (kvf_json_to_i64(v, &i) == 0 && i >= -1075 && i < 1024) {
        *out = (int32_t)i;
    } else {
        return -1;
    }
    return 0;
}

static int read_cells(reader *r, const json_t *arr, kvf__map *m, int slot, const char *ctx) {
    size_t first = slot ? 2 : 1;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *p = json_array_get(arr, i);
        int64_t key, key2 = 0, ints[6];
        double dbl[2];
        int ok = json_is_array(p) && json_array_size(p) == first + 8 &&
                 kvf_json_to_i64(json_array_get(p, 0), &key) == 0 && key >= 0 &&
                 (!slot || (kvf_json_to_i64(json_array_get(p, 1), &key2) == 0 && key >= 1 &&
                            key < 65536 && key2 >= 0 && key2 < key));
        for (size_t j = 0; ok && j < 6; j++)
            ok = kvf_json_to_i64(json_array_get(p, first + j), &ints[j]) == 0 && ints[j] >= 0;
        for (size_t j = 0; ok && j < 2; j++)
            ok = kvf_json_to_double(json_array_get(p, first + 6 + j), &dbl[j]) == 0 && dbl[j] >= 0;
        if (!ok || (key > INT32_MAX && !slot))
            return bad(r, "%s[%zu] is not a well-formed class cell", ctx, i);
        /* fails, nonfinite and bits_n count among its n elements */
        if (ints[1] > ints[0] || ints[2] > ints[0] || ints[3] > ints[0])
            return bad(r,
                       "%s[%zu] counts more failing, nonfinite or measured elements than its %lld",
                       ctx, i, (long long)ints[0]);
        kvf__cell *c = kvf__map_get(m, slot ? KVF_SLOT_KEY(key, key2) : key, 1);
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

static int read_worst(reader *r, const json_t *v, kvf__worst *w, kvf__case_info *const *cases,
                      size_t ncases, kvf_output_kind output, const char *ctx) {
    memset(w, 0, sizeof *w);
    kvf_element_error *e = &w->e;
    e->output = output;
    if (!v || !json_is_object(v)) return bad(r, "%s is not an object", ctx);
    const json_t *cv = json_object_get(v, "case");
    int64_t id, b, h, d, len, S, abits, rbits, ulps = -1;
    if (cv && !json_is_null(cv)) {
        if (kvf_json_to_i64(cv, &id) || id < 0 || (size_t)id >= ncases)
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
    const json_t *uv = json_object_get(v, "ulps");
    if (!uv || (!json_is_null(uv) && (kvf_json_to_i64(uv, &ulps) || ulps < 0)))
        return bad(r, "%s: \"ulps\" is missing or not an integer >= 0 or null", ctx);
    const json_t *fv = json_object_get(v, "fails"), *ov = json_object_get(v, "out_of_model");
    if (!fv || !json_is_boolean(fv)) return bad(r, "%s: \"fails\" is not a boolean", ctx);
    if (!ov || !json_is_boolean(ov)) return bad(r, "%s: \"out_of_model\" is not a boolean", ctx);
    e->out_of_model = json_is_true(ov);
    if (b > INT32_MAX || h > INT32_MAX || d > INT32_MAX || S > INT32_MAX || abits > UINT32_MAX ||
        rbits > UINT32_MAX)
        return bad(r, "%s: a coordinate or bit pattern is out of range", ctx);
    e->b = (int32_t)b;
    e->h = (int32_t)h;
    e->d = (int32_t)d;
    e->kernel_bits = (uint32_t)abits;
    e->rounded_bits = (uint32_t)rbits;
    e->ulps = ulps;
    e->fails = json_is_true(fv);
    w->seq_len = len;
    w->page_size = (int32_t)S;
    if (w->ci) w->ci->refs++;
    return 0;
}

static int read_outstats(reader *r, const json_t *v, kvf__outstats *o, int worst_n,
                         kvf__case_info *const *cases, size_t ncases, kvf_output_kind output,
                         const char *ctx) {
    char sub[256];
    if (!v || !json_is_object(v)) return bad(r, "%s is missing or not an object", ctx);
    if (get_i64(r, v, "elements", 0, &o->elements, ctx) ||
        get_i64(r, v, "violations", 0, &o->violations, ctx) ||
        get_i64(r, v, "nonfinite", 0, &o->nonfinite, ctx) ||
        get_i64(r, v, "max_ulps", 0, &o->max_ulps, ctx) ||
        check_within(r, o->violations, "violations", o->elements, "elements", ctx) ||
        check_within(r, o->nonfinite, "nonfinite", o->elements, "elements", ctx))
        return -1;
    /* The maxima of no element are whatever the writer started from; of one or more, errors
     * and margins, each >= 0. */
    const int any = o->elements > 0;
    if (get_nonneg(r, v, "max_abs", any, &o->max_abs, ctx) ||
        get_nonneg(r, v, "max_rel", any, &o->max_rel, ctx) ||
        get_nonneg(r, v, "max_margin", any, &o->max_margin, ctx) ||
        get_nonneg(r, v, "max_excess_margin", any, &o->max_excess, ctx))
        return -1;
    const json_t *hist = json_object_get(v, "hist");
    kvf__hist *hs[4] = {&o->abs, &o->rel, &o->ulp, &o->margin};
    static const char *const hn[4] = {"abs", "rel", "ulp", "margin"};
    for (int i = 0; i < 4; i++) {
        snprintf(sub, sizeof sub, "%s.hist.%s", ctx, hn[i]);
        if (read_hist(r, json_object_get(hist, hn[i]), hs[i], sub)) return -1;
        if (hs[i]->total != o->elements)
            return bad(r, "%s counts %lld elements, not %lld", sub, (long long)hs[i]->total,
                       (long long)o->elements);
    }
    const json_t *dens = get_array(r, v, "abs_vs_exact", ctx);
    if (!dens) return -1;
    for (size_t i = 0; i < json_array_size(dens); i++) {
        const json_t *p = json_array_get(dens, i);
        int32_t ao, xo;
        int64_t cnt;
        if (!json_is_array(p) || json_array_size(p) != 3 ||
            read_octave(json_array_get(p, 0), &ao) || read_octave(json_array_get(p, 1), &xo) ||
            kvf_json_to_i64(json_array_get(p, 2), &cnt) || cnt < 0)
            return bad(r,
                       "%s.abs_vs_exact[%zu] is not an [abs octave, exact octave, count] "
                       "triple",
                       ctx, i);
        int64_t *c = kvf__map_get(&o->dens, KVF_DENS_KEY(ao, xo), 1);
        if (!c) return bad(r, "out of memory");
        if (kvf__count_add(c, cnt))
            return bad(r, "%s.abs_vs_exact: the counts add up past 2^63 - 1", ctx);
    }
    for (int k = 0; k < KVF_CLASS_COUNT; k++) {
        snprintf(sub, sizeof sub, "%s.%s", ctx, kvf__class_name[k]);
        const json_t *arr = get_array(r, v, kvf__class_name[k], ctx);
        if (!arr || read_cells(r, arr, &o->by[k], k == KVF_CLASS_SLOT, sub)) return -1;
    }
    const json_t *worst = get_array(r, v, "worst", ctx);
    if (!worst) return -1;
    if (json_array_size(worst) > (size_t)worst_n)
        return bad(r, "%s.worst lists %zu elements, more than worst_n = %d", ctx,
                   json_array_size(worst), worst_n);
    for (size_t i = 0; i < json_array_size(worst); i++) {
        kvf__worst w;
        snprintf(sub, sizeof sub, "%s.worst[%zu]", ctx, i);
        if (read_worst(r, json_array_get(worst, i), &w, cases, ncases, output, sub)) return -1;
        kvf__worst_insert(o, worst_n,
                          w); /* re-sorts: a hand-edited file cannot break the ranking */
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

/* The top level's format, version and bucket layout, checked; *out the statistics allocated. */
static int read_header(reader *r, const json_t *root, kvf_stats **out) {
    if (!json_is_object(root)) return bad(r, "the top level is not an object");
    const json_t *fmt = json_object_get(root, "format");
    if (!fmt || !json_is_string(fmt) || strcmp(json_string_value(fmt), KVF_STATS_FORMAT) != 0)
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
    if (!(*out = kvf__stats_alloc((int)worst_n))) return bad(r, "out of memory");
    return 0;
}

/* The top level's flags and names: incomplete, require_overflow, label and findings_dir. */
static int read_flags(reader *r, const json_t *root, kvf_stats *s) {
    const json_t *inc = json_object_get(root, "incomplete");
    if (inc && !json_is_boolean(inc)) return bad(r, "\"incomplete\" is not a boolean");
    s->incomplete = inc && json_is_true(inc);
    const json_t *ro = json_object_get(root, "require_overflow");
    if (!ro || !json_is_boolean(ro))
        return bad(r, "\"require_overflow\" is missing or not a boolean");
    s->require_overflow = json_is_true(ro);
    if (get_opt_str(r, root, "label", &s->label, "top level") ||
        get_opt_str(r, root, "findings_dir", &s->findings_dir, "top level"))
        return -1;
    return 0;
}

/* "sources": the processes that wrote the statistics, when the file names them. */
static int read_sources(reader *r, const json_t *root, kvf_stats *s) {
    char ctx[64];
    const json_t *sources = json_object_get(root, "sources");
    if (sources && !json_is_array(sources)) return bad(r, "\"sources\" is not an array");
    if (!sources || !json_array_size(sources)) return 0;
    if (!(s->sources = calloc(json_array_size(sources), sizeof *s->sources)))
        return bad(r, "out of memory");
    for (size_t i = 0; i < json_array_size(sources); i++) {
        const json_t *src = json_array_get(sources, i);
        kvf__source *d = &s->sources[s->nsources++];
        snprintf(ctx, sizeof ctx, "sources[%zu]", i);
        if (!json_is_object(src)) return bad(r, "%s is not an object", ctx);
        const json_t *pid = json_object_get(src, "pid");
        if (pid && !json_is_null(pid) && kvf_json_to_i64(pid, &d->pid))
            return bad(r, "%s: \"pid\" is not an integer", ctx);
        if (get_opt_str(r, src, "command", &d->command, ctx) ||
            get_opt_str(r, src, "host", &d->host, ctx) ||
            get_opt_str(r, src, "started", &d->started, ctx) ||
            get_opt_str(r, src, "written", &d->written, ctx) ||
            read_devices(r, json_object_get(src, "devices"), d, ctx))
            return -1;
    }
    return 0;
}

/* "kernels": each kernel's runs, unsupported cases and run errors. */
static int read_kernels(reader *r, const json_t *root, kvf_stats *s) {
    char ctx[64];
    const json_t *kernels = get_array(r, root, "kernels", "top level");
    if (!kernels) return -1;
    for (size_t i = 0; i < json_array_size(kernels); i++) {
        const json_t *k = json_array_get(kernels, i);
        const json_t *name = json_object_get(k, "kernel");
        snprintf(ctx, sizeof ctx, "kernels[%zu]", i);
        if (!name || !json_is_string(name) || !name_ok(json_string_value(name)))
            return bad(r,
                       "%s: \"kernel\" is missing or not a name (1 to 4096 characters, none a "
                       "control character)",
                       ctx);
        for (size_t j = 0; j < s->nkernels; j++)
            if (strcmp(s->kernels[j].kernel, json_string_value(name)) == 0)
                return bad(r, "%s: kernel \"%s\" is listed twice", ctx, json_string_value(name));
        kvf__kernel_runs *kr = kvf__kernel_runs_get(s, json_string_value(name));
        if (!kr) return bad(r, "out of memory");
        if (get_i64(r, k, "ran", 0, &kr->ran, ctx) ||
            get_i64(r, k, "unsupported", 0, &kr->unsupported, ctx))
            return -1;
        for (int j = 0; j < KVF__N_RUN_ERRORS; j++) {
            const kvf_finding_class c = (kvf_finding_class)kvf__run_error_classes[j];
            const char *cname = kvf_finding_class_name(c);
            if (added_later(c) && !json_object_get(k, cname)) continue;
            if (get_i64(r, k, cname, 0, &kr->errors[c], ctx)) return -1;
        }
    }
    return 0;
}

/* An embedded case is the .kvfz file its entry's "hash" names: its bytes hash to it and decode,
 * as a report writes it out for replay under the hash as its name. The shape limits are the
 * defaults, the byte and cost ones open (a campaign's may have been raised, KVF_MAX_POOL_GIB,
 * KVF_MAX_MEMORY_MIB): only the file's structure counts here. */
static int check_embedded_case(reader *r, const char *hex, int has_hash, uint64_t hash,
                               const char *ctx) {
    if (!has_hash) return bad(r, "%s: \"kvfz_hex\" is given without its \"hash\"", ctx);
    const size_t n = strlen(hex) / 2;
    uint8_t *bytes = malloc(n ? n : 1);
    if (!bytes) return bad(r, "out of memory");
    kvf__hex_bytes(hex, bytes);
    int rc = 0;
    if (kvf_hash64(bytes, n) != hash) {
        rc = bad(r, "%s: \"kvfz_hex\" does not hash to its \"hash\" %016" PRIx64, ctx, hash);
    } else {
        kvf_limits wide;
        kvf_limits_default(&wide);
        wide.max_pool_bytes = wide.max_resident_bytes = INT64_MAX;
        wide.max_memory_bytes = wide.max_work = INT64_MAX;
        kvf_spec spec;
        kvf_error err = {0};
        if (kvf_spec_decode(&spec, bytes, n, &wide, &err))
            rc = bad(r, "%s: \"kvfz_hex\" is not a case file: %s", ctx, err.msg);
        else
            kvf_spec_free(&spec);
    }
    free(bytes);
    return rc;
}

/* "cases": the cases the worst entries name, into *cases (*ncases of them, each referenced
 * once; the caller releases them, also after an error). */
static int read_cases(reader *r, const json_t *root, kvf__case_info ***cases, size_t *ncases) {
    char ctx[64];
    const json_t *ct = get_array(r, root, "cases", "top level");
    if (!ct) return -1;
    if (json_array_size(ct) && !(*cases = calloc(json_array_size(ct), sizeof **cases)))
        return bad(r, "out of memory");
    for (size_t i = 0; i < json_array_size(ct); i++) {
        const json_t *cv = json_array_get(ct, i);
        snprintf(ctx, sizeof ctx, "cases[%zu]", i);
        const json_t *hv = json_object_get(cv, "hash");
        uint64_t hash = 0;
        int has_hash = hv && !json_is_null(hv);
        if (!json_is_object(cv) ||
            (has_hash && (!json_is_string(hv) || read_hex_u64(json_string_value(hv), &hash))))
            return bad(r, "%s: \"hash\" is not 16 lowercase hex digits or null", ctx);
        char *path, *hex;
        if (get_opt_str(r, cv, "path", &path, ctx)) return -1;
        if (get_opt_str(r, cv, "kvfz_hex", &hex, ctx)) {
            free(path);
            return -1;
        }
        size_t hl = hex ? strlen(hex) : 0;
        int hex_ok = hl % 2 == 0 && hl <= 2 * KVF_STATS_EMBED_MAX;
        for (size_t j = 0; hex_ok && j < hl; j++)
            hex_ok = (hex[j] >= '0' && hex[j] <= '9') || (hex[j] >= 'a' && hex[j] <= 'f');
        if (!hex_ok) {
            free(path);
            free(hex);
            return bad(r, "%s: \"kvfz_hex\" is not an even run of lowercase hex digits", ctx);
        }
        if (hex && check_embedded_case(r, hex, has_hash, hash, ctx)) {
            free(path);
            free(hex);
            return -1;
        }
        (*cases)[*ncases] = kvf__case_info_new(has_hash, hash, path, NULL, 0, hex);
        free(path);
        free(hex);
        if (!(*cases)[*ncases]) return bad(r, "out of memory");
        (*ncases)++;
    }
    return 0;
}

/* A group's counts, its findings per class and its outputs' statistics, in model and out of it
 * (cases: the file's, which the worst entries name). */
static int read_group_counts(reader *r, const json_t *gv, const kvf_stats *s, kvf__group *g,
                             kvf__case_info **cases, size_t ncases, const char *ctx) {
    if (get_i64(r, gv, "cases", 0, &g->cases, ctx) ||
        get_i64(r, gv, "passed", 0, &g->passed, ctx) ||
        get_i64(r, gv, "out_of_model", 0, &g->out_of_model, ctx) ||
        get_i64(r, gv, "rule_rejects_rounded", 0, &g->rejects_rounded, ctx))
        return -1;
    const json_t *fv = json_object_get(gv, "findings");
    if (!fv || !json_is_object(fv))
        return bad(r, "%s: \"findings\" is missing or not an object", ctx);
    for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++) {
        const char *name = kvf_finding_class_name((kvf_finding_class)c);
        if (added_later((kvf_finding_class)c) && !json_object_get(fv, name)) continue;
        if (get_i64(r, fv, name, 0, &g->findings[c], ctx)) return -1;
    }
    for (int out = 0; out < 2; out++) {
        char sub[128];
        snprintf(sub, sizeof sub, "%s.%s", ctx, kvf__output_name[out]);
        if (read_outstats(r, json_object_get(gv, kvf__output_name[out]), &g->out[out], s->worst_n,
                          cases, ncases, (kvf_output_kind)out, sub))
            return -1;
    }
    const json_t *oomv = json_object_get(gv, "out_of_model_rows");
    for (int out = 0; out < 2; out++) {
        char sub[128];
        snprintf(sub, sizeof sub, "%s.out_of_model_rows.%s", ctx, kvf__output_name[out]);
        if (read_outstats(r, json_object_get(oomv, kvf__output_name[out]), &g->oom[out], s->worst_n,
                          cases, ncases, (kvf_output_kind)out, sub))
            return -1;
    }
    return 0;
}

/* A group's passed, out-of-model, rejected-rounded and failed cases add up to its cases. */
static int check_group_total(reader *r, const kvf__group *g, const char *ctx) {
    int64_t failed = 0, total = g->passed;
    int over =
        kvf__count_add(&total, g->out_of_model) || kvf__count_add(&total, g->rejects_rounded);
    for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
        over |= kvf__count_add(&failed, g->findings[c]);
    if (over || kvf__count_add(&total, failed))
        return bad(r,
                   "%s: passed, out_of_model, rule_rejects_rounded and findings add up past "
                   "2^63 - 1",
                   ctx);
    if (total != g->cases)
        return bad(r,
                   "%s: passed, out_of_model, rule_rejects_rounded and findings add up to %lld, "
                   "not the %lld cases",
                   ctx, (long long)total, (long long)g->cases);
    return 0;
}

/* "groups": one per kernel and rule. */
static int read_groups(reader *r, const json_t *root, kvf_stats *s, kvf__case_info **cases,
                       size_t ncases) {
    char ctx[64];
    const json_t *groups = get_array(r, root, "groups", "top level");
    if (!groups) return -1;
    for (size_t i = 0; i < json_array_size(groups); i++) {
        const json_t *gv = json_array_get(groups, i);
        const json_t *kn = json_object_get(gv, "kernel"), *rn = json_object_get(gv, "rule");
        snprintf(ctx, sizeof ctx, "groups[%zu]", i);
        if (!kn || !json_is_string(kn) || !rn || !json_is_string(rn) ||
            !name_ok(json_string_value(kn)))
            return bad(r, "%s: \"kernel\" or \"rule\" is missing or not a name", ctx);
        kvf_rule rule;
        kvf_error rerr = {0};
        if (kvf_rule_parse(&rule, json_string_value(rn), &rerr))
            return bad(r, "%s: \"rule\" is not a rule this kvfuzz knows (%s)", ctx, rerr.msg);
        size_t before = s->ngroups;
        kvf__group *g = kvf__group_get(s, json_string_value(kn), json_string_value(rn));
        if (!g) return bad(r, "out of memory");
        if (s->ngroups == before)
            return bad(r, "%s: kernel \"%s\" with rule \"%s\" appears twice", ctx,
                       json_string_value(kn), json_string_value(rn));
        if (read_group_counts(r, gv, s, g, cases, ncases, ctx) || check_group_total(r, g, ctx))
            return -1;
    }
    return 0;
}

static int read_stats(reader *r, const json_t *root, kvf_stats **result) {
    kvf__case_info **cases = NULL;
    size_t ncases = 0;
    kvf_stats *s = NULL;
    if (read_header(r, root, &s)) return -1;
    int rc = read_flags(r, root, s);
    if (!rc) rc = read_sources(r, root, s);
    if (!rc) rc = read_kernels(r, root, s);
    if (!rc) rc = read_cases(r, root, &cases, &ncases);
    if (!rc) rc = read_groups(r, root, s, cases, ncases);
    for (size_t i = 0; i < ncases; i++)
        kvf__case_info_unref(cases[i]); /* worst entries hold their own references */
    free(cases);
    if (rc) {
        kvf_stats_free(s);
        return -1;
    }
    *result = s;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* A folder of stats files: one per campaign                                                   */
/* ------------------------------------------------------------------------------------------ */

static int is_stats_name(const char *name) {
    size_t n = strlen(name);
    return name[0] != '.' && n > 10 && strncmp(name, "stats", 5) == 0 &&
           strcmp(name + n - 5, ".json") == 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int kvf_stats_read_dir(kvf_stats **out, const char *dir, kvf_error *err) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return kvf_error_set(err, KVF_EIO, "cannot read the folder %s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    int oom = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_stats_name(e->d_name)) continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = strdup(e->d_name))) {
            if (nn) names = nn;
            oom = 1;
            break;
        }
        names = nn;
        n++;
    }
    closedir(d);
    int rc = 0;
    if (oom) rc = kvf_error_set(err, KVF_ENOMEM, "out of memory reading the folder %s", dir);
    if (!rc && n == 0)
        rc = kvf_error_set(err, KVF_ENOTFOUND, "the folder %s holds no stats*.json file", dir);
    if (!rc && n > 1) qsort(names, n, sizeof *names, cmp_name);
    kvf_stats *all = NULL;
    for (size_t i = 0; !rc && i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        kvf_stats *one = NULL;
        rc = kvf_stats_read(&one, path, err);
        if (rc) break;
        if (!all) {
            all = one;
            continue;
        }
        rc = kvf_stats_merge(all, one, err);
        kvf_stats_free(one);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc) {
        kvf_stats_free(all);
        return rc;
    }
    *out = all;
    return 0;
}

int kvf_stats_read(kvf_stats **out, const char *path, kvf_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return kvf_stats_read_dir(out, path, err);
    char *data;
    size_t size;
    /* Its sentence names what is wrong: a FIFO, a device or a file past the size limit read as
     * "Invalid argument". The limit: a campaign's statistics take kilobytes, and the JSON
     * parser holds about 33 times a file's size, so 16 MiB keeps a hostile file to about
     * half a GiB. */
    int rrc = kvf_read_file_max(path, KVF_STATS_MAX_BYTES, &data, &size, err);
    if (rrc) return rrc;
    char msg[200];
    json_t *root = kvf_json_parse_text(data, size, msg, sizeof msg);
    free(data);
    if (!root)
        return kvf_error_set(err, KVF_EFORMAT, "malformed stats file %s: invalid JSON (%s)", path,
                             msg);
    reader r = {path, err, 0};
    int rc = read_stats(&r, root, out);
    json_decref(root);
    return rc ? (err && err->code ? err->code : KVF_EFORMAT) : 0;
}
