/* Writing the stats file (docs/reports.md): the statistics as a jansson tree, dumped in one
 * deterministic order (groups by kernel and rule, kernels by name, cases by identity, every
 * map by key), so equal statistics always give the same bytes. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvfuzz/json_io.h"
#include "stats_internal.h"

static int cmp_kernel_runs(const void *a, const void *b) {
    return strcmp(((const kvf__kernel_runs *)a)->kernel, ((const kvf__kernel_runs *)b)->kernel);
}

static int cmp_ci_ptr(const void *a, const void *b) {
    return kvf__case_info_cmp(*(kvf__case_info *const *)a, *(kvf__case_info *const *)b);
}

/* Every builder returns a new reference, or NULL when memory ran out. */

static json_t *i64(int64_t v) {
    return json_integer((json_int_t)v);
}

static json_t *pair(int64_t a, int64_t b) {
    json_t *p = json_array();
    if (p && (kvf_json_push(p, i64(a)) || kvf_json_push(p, i64(b)))) {
        json_decref(p);
        return NULL;
    }
    return p;
}

static json_t *hist_json(const kvf__hist *h) {
    json_t *o = json_object(), *b = json_array();
    int bad = !o || !b;
    bad = bad || kvf_json_set(o, "total", i64(h->total)) || kvf_json_set(o, "zero", i64(h->zero)) ||
          kvf_json_set(o, "inf", i64(h->inf)) || kvf_json_set(o, "nan", i64(h->nan));
    size_t n = 0;
    int64_t *keys = bad ? NULL : kvf__map_sorted_keys(&h->buckets, &n);
    bad = bad || (n && !keys);
    for (size_t i = 0; !bad && i < n; i++)
        bad =
            kvf_json_push(b, pair(keys[i], *(const int64_t *)kvf__map_find(&h->buckets, keys[i])));
    free(keys);
    if (bad || json_object_set_new(o, "buckets", b)) {
        json_decref(o);
        if (bad) json_decref(b);
        return NULL;
    }
    return o;
}

/* An octave of the 2-D histogram: an integer, or the sentinels "zero" and "inf" (labels of a
 * class, not numbers). */
static json_t *octave_json(int32_t oct) {
    if (oct == KVF_OCT_ZERO) return json_string("zero");
    if (oct == KVF_OCT_INF) return json_string("inf");
    return i64(oct);
}

static int push_cell(json_t *row, const kvf__cell *c) {
    return kvf_json_push(row, i64(c->n)) || kvf_json_push(row, i64(c->fails)) ||
           kvf_json_push(row, i64(c->nonfinite)) || kvf_json_push(row, i64(c->bits_n)) ||
           kvf_json_push(row, i64(c->bits_sum)) || kvf_json_push(row, i64(c->max_ulps)) ||
           kvf_json_push(row, kvf_json_number(c->max_abs)) ||
           kvf_json_push(row, kvf_json_number(c->max_margin));
}

/* The id of ci in the sorted, de-duplicated case table. */
static long case_id(kvf__case_info *const *table, size_t n, const kvf__case_info *ci) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = kvf__case_info_cmp(table[mid], ci);
        if (c == 0) return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static json_t *worst_json(const kvf__worst *w, kvf__case_info *const *cases, size_t ncases) {
    const kvf_element_error *e = &w->e;
    long id = w->ci ? case_id(cases, ncases, w->ci) : -1;
    json_t *o = json_object();
    int bad = !o;
    bad = bad || kvf_json_set(o, "case", id >= 0 ? i64(id) : json_null()) ||
          kvf_json_set(o, "b", i64(e->b)) || kvf_json_set(o, "h", i64(e->h)) ||
          kvf_json_set(o, "d", i64(e->d)) || kvf_json_set(o, "seq_len", i64(w->seq_len)) ||
          kvf_json_set(o, "page_size", i64(w->page_size)) ||
          kvf_json_set(o, "a", kvf_json_number(e->kernel_value)) ||
          kvf_json_set(o, "r", kvf_json_number(e->rounded_value)) ||
          kvf_json_set(o, "x", kvf_json_number(e->exact_value)) ||
          kvf_json_set(o, "a_bits", i64(e->kernel_bits)) ||
          kvf_json_set(o, "r_bits", i64(e->rounded_bits)) ||
          kvf_json_set(o, "abs", kvf_json_number(e->abs_error)) ||
          kvf_json_set(o, "rel", kvf_json_number(e->rel_error)) ||
          /* A NaN/inf mismatch has no distance: null, not a number meaning "none". */
          kvf_json_set(o, "ulps", e->ulps < 0 ? json_null() : i64(e->ulps)) ||
          kvf_json_set(o, "allowed", kvf_json_number(e->allowed)) ||
          kvf_json_set(o, "margin", kvf_json_number(e->margin)) ||
          kvf_json_set(o, "excess_margin", kvf_json_number(e->excess_margin)) ||
          kvf_json_set(o, "fails", json_boolean(e->fails)) ||
          kvf_json_set(o, "out_of_model", json_boolean(e->out_of_model));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *outstats_json(const kvf__outstats *o, kvf__case_info *const *cases, size_t ncases) {
    json_t *j = json_object();
    int bad = !j;
    bad = bad || kvf_json_set(j, "elements", i64(o->elements)) ||
          kvf_json_set(j, "violations", i64(o->violations)) ||
          kvf_json_set(j, "nonfinite", i64(o->nonfinite)) ||
          kvf_json_set(j, "max_abs", kvf_json_number(o->max_abs)) ||
          kvf_json_set(j, "max_rel", kvf_json_number(o->max_rel)) ||
          kvf_json_set(j, "max_ulps", i64(o->max_ulps)) ||
          kvf_json_set(j, "max_margin", kvf_json_number(o->max_margin)) ||
          kvf_json_set(j, "max_excess_margin", kvf_json_number(o->max_excess));
    json_t *hist = bad ? NULL : json_object();
    bad = bad || !hist || kvf_json_set(j, "hist", hist);
    bad = bad || kvf_json_set(hist, "abs", hist_json(&o->abs)) ||
          kvf_json_set(hist, "rel", hist_json(&o->rel)) ||
          kvf_json_set(hist, "ulp", hist_json(&o->ulp)) ||
          kvf_json_set(hist, "margin", hist_json(&o->margin));
    json_t *dens = bad ? NULL : json_array();
    bad = bad || !dens || kvf_json_set(j, "abs_vs_exact", dens);
    size_t n = 0;
    int64_t *keys = bad ? NULL : kvf__map_sorted_keys(&o->dens, &n);
    bad = bad || (n && !keys);
    for (size_t i = 0; !bad && i < n; i++) {
        json_t *t = json_array();
        bad = kvf_json_push(dens, t) || kvf_json_push(t, octave_json(KVF_DENS_ABS(keys[i]))) ||
              kvf_json_push(t, octave_json(KVF_DENS_EXACT(keys[i]))) ||
              kvf_json_push(t, i64(*(const int64_t *)kvf__map_find(&o->dens, keys[i])));
    }
    free(keys);
    for (int k = 0; !bad && k < KVF_CLASS_COUNT; k++) {
        json_t *arr = json_array();
        bad = kvf_json_set(j, kvf__class_name[k], arr);
        keys = bad ? NULL : kvf__map_sorted_keys(&o->by[k], &n);
        bad = bad || (n && !keys);
        for (size_t i = 0; !bad && i < n; i++) {
            json_t *row = json_array();
            bad = kvf_json_push(arr, row);
            if (!bad && k == KVF_CLASS_SLOT)
                bad = kvf_json_push(row, i64(keys[i] / 65536)) ||
                      kvf_json_push(row, i64(keys[i] % 65536));
            else if (!bad)
                bad = kvf_json_push(row, i64(keys[i]));
            bad = bad || push_cell(row, kvf__map_find(&o->by[k], keys[i]));
        }
        free(keys);
    }
    json_t *worst = bad ? NULL : json_array();
    bad = bad || !worst || kvf_json_set(j, "worst", worst);
    for (int i = 0; !bad && i < o->worst_count; i++)
        bad = kvf_json_push(worst, worst_json(&o->worst[i], cases, ncases));
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *group_json(const kvf__group *g, kvf__case_info *const *cases, size_t ncases) {
    json_t *j = json_object(), *f = json_object(), *oom = json_object();
    int bad = !j || !f || !oom;
    bad = bad || kvf_json_set(j, "kernel", json_string(g->kernel)) ||
          kvf_json_set(j, "rule", json_string(g->rule)) ||
          kvf_json_set(j, "cases", i64(g->cases)) || kvf_json_set(j, "passed", i64(g->passed)) ||
          kvf_json_set(j, "out_of_model", i64(g->out_of_model)) ||
          kvf_json_set(j, "rule_rejects_rounded", i64(g->rejects_rounded));
    for (int c = 1; !bad && c < KVF_FINDING_CLASS_COUNT; c++)
        bad = kvf_json_set(f, kvf_finding_class_name((kvf_finding_class)c), i64(g->findings[c]));
    bad = bad || json_object_set(j, "findings", f);
    for (int out = 0; !bad && out < 2; out++)
        bad = kvf_json_set(j, kvf__output_name[out], outstats_json(&g->out[out], cases, ncases));
    for (int out = 0; !bad && out < 2; out++)
        bad = kvf_json_set(oom, kvf__output_name[out], outstats_json(&g->oom[out], cases, ncases));
    bad = bad || json_object_set(j, "out_of_model_rows", oom);
    json_decref(f);
    json_decref(oom);
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *stats_json(const kvf_stats *s, int provenance) {
    /* Sorted views, so that equal statistics always print the same bytes. */
    kvf__group **groups = malloc((s->ngroups ? s->ngroups : 1) * sizeof *groups);
    kvf__kernel_runs *kernels = malloc((s->nkernels ? s->nkernels : 1) * sizeof *kernels);
    size_t ncases = 0, cap = 0;
    for (size_t i = 0; i < s->ngroups; i++)
        for (int out = 0; out < 2; out++)
            cap +=
                (size_t)(s->groups[i]->out[out].worst_count + s->groups[i]->oom[out].worst_count);
    kvf__case_info **cases = malloc((cap ? cap : 1) * sizeof *cases);
    json_t *root = json_object();
    int bad = !groups || !kernels || !cases || !root;
    if (!bad && s->ngroups) {
        memcpy(groups, s->groups, s->ngroups * sizeof *groups);
        qsort(groups, s->ngroups, sizeof *groups, kvf__group_ptr_cmp);
    }
    if (!bad && s->nkernels) {
        memcpy(kernels, s->kernels, s->nkernels * sizeof *kernels);
        qsort(kernels, s->nkernels, sizeof *kernels, cmp_kernel_runs);
    }
    for (size_t i = 0; !bad && i < s->ngroups; i++)
        for (int k = 0; k < 4; k++) {
            const kvf__outstats *o = k < 2 ? &s->groups[i]->out[k] : &s->groups[i]->oom[k - 2];
            for (int w = 0; w < o->worst_count; w++)
                if (o->worst[w].ci) cases[ncases++] = o->worst[w].ci;
        }
    if (!bad && ncases) qsort(cases, ncases, sizeof *cases, cmp_ci_ptr);
    size_t uniq = 0;
    for (size_t i = 0; !bad && i < ncases; i++)
        if (uniq == 0 || kvf__case_info_cmp(cases[uniq - 1], cases[i]) != 0)
            cases[uniq++] = cases[i];
    ncases = uniq;

    bad = bad || kvf_json_set(root, "format", json_string(KVF_STATS_FORMAT)) ||
          kvf_json_set(root, "version", i64(KVF_STATS_VERSION)) ||
          kvf_json_set(root, "buckets_per_octave", i64(KVF_STATS_BUCKETS_PER_OCTAVE)) ||
          kvf_json_set(root, "bits_scale", i64(KVF_BITS_SCALE)) ||
          kvf_json_set(root, "worst_n", i64(s->worst_n)) ||
          kvf_json_set(root, "incomplete", json_boolean(s->incomplete)) ||
          kvf_json_set(root, "require_overflow", json_boolean(s->require_overflow));
    if (!bad && provenance) {
        json_t *srcs = json_array();
        bad = kvf_json_set(root, "label", kvf_json_string_or_null(s->label)) ||
              kvf_json_set(root, "findings_dir", kvf_json_string_or_null(s->findings_dir)) ||
              kvf_json_set(root, "sources", srcs);
        for (size_t i = 0; !bad && i < s->nsources; i++) {
            const kvf__source *src = &s->sources[i];
            json_t *o = json_object();
            bad = kvf_json_push(srcs, o) ||
                  kvf_json_set(o, "command", kvf_json_string_or_null(src->command)) ||
                  kvf_json_set(o, "host", kvf_json_string_or_null(src->host)) ||
                  kvf_json_set(o, "pid", i64(src->pid)) ||
                  kvf_json_set(o, "started", kvf_json_string_or_null(src->started)) ||
                  kvf_json_set(o, "written", kvf_json_string_or_null(src->written));
            json_t *devs = src->ndevices && !bad ? json_array() : NULL;
            if (devs) bad = kvf_json_set(o, "devices", devs);
            for (size_t k = 0; devs && !bad && k < src->ndevices; k++) {
                const kvf_stats_device *d = &src->devices[k];
                json_t *dj = json_object();
                bad = kvf_json_push(devs, dj) || kvf_json_set(dj, "device", i64(d->ordinal)) ||
                      kvf_json_set(dj, "cases", i64(d->cases)) ||
                      kvf_json_set(dj, "seconds", kvf_json_number(d->seconds)) ||
                      kvf_json_set(dj, "crashes", i64(d->crashes)) ||
                      kvf_json_set(dj, "hangs", i64(d->hangs)) ||
                      kvf_json_set(dj, "kernel_errors", i64(d->kernel_errors)) ||
                      kvf_json_set(dj, "retired", json_boolean(d->retired)) ||
                      kvf_json_set(dj, "why", d->why[0] ? json_string(d->why) : json_null());
            }
        }
    }
    json_t *karr = bad ? NULL : json_array();
    bad = bad || kvf_json_set(root, "kernels", karr);
    for (size_t i = 0; !bad && i < s->nkernels; i++) {
        json_t *o = json_object();
        bad = kvf_json_push(karr, o) || kvf_json_set(o, "kernel", json_string(kernels[i].kernel)) ||
              kvf_json_set(o, "ran", i64(kernels[i].ran)) ||
              kvf_json_set(o, "unsupported", i64(kernels[i].unsupported));
        for (int j = 0; !bad && j < KVF__N_RUN_ERRORS; j++)
            bad = kvf_json_set(o,
                               kvf_finding_class_name((kvf_finding_class)kvf__run_error_classes[j]),
                               i64(kernels[i].errors[kvf__run_error_classes[j]]));
    }
    json_t *carr = bad ? NULL : json_array();
    bad = bad || kvf_json_set(root, "cases", carr);
    for (size_t i = 0; !bad && i < ncases; i++) {
        char hash[17];
        snprintf(hash, sizeof hash, "%016" PRIx64, cases[i]->hash);
        json_t *o = json_object();
        bad = kvf_json_push(carr, o) ||
              kvf_json_set(o, "hash", cases[i]->has_hash ? json_string(hash) : json_null()) ||
              kvf_json_set(o, "path", kvf_json_string_or_null(cases[i]->path)) ||
              kvf_json_set(o, "kvfz_hex", kvf_json_string_or_null(cases[i]->hex));
    }
    json_t *garr = bad ? NULL : json_array();
    bad = bad || kvf_json_set(root, "groups", garr);
    for (size_t i = 0; !bad && i < s->ngroups; i++)
        bad = kvf_json_push(garr, group_json(groups[i], cases, ncases));
    free(groups);
    free(kernels);
    free(cases);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

int kvf__stats_serialize(const kvf_stats *s, FILE *f, int provenance) {
    json_t *root = stats_json(s, provenance);
    if (!root) {
        errno = ENOMEM;
        return -1;
    }
    int rc = kvf_json_dump(root, f, 0);
    json_decref(root);
    return rc;
}

static int fill_stats(FILE *f, void *ctx) {
    return kvf__stats_serialize(ctx, f, 1);
}

int kvf_stats_write(kvf_stats *s, const char *path, kvf_error *err) {
    if (!s || !path) return kvf_error_set(err, KVF_EINVAL, "writing statistics needs a path");
    if (s->own_source >= 0) {
        char now[32];
        kvf__utc_now(now, sizeof now);
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
