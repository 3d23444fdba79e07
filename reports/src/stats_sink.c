/* Sharded statistics of a multi-threaded run (kvfuzz/stats_sink.h). Counting the statistics
 * under one lock had made them, not the GPU, the limit of a CUDA campaign; so each thread
 * counts into a shard of its own, and the thread that finds the write interval passed drains
 * the shards into the run's statistics and rewrites the file, as the end does once more. */
#include "kvfuzz/stats_sink.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shard {
    pthread_mutex_t mu; /* the owning thread against a drain */
    kvf_stats *stats;   /* NULL until the thread's first case after a drain */
    /* The current case, for the worst-element records of its rules. */
    const char *kernel;
    const kvf_rule *rules;
    int nrules;
    const kvf_case *c;
    char *path;
    uint8_t *bytes;
    size_t size;
    kvf_stats_scope scope;
} shard;

struct kvf_stats_sink {
    kvf_stats *stats; /* the run's statistics: provenance, and every drained shard */
    kvf_stats_opts shard_opts;
    char *path;
    int nshards;
    shard *shards;
    pthread_mutex_t write_mu;  /* one drain and write at a time; guards `failed` */
    _Atomic double next_write; /* read at every case, written under write_mu */
    int failed;                /* a write error is reported once; the run goes on */
};

static double monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int kvf_stats_sink_create(kvf_stats_sink **out, const kvf_stats_opts *opts, const char *path,
                          int threads, kvf_error *err) {
    *out = NULL;
    if (!opts || !path || threads < 1)
        return kvf_error_set(err, KVF_EINVAL,
                             "a statistics sink needs options, a path and "
                             "at least one thread");
    kvf_stats_sink *s = calloc(1, sizeof *s);
    if (!s) return kvf_error_set(err, KVF_ENOMEM, "out of memory creating statistics");
    s->shards = calloc((size_t)threads, sizeof *s->shards);
    s->path = strdup(path);
    if (!s->shards || !s->path) {
        free(s->shards);
        free(s->path);
        free(s);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory creating statistics");
    }
    s->nshards = threads;
    s->shard_opts = *opts;
    s->shard_opts.command = NULL; /* provenance belongs to the run's statistics only */
    pthread_mutex_init(&s->write_mu, NULL);
    for (int i = 0; i < threads; i++)
        pthread_mutex_init(&s->shards[i].mu, NULL);
    atomic_store(&s->next_write, monotonic_s() + opts->flush_interval_s);
    int rc = kvf_stats_create(&s->stats, opts, err);
    if (!rc) rc = kvf_stats_write(s->stats, path, err);
    if (rc) {
        kvf_stats_sink_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void kvf_stats_sink_free(kvf_stats_sink *s) {
    if (!s) return;
    for (int i = 0; i < s->nshards; i++) {
        kvf_stats_free(s->shards[i].stats);
        free(s->shards[i].bytes);
        free(s->shards[i].path);
        pthread_mutex_destroy(&s->shards[i].mu);
    }
    pthread_mutex_destroy(&s->write_mu);
    kvf_stats_free(s->stats);
    free(s->shards);
    free(s->path);
    free(s);
}

static void report_failure(kvf_stats_sink *s, const kvf_error *err) {
    if (!s->failed) {
        s->failed = 1;
        fprintf(stderr, "kvfuzz: statistics not written: %s\n", err->msg);
    }
}

/* Moves every shard's counts into s->stats and writes the file. Caller holds write_mu. */
static int drain_and_write(kvf_stats_sink *s, kvf_error *err) {
    int rc = 0;
    for (int i = 0; i < s->nshards; i++) {
        shard *sh = &s->shards[i];
        pthread_mutex_lock(&sh->mu);
        if (sh->stats) {
            kvf_error e = {0};
            /* Freed even when the merge ran out of memory half-way: merging it again would
             * count its first half twice. The merge marks the statistics incomplete. */
            if (kvf_stats_merge_shard(s->stats, sh->stats, &e) && !rc) {
                rc = e.code;
                if (err) *err = e;
            }
            kvf_stats_free(sh->stats); /* the next case starts a fresh one */
            sh->stats = NULL;
        }
        pthread_mutex_unlock(&sh->mu);
    }
    int wrc = kvf_stats_write(s->stats, s->path, rc ? NULL : err);
    return rc ? rc : wrc;
}

void kvf_stats_sink_case_begin(kvf_stats_sink *s, int thread, const char *kernel,
                               const kvf_rule *rules, int nrules, const kvf_case *c,
                               const kvf_stats_case *ref) {
    if (!s || thread < 0 || thread >= s->nshards) return;
    if (monotonic_s() >= atomic_load(&s->next_write) && pthread_mutex_trylock(&s->write_mu) == 0) {
        if (monotonic_s() >= atomic_load(&s->next_write)) {
            kvf_error err = {0};
            if (drain_and_write(s, &err)) report_failure(s, &err);
            atomic_store(&s->next_write, monotonic_s() + s->shard_opts.flush_interval_s);
        }
        pthread_mutex_unlock(&s->write_mu);
    }
    shard *sh = &s->shards[thread];
    pthread_mutex_lock(&sh->mu);
    sh->kernel = kernel;
    sh->rules = rules;
    sh->nrules = nrules;
    sh->c = c;
    free(sh->bytes);
    free(sh->path);
    sh->bytes = NULL;
    sh->path = NULL;
    sh->size = 0;
    int lost = 0;
    if (ref && ref->kvfz && ref->kvfz_size) {
        if ((sh->bytes = malloc(ref->kvfz_size))) {
            memcpy(sh->bytes, ref->kvfz, ref->kvfz_size);
            sh->size = ref->kvfz_size;
        } else {
            lost = 1;
        }
    }
    if (ref && ref->path && !(sh->path = strdup(ref->path))) lost = 1;
    kvf_error err = {0};
    if (!sh->stats && kvf_stats_create(&sh->stats, &s->shard_opts, &err)) lost = 1;
    if (sh->stats) kvf_stats_count_run(sh->stats, kernel, KVF_STATS_RAN, NULL);
    pthread_mutex_unlock(&sh->mu);
    if (lost) {
        pthread_mutex_lock(&s->write_mu); /* also keeps s->stats away from a drain */
        kvf_stats_mark_incomplete(s->stats);
        pthread_mutex_unlock(&s->write_mu);
    }
}

kvf_stats_scope *kvf_stats_sink_rule_begin(kvf_stats_sink *s, int thread, int rule) {
    if (!s || thread < 0 || thread >= s->nshards) return NULL;
    shard *sh = &s->shards[thread];
    pthread_mutex_lock(&sh->mu);
    /* A drain between the case's rules took the shard's statistics: start a fresh one. */
    if (!sh->stats && kvf_stats_create(&sh->stats, &s->shard_opts, NULL)) sh->stats = NULL;
    kvf_stats_case ref = {sh->path, sh->bytes, sh->size};
    if (!sh->stats || rule < 0 || rule >= sh->nrules || !sh->c ||
        kvf_stats_begin(&sh->scope, sh->stats, sh->kernel, &sh->rules[rule], sh->c, &ref, NULL)) {
        if (sh->stats) kvf_stats_mark_incomplete(sh->stats);
        pthread_mutex_unlock(&sh->mu);
        return NULL;
    }
    return &sh->scope; /* the shard stays locked until rule_end */
}

void kvf_stats_sink_rule_end(kvf_stats_sink *s, int thread, kvf_stats_scope *scope,
                             const kvf_verdict *v) {
    if (!s || !scope || thread < 0 || thread >= s->nshards) return;
    shard *sh = &s->shards[thread];
    if (v)
        kvf_stats_observe_verdict(scope, v);
    else
        kvf_stats_end(scope);
    pthread_mutex_unlock(&sh->mu);
}

void kvf_stats_sink_count_run(kvf_stats_sink *s, const char *kernel, int outcome) {
    if (!s || !kernel) return;
    pthread_mutex_lock(&s->write_mu); /* keeps s->stats away from a drain */
    if (kvf_stats_count_run(s->stats, kernel, outcome, NULL) == KVF_ENOMEM)
        kvf_stats_mark_incomplete(s->stats);
    pthread_mutex_unlock(&s->write_mu);
}

int kvf_stats_sink_finish(kvf_stats_sink *s, kvf_error *err) {
    if (!s) return 0;
    pthread_mutex_lock(&s->write_mu);
    int rc = drain_and_write(s, err);
    pthread_mutex_unlock(&s->write_mu);
    return rc;
}

int kvf_stats_sink_set_devices(kvf_stats_sink *s, const kvf_stats_device *d, size_t n,
                               kvf_error *err) {
    pthread_mutex_lock(&s->write_mu);
    int rc = kvf_stats_set_devices(s->stats, d, n, err);
    pthread_mutex_unlock(&s->write_mu);
    return rc;
}

const kvf_stats *kvf_stats_sink_stats(const kvf_stats_sink *s) {
    return s ? s->stats : NULL;
}
