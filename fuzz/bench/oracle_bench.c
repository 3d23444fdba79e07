/* The oracle benchmark (kvfuzz/oracle_bench.h): its cases, the two oracle paths timed on them,
 * and the judge stage. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvfuzz/campaign.h"
#include "kvfuzz/cost.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/mutate.h"
#include "kvfuzz/oracle_bench.h"
#include "kvfuzz/prng.h"

const int kvf_oracle_bench_path_ids[2] = {KVF_ORACLE_MPFR, KVF_ORACLE_FAST};

double kvf_oracle_bench_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* What a case holds in memory: its written pages of both caches, q, the table and the scales. */
static int64_t case_bytes(const kvf_case *c) {
    return 4 * c->num_resident_pages * kvf_case_page_elems(c) + 2 * kvf_case_q_elems(c) +
           4 * (int64_t)c->kv_indptr[c->batch_size] + 2 * (int64_t)c->scale_bytes;
}

/* KVF_ELIMIT when c would take the set past `budget` bytes. */
static int over_budget(const kvf_oracle_bench_set *s, const kvf_case *c, int64_t budget,
                       kvf_error *err) {
    if (s->bytes + case_bytes(c) <= budget) return 0;
    char text[KVF_SIZE_TEXT_MAX];
    return kvf_error_set(err, KVF_ELIMIT,
                         "the cases would hold more than the memory budget of %s after %" PRId64
                         " of them (KVF_MAX_MEMORY_MIB raises it); ask for fewer",
                         kvf_size_text(budget, text), s->n);
}

/* Adds c, and its recipe when sp is not NULL (both then belong to the set). */
static int set_add(kvf_oracle_bench_set *s, const kvf_case *c, const kvf_spec *sp) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        kvf_case *p = realloc(s->cases, (size_t)cap * sizeof *p);
        if (!p) return -1;
        s->cases = p;
        if (sp) {
            kvf_spec *q = realloc(s->specs, (size_t)cap * sizeof *q);
            if (!q) return -1;
            s->specs = q;
        }
        s->cap = cap;
    }
    if (sp) s->specs[s->n] = *sp;
    s->cases[s->n++] = *c;
    s->tokens += kvf_case_total_tokens(c);
    s->bytes += case_bytes(c);
    s->rows += (int64_t)c->batch_size * c->num_qo_heads;
    return 0;
}

void kvf_oracle_bench_set_free(kvf_oracle_bench_set *s) {
    for (int64_t i = 0; i < s->n; i++) {
        kvf_case_free(&s->cases[i]);
        if (s->specs) kvf_spec_free(&s->specs[i]);
    }
    free(s->cases);
    free(s->specs);
    memset(s, 0, sizeof *s);
}

int kvf_oracle_bench_generate(kvf_oracle_bench_set *s, int64_t ncases, uint64_t seed,
                              double *build_s, kvf_error *err) {
    const double t0 = kvf_oracle_bench_cpu_s();
    kvf_campaign_opts co;
    kvf_campaign_opts_default(&co);
    kvf_random_opts ro;
    kvf_mutate_random_opts(&ro, &co.mutate);
    kvf_prng rng;
    kvf_prng_seed(&rng, seed);
    kvf_limits lim;
    kvf_limits_default(&lim);
    int64_t budget, work;
    int rc = kvf_limits_budgets(&lim, &budget, &work, err);
    if (rc) return rc;
    int oom = 0;
    for (int64_t tries = 0; !oom && s->n < ncases && tries < 100 * ncases; tries++) {
        kvf_spec sp;
        kvf_case c;
        if (kvf_spec_random(&sp, kvf_prng_next(&rng), &ro, NULL)) continue;
        kvf_spec_fit(&sp, &co.mutate);
        if (kvf_spec_repair(&sp, &co.case_limits, co.mutate.allow_nonfinite, &c, NULL)) {
            kvf_spec_free(&sp);
            continue;
        }
        if ((rc = over_budget(s, &c, budget, err)) || (oom = set_add(s, &c, &sp))) {
            kvf_case_free(&c);
            kvf_spec_free(&sp);
            if (rc) break;
        }
    }
    *build_s = kvf_oracle_bench_cpu_s() - t0;
    if (rc) return rc;
    if (s->n == ncases) return 0;
    return kvf_error_set(err, oom ? KVF_ENOMEM : KVF_EINVAL, "could not generate %" PRId64 " cases",
                         ncases);
}

int kvf_oracle_bench_load(kvf_oracle_bench_set *s, char *const *paths, int n, const kvf_limits *lim,
                          double *build_s, int *failed, kvf_error *err) {
    *failed = -1;
    int64_t budget, work;
    int brc = kvf_limits_budgets(lim, &budget, &work, err);
    if (brc) return brc;
    for (int i = 0; i < n; i++) {
        kvf_case c;
        double t0 = kvf_oracle_bench_cpu_s();
        int rc = kvf_case_load(paths[i], NULL, &c, lim, err);
        *build_s += kvf_oracle_bench_cpu_s() - t0;
        if (!rc && (rc = over_budget(s, &c, budget, err))) kvf_case_free(&c);
        if (rc) {
            *failed = i;
            return rc;
        }
        if (set_add(s, &c, NULL)) {
            kvf_case_free(&c);
            return kvf_error_set(err, KVF_ENOMEM, "out of memory");
        }
    }
    return 0;
}

/* Runs every case through one path; results gets the outputs (for the comparison). */
static int run_path(const kvf_oracle_bench_set *s, int path, kvf_oracle_result *results,
                    double *sec, kvf_error *err) {
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    o.path = path;
    o.threads = 1;
    kvf_error e;
    double t0 = kvf_oracle_bench_cpu_s();
    for (int64_t i = 0; i < s->n; i++) {
        if (kvf_oracle_run(&results[i], &s->cases[i], &o, &e)) {
            for (int64_t j = 0; j < i; j++)
                kvf_oracle_result_free(&results[j]);
            return kvf_error_set(err, e.code ? e.code : KVF_EORACLE,
                                 "the %s oracle failed on case %" PRId64 ": %s",
                                 kvf_oracle_path_name(path), i, e.msg);
        }
    }
    *sec = kvf_oracle_bench_cpu_s() - t0;
    return 0;
}

static int64_t count_mismatches(const kvf_oracle_bench_set *s, const kvf_oracle_result *a,
                                const kvf_oracle_result *b) {
    int64_t bad = 0;
    for (int64_t i = 0; i < s->n; i++) {
        const kvf_case *c = &s->cases[i];
        int64_t rows = (int64_t)c->batch_size * c->num_qo_heads;
        if (memcmp(a[i].o_rounded, b[i].o_rounded, (size_t)(rows * c->head_dim) * 2) != 0 ||
            memcmp(a[i].lse_rounded, b[i].lse_rounded, (size_t)rows * 4) != 0 ||
            memcmp(a[i].rows, b[i].rows, (size_t)rows * sizeof(kvf_oracle_row)) != 0)
            bad++;
    }
    return bad;
}

/* One repetition: both paths, the first one alternating with r. */
static int repetition(const kvf_oracle_bench_set *s, int64_t r, kvf_oracle_result *res[2],
                      kvf_oracle_bench_path pr[2], int64_t *mismatched, kvf_error *err) {
    for (int k = 0; k < 2; k++) {
        int p = (int)((k + r) & 1); /* alternate which path goes first */
        double sec;
        int rc = run_path(s, kvf_oracle_bench_path_ids[p], res[p], &sec, err);
        if (rc) {
            if (k == 1)
                for (int64_t i = 0; i < s->n; i++)
                    kvf_oracle_result_free(&res[1 - p][i]);
            return rc;
        }
        if (pr[p].best_s < 0 || sec < pr[p].best_s) pr[p].best_s = sec;
        pr[p].fast_rows = pr[p].fallback_rows = 0;
        for (int64_t i = 0; i < s->n; i++) {
            pr[p].fast_rows += res[p][i].fast_rows;
            pr[p].fallback_rows += res[p][i].fallback_rows;
        }
    }
    *mismatched += count_mismatches(s, res[0], res[1]);
    for (int p = 0; p < 2; p++)
        for (int64_t i = 0; i < s->n; i++)
            kvf_oracle_result_free(&res[p][i]);
    return 0;
}

int kvf_oracle_bench_paths(const kvf_oracle_bench_set *s, int64_t repeat,
                           kvf_oracle_bench_path pr[2], int64_t *mismatched, kvf_error *err) {
    kvf_oracle_result *res[2];
    res[0] = calloc((size_t)s->n + 1, sizeof(kvf_oracle_result));
    res[1] = calloc((size_t)s->n + 1, sizeof(kvf_oracle_result));
    int rc = 0;
    if (!res[0] || !res[1]) rc = kvf_error_set(err, KVF_ENOMEM, "out of memory");
    for (int64_t r = 0; r < repeat && !rc; r++)
        rc = repetition(s, r, res, pr, mismatched, err);
    free(res[0]);
    free(res[1]);
    return rc;
}

void kvf_oracle_bench_inputs_free(kvf_oracle_bench_inputs *in) {
    for (int64_t i = 0; i < in->n; i++) {
        kvf_oracle_result_free(&in->oracle[i]);
        free(in->o[i]);
        free(in->lse[i]);
    }
    free(in->oracle);
    free(in->o);
    free(in->lse);
    memset(in, 0, sizeof *in);
}

int kvf_oracle_bench_inputs_make(const kvf_oracle_bench_set *s, kvf_oracle_bench_inputs *in,
                                 kvf_error *err) {
    memset(in, 0, sizeof *in);
    in->kernel = "cpu-splitkv";
    in->nrules = kvf_rule_default_set(in->rules, KVF_MAX_RULES);
    in->oracle = calloc((size_t)s->n + 1, sizeof *in->oracle);
    in->o = calloc((size_t)s->n + 1, sizeof *in->o);
    in->lse = calloc((size_t)s->n + 1, sizeof *in->lse);
    const char *why = "could not compute the judge's inputs";
    if (!in->oracle || !in->o || !in->lse) return kvf_error_set(err, KVF_ENOMEM, "%s", why);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    oo.threads = 1;
    const kvf_kernel *kernel = kvf_kernel_find(in->kernel);
    for (int64_t i = 0; i < s->n; i++) {
        const kvf_case *c = &s->cases[i];
        kvf_error e = {0};
        in->o[i] = malloc((size_t)(kvf_case_o_elems(c) + 1) * sizeof **in->o);
        in->lse[i] = malloc((size_t)(kvf_case_lse_elems(c) + 1) * sizeof **in->lse);
        in->n = i + 1;
        if (!in->o[i] || !in->lse[i] || !kernel) return kvf_error_set(err, KVF_ENOMEM, "%s", why);
        int rc = kvf_kernel_run_once(kernel, c, in->o[i], in->lse[i], &e);
        if (!rc) rc = kvf_oracle_run(&in->oracle[i], c, &oo, &e);
        if (rc) return kvf_error_set(err, rc, "%s", why);
    }
    return 0;
}

/* Judges every case, with hooks when `hooks` is not NULL; *sec the thread's CPU seconds. */
static int judge_all(const kvf_oracle_bench_set *s, const kvf_oracle_bench_inputs *in,
                     kvf_oracle_bench_hooks_fn hooks, void *ctx, double *sec, kvf_error *err) {
    double t0 = kvf_oracle_bench_cpu_s();
    for (int64_t i = 0; i < s->n; i++) {
        kvf_outcome out;
        kvf_judge_hooks h;
        int hooked = hooks && hooks(ctx, 0, s->specs ? &s->specs[i] : NULL, &s->cases[i], &h) == 0;
        kvf_error e;
        int rc =
            kvf_outcome_judge_hooked(&out, in->rules, in->nrules, 0, &s->cases[i], &in->oracle[i],
                                     in->o[i], in->lse[i], hooked ? &h : NULL, &e);
        if (rc) return kvf_error_set(err, rc, "judging case %" PRId64 " failed: %s", i, e.msg);
    }
    *sec = kvf_oracle_bench_cpu_s() - t0;
    return 0;
}

int kvf_oracle_bench_judge(const kvf_oracle_bench_set *s, const kvf_oracle_bench_inputs *in,
                           int64_t repeat, kvf_oracle_bench_hooks_fn hooks, void *ctx,
                           double best[2], kvf_error *err) {
    best[0] = best[1] = -1;
    for (int64_t r = 0; r < repeat; r++)
        for (int k = 0; k < 2; k++) {
            double sec;
            int rc = judge_all(s, in, k ? hooks : NULL, ctx, &sec, err);
            if (rc) return rc;
            if (best[k] < 0 || sec < best[k]) best[k] = sec;
        }
    return 0;
}
