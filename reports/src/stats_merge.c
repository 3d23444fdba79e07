/* Merging statistics, exactly (every figure is a count, a sum or a maximum, and the worst list
 * a top N under a total order), and comparing them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* Merging and comparing                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* 0, -1 (out of memory) or KVF__OVERFLOW. */
static int outstats_merge(kvf__outstats *d, const kvf__outstats *s, int worst_n) {
    if (kvf__count_add(&d->elements, s->elements) ||
        kvf__count_add(&d->violations, s->violations) ||
        kvf__count_add(&d->nonfinite, s->nonfinite))
        return KVF__OVERFLOW;
    if (s->max_abs > d->max_abs) d->max_abs = s->max_abs;
    if (s->max_rel > d->max_rel) d->max_rel = s->max_rel;
    if (s->max_ulps > d->max_ulps) d->max_ulps = s->max_ulps;
    if (s->max_margin > d->max_margin) d->max_margin = s->max_margin;
    if (s->max_excess > d->max_excess) d->max_excess = s->max_excess;
    int rc;
    if ((rc = kvf__hist_merge(&d->abs, &s->abs)) || (rc = kvf__hist_merge(&d->rel, &s->rel)) ||
        (rc = kvf__hist_merge(&d->ulp, &s->ulp)) ||
        (rc = kvf__hist_merge(&d->margin, &s->margin)) ||
        (rc = kvf__counts_merge(&d->dens, &s->dens)))
        return rc;
    for (int k = 0; k < KVF_CLASS_COUNT; k++) {
        const kvf__map *m = &s->by[k];
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->used[i]) continue;
            kvf__cell *c = kvf__cell_get(&d->by[k], m->keys[i]);
            if (!c) return -1;
            if (kvf__cell_merge(c, (const kvf__cell *)(m->vals + i * m->vsize)))
                return KVF__OVERFLOW;
        }
    }
    for (int i = 0; i < s->worst_count; i++) {
        kvf__worst w = s->worst[i];
        if (!kvf__worst_wants(d, worst_n, &w)) break; /* s is sorted: the rest rank lower still */
        if (w.ci) {
            w.ci = kvf__case_info_new(w.ci->has_hash, w.ci->hash, w.ci->path, NULL, 0, w.ci->hex);
            if (!w.ci) return -1;
        }
        kvf__worst_insert(d, worst_n, w);
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
                kvf__outstats *o =
                    out < 2 ? &dst->groups[i]->out[out] : &dst->groups[i]->oom[out - 2];
                kvf__worst *nw = realloc(o->worst, (size_t)src->worst_n * sizeof *nw);
                if (!nw) goto oom;
                o->worst = nw;
            }
        dst->worst_n = src->worst_n;
    }
    for (size_t i = 0; i < src->ngroups; i++) {
        const kvf__group *sg = src->groups[i];
        kvf__group *g = kvf__group_get(dst, sg->kernel, sg->rule);
        if (!g) goto oom;
        int over = kvf__count_add(&g->cases, sg->cases) || kvf__count_add(&g->passed, sg->passed) ||
                   kvf__count_add(&g->out_of_model, sg->out_of_model) ||
                   kvf__count_add(&g->rejects_rounded, sg->rejects_rounded);
        for (int c = 0; c < KVF_FINDING_CLASS_COUNT; c++)
            over |= kvf__count_add(&g->findings[c], sg->findings[c]);
        if (over) goto overflow;
        for (int out = 0; out < 2; out++) {
            int rc = outstats_merge(&g->out[out], &sg->out[out], dst->worst_n);
            if (!rc) rc = outstats_merge(&g->oom[out], &sg->oom[out], dst->worst_n);
            if (rc == KVF__OVERFLOW) goto overflow;
            if (rc) goto oom;
        }
    }
    for (size_t i = 0; i < src->nkernels; i++) {
        kvf__kernel_runs *k = kvf__kernel_runs_get(dst, src->kernels[i].kernel);
        if (!k) goto oom;
        int over = kvf__count_add(&k->ran, src->kernels[i].ran) ||
                   kvf__count_add(&k->unsupported, src->kernels[i].unsupported);
        for (int c = 0; c < KVF_FINDING_CLASS_COUNT; c++)
            over |= kvf__count_add(&k->errors[c], src->kernels[i].errors[c]);
        if (over) goto overflow;
    }
    if (with_sources && src->nsources) {
        kvf__source *ns = realloc(dst->sources, (dst->nsources + src->nsources) * sizeof *ns);
        if (!ns) goto oom;
        dst->sources = ns;
        for (size_t i = 0; i < src->nsources; i++) {
            int b = 0;
            kvf__source *d = &dst->sources[dst->nsources++];
            const kvf__source *sv = &src->sources[i];
            d->command = dup_or_null(sv->command, &b);
            d->host = dup_or_null(sv->host, &b);
            d->started = dup_or_null(sv->started, &b);
            d->written = dup_or_null(sv->written, &b);
            d->pid = sv->pid;
            d->devices = NULL;
            d->ndevices = 0;
            if (sv->ndevices) {
                d->devices = malloc(sv->ndevices * sizeof *d->devices);
                if (d->devices) {
                    memcpy(d->devices, sv->devices, sv->ndevices * sizeof *d->devices);
                    d->ndevices = sv->ndevices;
                } else {
                    b = 1;
                }
            }
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
overflow:
    dst->incomplete = 1;
    return kvf_error_set(err, KVF_ELIMIT,
                         "merging the statistics takes a count past 2^63 - 1: the files hold "
                         "counts no run reaches");
}

static char *serialize_to_string(const kvf_stats *s) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return NULL;
    int rc = kvf__stats_serialize(s, f, 0);
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
