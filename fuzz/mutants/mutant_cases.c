/* The mutant benchmark's cases (kvfuzz/mutant_bench.h): the cache of generated cases every
 * campaign (a) walks, and the seed cases of the per-rule table, each with its oracle result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvfuzz/mutant_bench.h"

static double kvf__now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void kvf__warn(kvf_mutant_warn_fn warn, void *ctx, const char *fmt, const char *what,
                      const char *why) {
    if (!warn) return;
    char msg[KVF_ERROR_MSG_MAX + 1200];
    snprintf(msg, sizeof msg, fmt, what, why);
    warn(ctx, msg);
}

void kvf_mutant_cases_init(kvf_mutant_cases *cache, uint64_t seed, const kvf_limits *lim,
                           int threads) {
    memset(cache, 0, sizeof *cache);
    cache->seed = seed;
    cache->limits = *lim;
    kvf_random_opts_default(&cache->ropts);
    cache->ropts.max_work = 1 << 19; /* small cases: many per second, bugs show at short lengths */
    cache->ropts.quant =
        1; /* FP8 caches, one case in four: kernels that read bf16 only skip them */
    kvf_oracle_opts_default(&cache->oopts);
    cache->oopts.threads = threads;
}

static void kvf__cache_build(kvf_mutant_cases *cache, size_t i) {
    kvf_mutant_case *cc = &cache->cases[i];
    double t0 = kvf__now_seconds();
    kvf_spec s;
    kvf_error err = {0};
    uint64_t seed = cache->seed + i;
    cc->ok = 0;
    if (kvf_spec_random(&s, seed, &cache->ropts, &err) == 0) {
        if (kvf_case_build(&cc->c, &s, &cache->limits, &err) == 0) {
            if (kvf_oracle_run(&cc->oracle, &cc->c, &cache->oopts, &err) == 0)
                cc->ok = 1;
            else
                kvf_case_free(&cc->c);
        }
        kvf_spec_free(&s);
    }
    if (!cc->ok) {
        char num[24];
        snprintf(num, sizeof num, "%llu", (unsigned long long)seed);
        kvf__warn(cache->warn, cache->warn_ctx, "case %s skipped: %s", num, err.msg);
    }
    cc->prepare_seconds = kvf__now_seconds() - t0;
    cc->present = 1;
}

const kvf_mutant_case *kvf_mutant_cases_get(kvf_mutant_cases *cache, size_t i) {
    while (cache->count <= i) {
        if (cache->count == cache->cap) {
            size_t ncap = cache->cap ? cache->cap * 2 : 256;
            kvf_mutant_case *n = realloc(cache->cases, ncap * sizeof *n);
            if (!n) return NULL;
            cache->cases = n;
            cache->cap = ncap;
        }
        memset(&cache->cases[cache->count++], 0, sizeof *cache->cases);
    }
    if (!cache->cases[i].present) kvf__cache_build(cache, i);
    return &cache->cases[i];
}

void kvf_mutant_cases_release(kvf_mutant_cases *cache, size_t i) {
    if (i >= cache->count) return;
    kvf_mutant_case *cc = &cache->cases[i];
    if (i < KVF_MUTANT_CACHE_KEEP || !cc->present) return;
    if (cc->ok) {
        kvf_oracle_result_free(&cc->oracle);
        kvf_case_free(&cc->c);
    }
    cc->present = 0;
}

void kvf_mutant_cases_free(kvf_mutant_cases *cache) {
    for (size_t i = 0; i < cache->count; i++)
        if (cache->cases[i].present && cache->cases[i].ok) {
            kvf_oracle_result_free(&cache->cases[i].oracle);
            kvf_case_free(&cache->cases[i].c);
        }
    free(cache->cases);
    cache->cases = NULL;
    cache->count = cache->cap = 0;
}

int kvf_mutant_seeds_load(kvf_mutant_seeds *s, char *const *paths, size_t n, const kvf_limits *lim,
                          const kvf_oracle_opts *oo, kvf_mutant_warn_fn warn, void *warn_ctx,
                          kvf_error *err) {
    memset(s, 0, sizeof *s);
    if (n == 0) return 0;
    s->names = calloc(n, sizeof *s->names);
    s->cases = calloc(n, sizeof *s->cases);
    s->oracles = calloc(n, sizeof *s->oracles);
    s->ok = calloc(n, sizeof *s->ok);
    if (!s->names || !s->cases || !s->oracles || !s->ok) {
        kvf_mutant_seeds_free(s);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory for %zu seed cases", n);
    }
    s->count = n;
    for (size_t i = 0; i < n; i++) {
        kvf_error why = {0};
        const char *base = strrchr(paths[i], '/');
        s->names[i] = strdup(base ? base + 1 : paths[i]);
        if (!s->names[i]) {
            kvf_mutant_seeds_free(s);
            return kvf_error_set(err, KVF_ENOMEM, "out of memory for the seed cases' names");
        }
        if (kvf_case_load(paths[i], NULL, &s->cases[i], lim, &why) == 0) {
            if (kvf_oracle_run(&s->oracles[i], &s->cases[i], oo, &why) == 0)
                s->ok[i] = 1;
            else
                kvf_case_free(&s->cases[i]);
        }
        if (!s->ok[i]) kvf__warn(warn, warn_ctx, "seed case %s skipped: %s", paths[i], why.msg);
    }
    return 0;
}

void kvf_mutant_seeds_free(kvf_mutant_seeds *s) {
    for (size_t i = 0; i < s->count; i++) {
        free(s->names[i]);
        if (s->ok[i]) {
            kvf_oracle_result_free(&s->oracles[i]);
            kvf_case_free(&s->cases[i]);
        }
    }
    free(s->names);
    free(s->cases);
    free(s->oracles);
    free(s->ok);
    memset(s, 0, sizeof *s);
}
