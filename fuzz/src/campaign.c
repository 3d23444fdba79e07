/* The campaign runner (campaign.h): generator threads that build cases, a dispatcher thread per
 * kernel worker that drives it, a pool of oracle threads that judge, and the main thread that
 * keeps time, prints progress and turns SIGINT/SIGTERM into an orderly stop. */
#include "kvfuzz/campaign.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/file.h"
#include "kvfuzz/runner.h"

#define CORPUS_CAP 10000
#define MAX_JOBS KVF_CAMPAIGN_MAX_JOBS
#define MAX_GENERATORS 64
#define MAX_WORKERS 64

void kvf_campaign_opts_default(kvf_campaign_opts *o) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->deadline_s = 10;
    o->determinism_every = 16;
    o->progress_s = 5;
    kvf_mutate_limits_default(&o->mutate);
    kvf_limits_default(&o->case_limits);
}

int kvf_campaign_default_jobs(const kvf_campaign_opts *o, long cores) {
    if (cores < 1) cores = 1;
    if (cores > KVF_CAMPAIGN_MAX_JOBS) cores = KVF_CAMPAIGN_MAX_JOBS;
    long kept = o->oracle_only ? 0 : cores / 4;
    if (kept > 4) kept = 4;
    return (int)(cores - kept);
}

typedef struct job {
    uint64_t index;
    int from_corpus; /* an initial corpus entry run as it is */
    kvf_spec spec;
    uint8_t *bytes;
    size_t size;
    kvf_case c;
    kvf_bf16 *o;
    float *lse;
    kvf_bf16 *o2; /* a determinism re-run's output */
    float *lse2;
    double kernel_s;
    kvf_run_result first_crash;  /* the run whose crash is being confirmed */
    char plan[KVF_RUN_PLAN_MAX]; /* the kernel's plan facts for this case */
} job;

enum { RECHECK_NONE, RECHECK_DETERMINISM, RECHECK_CRASH };

typedef struct corpus_entry {
    uint8_t *bytes;
    size_t size;
} corpus_entry;

typedef struct campaign {
    const kvf_campaign_opts *opts;
    kvf_campaign_stats *stats;
    kvf_rule rules[KVF_MAX_RULES];
    int nrules;
    int jobs;
    double start;

    pthread_mutex_t mu; /* stats, corpus, features, findings (short sections only: the
                           dispatcher takes it for every case) */
    corpus_entry *corpus;
    size_t ncorpus;
    size_t initial_corpus; /* entries [0, initial_corpus) are run as they are first */
    uint8_t *seen;
    int nfeatures;
    uint64_t *signatures; /* saved (or already in the findings folder) */
    size_t nsignatures;
    uint64_t *lost; /* failed to save at least once and not saved since */
    size_t nlost;

    pthread_mutex_t qmu;
    pthread_cond_t q_ready, q_space;
    job **queue;
    int qcap, qhead, qcount;
    int closed;

    /* Generated cases waiting for the kernel (generators -> dispatcher). */
    pthread_mutex_t rmu;
    pthread_cond_t r_ready, r_space;
    job **ready;
    int rcap, rhead, rcount;
    int ready_closed;
    atomic_uint_fast64_t next_index;
    atomic_int live_generators;

    atomic_int stop; /* 0 run, 1 finish what is in flight, 2 drop it (signal) */
    atomic_int dispatcher_done;
    atomic_int live_dispatchers;
    atomic_int live_oracles;
    int fatal;
    kvf_error fatal_err;

    int nworkers;
    kvf_runner *runners[MAX_WORKERS];
    int64_t worker_starts[MAX_WORKERS];
} campaign;

/* One dispatcher thread per kernel worker process. */
typedef struct dispatcher {
    campaign *cp;
    int id;
    kvf_runner *runner;
} dispatcher;

typedef struct oracle_thread {
    campaign *cp;
    int index; /* kvf_campaign_event.thread */
} oracle_thread;

typedef struct generator {
    campaign *cp;
    kvf_prng rng; /* each generator draws from its own stream of the campaign seed */
} generator;

static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    g_signal = sig;
    kvf_oracle_request_stop(); /* an oracle run in progress returns within a second */
    /* A second Ctrl-C should not wait for the orderly stop. */
    signal(sig, SIG_DFL);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static FILE *logf_(const campaign *cp) {
    return cp->opts->log ? cp->opts->log : stderr;
}

static void job_free(job *j) {
    if (!j) return;
    kvf_spec_free(&j->spec);
    kvf_case_free(&j->c);
    free(j->bytes);
    free(j->o);
    free(j->lse);
    free(j->o2);
    free(j->lse2);
    free(j);
}

/* ---- corpus --------------------------------------------------------------------------------- */

static int corpus_add(campaign *cp, const uint8_t *bytes, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return -1;
    memcpy(copy, bytes, size);
    if (cp->ncorpus < CORPUS_CAP) {
        corpus_entry *n = realloc(cp->corpus, (cp->ncorpus + 1) * sizeof *n);
        if (!n) {
            free(copy);
            return -1;
        }
        cp->corpus = n;
        cp->corpus[cp->ncorpus++] = (corpus_entry){copy, size};
    } else {
        /* Full: replace an entry other than the initial ones, which stay as anchors. */
        size_t span = cp->ncorpus - cp->initial_corpus;
        size_t i = cp->initial_corpus + (size_t)(kvf_hash64(bytes, size) % (span ? span : 1));
        free(cp->corpus[i].bytes);
        cp->corpus[i] = (corpus_entry){copy, size};
    }
    return 0;
}

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads every .kvfz in dir (sorted, so a seed gives the same run) that decodes. */
static int corpus_load(campaign *cp, const char *dir, kvf_error *err) {
    int rc = kvf_fuzz_mkdirs(dir, err);
    if (rc) return rc;
    DIR *d = opendir(dir);
    if (!d)
        return kvf_error_set(err, KVF_EIO, "cannot open corpus folder %s: %s", dir,
                             strerror(errno));
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".kvfz")) continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = strdup(e->d_name))) {
            free(nn ? nn : names);
            closedir(d);
            return kvf_error_set(err, KVF_ENOMEM, "out of memory reading the corpus");
        }
        names = nn;
        n++;
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    size_t skipped = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *text;
        size_t size;
        kvf_spec s;
        if (kvf_read_file(path, &text, &size) == 0) {
            const uint8_t *bytes = (const uint8_t *)text;
            if (kvf_spec_decode(&s, bytes, size, &cp->opts->case_limits, NULL) == 0) {
                kvf_spec_free(&s);
                if (cp->ncorpus < CORPUS_CAP) corpus_add(cp, bytes, size);
            } else {
                skipped++;
            }
            free(text);
        } else {
            skipped++;
        }
        free(names[i]);
    }
    free(names);
    if (skipped)
        fprintf(logf_(cp), "kvfuzz fuzz: skipped %zu corpus file(s) in %s that do not decode\n",
                skipped, dir);
    cp->initial_corpus = cp->ncorpus;
    return 0;
}

/* ---- generation ----------------------------------------------------------------------------- */

/* Counts a generated case skipped because the kernel does not support its shape, by reason
 * (the first seven distinct reasons, then "(other reasons)" for the rest). */
static void count_skip(campaign *cp, const char *why) {
    kvf_campaign_stats *st = cp->stats;
    pthread_mutex_lock(&cp->mu);
    st->skipped_unsupported++;
    const char *reason = why[0] ? why : "no reason given";
    const int last = KVF_CAMPAIGN_REASONS - 1; /* for every reason past the first seven */
    int i = 0;
    while (i < last && st->skip_reasons[i][0] && strcmp(st->skip_reasons[i], reason) != 0)
        i++;
    if (i == last) reason = "(other reasons)";
    if (!st->skip_reasons[i][0])
        snprintf(st->skip_reasons[i], sizeof st->skip_reasons[i], "%s", reason);
    st->skip_counts[i]++;
    pthread_mutex_unlock(&cp->mu);
}

/* The next case: first the initial corpus as it is, then a mix of fresh random recipes and
 * mutations (and cross-overs) of the corpus, which grows with cases reaching new buckets. */
static job *make_job(campaign *cp, kvf_prng *rng, uint64_t index) {
    const kvf_campaign_opts *o = cp->opts;
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->index = index;
    for (int attempt = 0; attempt < 64; attempt++) {
        kvf_spec s;
        int have = 0;
        pthread_mutex_lock(&cp->mu);
        size_t ncorpus = cp->ncorpus;
        corpus_entry base = {0}, other = {0};
        int as_is = index < cp->initial_corpus && attempt == 0;
        if (ncorpus && (as_is || kvf_prng_below(rng, 4) != 0)) {
            size_t i = as_is ? (size_t)index : (size_t)kvf_prng_below(rng, ncorpus);
            base.size = cp->corpus[i].size;
            base.bytes = malloc(base.size ? base.size : 1);
            if (base.bytes) memcpy(base.bytes, cp->corpus[i].bytes, base.size);
            if (!as_is && kvf_prng_below(rng, 8) == 0) {
                size_t k = (size_t)kvf_prng_below(rng, ncorpus);
                other.size = cp->corpus[k].size;
                other.bytes = malloc(other.size ? other.size : 1);
                if (other.bytes) memcpy(other.bytes, cp->corpus[k].bytes, other.size);
            }
        }
        pthread_mutex_unlock(&cp->mu);
        if (base.bytes && kvf_spec_decode(&s, base.bytes, base.size, &o->case_limits, NULL) == 0) {
            have = 1;
            if (!as_is) {
                kvf_spec_fit(&s, &o->mutate); /* a large seed shrinks into the budget first */
                kvf_spec b2, mixed;
                if (other.bytes &&
                    kvf_spec_decode(&b2, other.bytes, other.size, &o->case_limits, NULL) == 0) {
                    if (kvf_spec_crossover(&mixed, &s, &b2, rng, &o->mutate) == 0) {
                        kvf_spec_free(&s);
                        s = mixed;
                    }
                    kvf_spec_free(&b2);
                }
                int moves = 1 + (int)kvf_prng_below(rng, 4);
                for (int m = 0; m < moves; m++)
                    kvf_spec_mutate(&s, rng, -1, &o->mutate, &o->case_limits);
            }
            j->from_corpus = as_is;
        }
        free(base.bytes);
        free(other.bytes);
        if (!have) {
            kvf_random_opts ro;
            kvf_mutate_random_opts(&ro, &o->mutate);
            if (kvf_spec_random(&s, kvf_prng_next(rng), &ro, NULL)) continue;
            kvf_spec_fit(&s, &o->mutate);
        }
        if (kvf_spec_repair(&s, &o->case_limits, o->mutate.allow_nonfinite, &j->c, NULL) != 0 ||
            kvf_spec_encode(&s, &j->bytes, &j->size, NULL) != 0) {
            kvf_spec_free(&s);
            kvf_case_free(&j->c);
            pthread_mutex_lock(&cp->mu);
            cp->stats->rejected++;
            pthread_mutex_unlock(&cp->mu);
            continue;
        }
        /* Capability-aware generation: a shape the kernel's supports() refuses is replaced by
         * another, so the budget goes to cases the kernel runs. The last attempt keeps what it
         * got, so a kernel that refuses everything still runs (and is counted unsupported)
         * rather than starving the campaign. */
        if (!o->oracle_only && attempt < 63) {
            kvf_plugin_shape shape;
            kvf_kernel_shape(&j->c, &shape);
            char why[KVF_CAMPAIGN_REASON_MAX];
            if (kvf_kernel_supports(o->kernel, &shape, why, sizeof why) == 0) {
                count_skip(cp, why);
                kvf_spec_free(&s);
                kvf_case_free(&j->c);
                free(j->bytes);
                j->bytes = NULL;
                continue;
            }
        }
        j->spec = s;
        j->o = malloc((size_t)(kvf_case_o_elems(&j->c) + 1) * sizeof *j->o);
        j->lse = malloc((size_t)(kvf_case_lse_elems(&j->c) + 1) * sizeof *j->lse);
        if (!j->o || !j->lse) break;
        return j;
    }
    job_free(j);
    return NULL;
}

static void ready_close(campaign *cp) {
    pthread_mutex_lock(&cp->rmu);
    cp->ready_closed = 1;
    pthread_cond_broadcast(&cp->r_ready);
    pthread_mutex_unlock(&cp->rmu);
}

/* Generators build cases ahead of the kernel: generation costs a fraction of the oracle's time
 * per case, but on a many-core machine one thread would not keep up with the oracle pool. */
static void *generator_main(void *arg) {
    generator *g = arg;
    campaign *cp = g->cp;
    const kvf_campaign_opts *o = cp->opts;
    for (;;) {
        if (atomic_load(&cp->stop)) break;
        uint64_t index = atomic_fetch_add(&cp->next_index, 1);
        if (o->max_runs > 0 && index >= (uint64_t)o->max_runs) break;
        job *j = make_job(cp, &g->rng, index);
        if (!j) break;
        pthread_mutex_lock(&cp->rmu);
        while (cp->rcount == cp->rcap && !atomic_load(&cp->stop))
            pthread_cond_wait(&cp->r_space, &cp->rmu);
        if (atomic_load(&cp->stop)) {
            pthread_mutex_unlock(&cp->rmu);
            job_free(j);
            break;
        }
        cp->ready[(cp->rhead + cp->rcount) % cp->rcap] = j;
        cp->rcount++;
        pthread_cond_signal(&cp->r_ready);
        pthread_mutex_unlock(&cp->rmu);
    }
    if (atomic_fetch_sub(&cp->live_generators, 1) == 1) ready_close(cp);
    return NULL;
}

/* The next generated case, or NULL when generation is over. */
static job *ready_pop(campaign *cp) {
    pthread_mutex_lock(&cp->rmu);
    while (cp->rcount == 0 && !cp->ready_closed && atomic_load(&cp->stop) < 2)
        pthread_cond_wait(&cp->r_ready, &cp->rmu);
    job *j = NULL;
    if (cp->rcount > 0 && atomic_load(&cp->stop) < 2) {
        j = cp->ready[cp->rhead];
        cp->rhead = (cp->rhead + 1) % cp->rcap;
        cp->rcount--;
        pthread_cond_signal(&cp->r_space);
    }
    pthread_mutex_unlock(&cp->rmu);
    return j;
}

/* ---- findings ------------------------------------------------------------------------------- */

static int set_has(const uint64_t *set, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == h) return 1;
    return 0;
}

static void set_add(uint64_t **set, size_t *n, uint64_t h) {
    uint64_t *grown = realloc(*set, (*n + 1) * sizeof *grown);
    if (!grown) return; /* then the signature is simply tried again when it recurs */
    *set = grown;
    (*set)[(*n)++] = h;
}

static void set_remove(uint64_t *set, size_t *n, uint64_t h) {
    for (size_t i = 0; i < *n; i++)
        if (set[i] == h) {
            set[i] = set[--*n];
            return;
        }
}

/* Counts a finding and saves it if its signature is new. Caller holds cp->mu. */
static void record_finding(campaign *cp, const kvf_outcome *out, const job *j) {
    const kvf_campaign_opts *o = cp->opts;
    kvf_campaign_stats *st = cp->stats;
    st->finding_hits++;
    st->by_class[out->finding]++;
    char sig[512];
    uint64_t h = kvf_outcome_signature(out, o->kernel->name, sig, sizeof sig);
    /* A signature counts as saved only once its files are on disk: one whose save failed
     * (a full disk, a folder made unwritable) is tried again each time it recurs. */
    if (set_has(cp->signatures, cp->nsignatures, h)) return;
    char path[4300] = "";
    int is_new = 1;
    if (o->findings_dir) {
        char extra[256];
        snprintf(extra, sizeof extra,
                 "\"campaign\": {\"seed\": %" PRIu64 ", \"case_index\": %" PRIu64
                 ", \"elapsed_s\": %.3f}",
                 o->seed, j->index, now_s() - cp->start);
        kvf_error err = {0};
        if (kvf_finding_save(o->findings_dir, out, o->kernel->name, &j->spec, &j->c, extra, &is_new,
                             path, sizeof path, &err)) {
            if (!set_has(cp->lost, cp->nlost, h)) { /* said once per signature */
                set_add(&cp->lost, &cp->nlost, h);
                fprintf(logf_(cp),
                        "kvfuzz fuzz: could not save finding %s [%s]: %s (tried again if it "
                        "recurs)\n",
                        kvf_finding_class_name(out->finding), sig, err.msg);
            }
            st->findings_lost = (int64_t)cp->nlost;
            return;
        }
    }
    set_add(&cp->signatures, &cp->nsignatures, h);
    if (set_has(cp->lost, cp->nlost, h)) {
        set_remove(cp->lost, &cp->nlost, h);
        st->findings_lost = (int64_t)cp->nlost;
        fprintf(logf_(cp), "kvfuzz fuzz: finding [%s] saved on a later try\n", sig);
    }
    if (!is_new) return; /* already in the findings folder from an earlier run */
    st->findings_new++;
    FILE *lf = logf_(cp);
    fprintf(lf, "kvfuzz fuzz: new finding %s [%s]%s%s\n", kvf_finding_class_name(out->finding), sig,
            path[0] ? " -> " : "", path);
    if (o->verbose) kvf_outcome_print(lf, out, o->kernel->name, &j->spec, &j->c);
    fflush(lf);
}

static void record_run_finding(campaign *cp, const kvf_run_result *res, const job *j) {
    kvf_outcome out;
    kvf_outcome_from_run(&out, res->status, res->message);
    out.signal = res->signal;
    out.exit_code = res->exit_code;
    if (res->status == KVF_RUN_HANG) out.deadline = cp->opts->deadline_s;
    pthread_mutex_lock(&cp->mu);
    if (out.finding != KVF_FINDING_NONE) record_finding(cp, &out, j);
    pthread_mutex_unlock(&cp->mu);
}

/* ---- oracle threads ------------------------------------------------------------------------- */

static void judge_job(campaign *cp, job *j, int thread) {
    const kvf_campaign_opts *o = cp->opts;
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    oo.threads = 1; /* one case per thread: small cases parallelise across cases */
    kvf_oracle_result oracle;
    kvf_error err = {0};
    double t0 = now_s();
    if (kvf_oracle_run(&oracle, &j->c, &oo, &err)) {
        if (err.code == KVF_EINTR) return; /* stopping: the case is not judged */
        pthread_mutex_lock(&cp->mu);
        fprintf(logf_(cp), "kvfuzz fuzz: the oracle failed on case %" PRIu64 ": %s\n", j->index,
                err.msg);
        pthread_mutex_unlock(&cp->mu);
        return;
    }
    double oracle_s = now_s() - t0;
    if (o->oracle_only) { /* measuring the oracle-bound rate: nothing to judge */
        pthread_mutex_lock(&cp->mu);
        cp->stats->judged++;
        cp->stats->tokens += kvf_case_total_tokens(&j->c);
        cp->stats->oracle_s += oracle_s;
        pthread_mutex_unlock(&cp->mu);
        kvf_oracle_result_free(&oracle);
        return;
    }
    kvf_outcome out;
    kvf_judge_hooks hooks;
    int hooked =
        o->judge_hooks && o->judge_hooks(o->observer_ctx, thread, &j->spec, &j->c, &hooks) == 0;
    int rc = kvf_outcome_judge_hooked(&out, cp->rules, cp->nrules, o->require_overflow, &j->c,
                                      &oracle, j->o, j->lse, hooked ? &hooks : NULL, &err);
    snprintf(out.plan, sizeof out.plan, "%s", j->plan);
    pthread_mutex_lock(&cp->mu);
    kvf_campaign_stats *st = cp->stats;
    if (rc) {
        fprintf(logf_(cp), "kvfuzz fuzz: could not judge case %" PRIu64 ": %s\n", j->index,
                err.msg);
        pthread_mutex_unlock(&cp->mu);
        kvf_oracle_result_free(&oracle);
        return;
    }
    st->judged++;
    st->tokens += kvf_case_total_tokens(&j->c);
    st->oracle_s += oracle_s;
    for (int r = 0; r < cp->nrules; r++) {
        const kvf_verdict *v = &out.verdicts[r];
        if (!v->pass && v->finding == KVF_FINDING_OVERFLOW && !o->require_overflow) continue;
        double m = fmax(v->o.max_margin, v->lse.max_margin);
        if (m > st->worst_margin[r] || isnan(m)) st->worst_margin[r] = m;
    }
    /* New error buckets grow the corpus: the cases that reached them are the ones to mutate
     * toward larger errors. */
    int feats[64];
    int nf = kvf_outcome_features(&out, feats);
    int fresh = 0;
    for (int i = 0; i < nf; i++)
        if (feats[i] >= 0 && feats[i] < cp->nfeatures && !cp->seen[feats[i]]) {
            cp->seen[feats[i]] = 1;
            fresh = 1;
        }
    if (fresh && !j->from_corpus) {
        corpus_add(cp, j->bytes, j->size);
        st->corpus_added++;
        if (o->corpus_dir) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%016" PRIx64 ".kvfz", o->corpus_dir,
                     kvf_hash64(j->bytes, j->size));
            kvf_error e2 = {0};
            if (access(path, F_OK) != 0 && kvf_fuzz_write_atomic(path, j->bytes, j->size, &e2)) {
                /* Said once: the same cause (a full disk, an unwritable folder) would repeat
                 * for every new corpus entry. The entry stays in this run's memory corpus. */
                if (st->corpus_unsaved++ == 0)
                    fprintf(logf_(cp),
                            "kvfuzz fuzz: %s (corpus entries stay in memory; the count of "
                            "unsaved ones is in the summary)\n",
                            e2.msg);
            }
        }
    }
    if (out.finding != KVF_FINDING_NONE) record_finding(cp, &out, j);
    pthread_mutex_unlock(&cp->mu);
    /* Outside the lock: statistics cost about as much as judging, and serialising them
     * across the oracle threads (and the dispatcher behind them) capped the campaign's rate. */
    if (o->observer) {
        kvf_campaign_event ev = {j->index, thread, &j->spec, &j->c,       &oracle,
                                 j->o,     j->lse, &out,     j->kernel_s, oracle_s};
        o->observer(o->observer_ctx, &ev);
    }
    kvf_oracle_result_free(&oracle);
}

static void *oracle_main(void *arg) {
    const oracle_thread *self = arg;
    campaign *cp = self->cp;
    for (;;) {
        pthread_mutex_lock(&cp->qmu);
        while (cp->qcount == 0 && !cp->closed)
            pthread_cond_wait(&cp->q_ready, &cp->qmu);
        if (cp->qcount == 0) {
            pthread_mutex_unlock(&cp->qmu);
            break;
        }
        job *j = cp->queue[cp->qhead];
        cp->qhead = (cp->qhead + 1) % cp->qcap;
        cp->qcount--;
        pthread_cond_signal(&cp->q_space);
        pthread_mutex_unlock(&cp->qmu);
        if (atomic_load(&cp->stop) < 2) judge_job(cp, j, self->index);
        job_free(j);
    }
    kvf_oracle_thread_done();
    atomic_fetch_sub(&cp->live_oracles, 1);
    return NULL;
}

static void queue_push(campaign *cp, job *j) {
    pthread_mutex_lock(&cp->qmu);
    while (cp->qcount == cp->qcap && atomic_load(&cp->stop) < 2)
        pthread_cond_wait(&cp->q_space, &cp->qmu);
    if (cp->qcount == cp->qcap) { /* stopping on a signal: nobody will judge it */
        pthread_mutex_unlock(&cp->qmu);
        job_free(j);
        return;
    }
    cp->queue[(cp->qhead + cp->qcount) % cp->qcap] = j;
    cp->qcount++;
    pthread_cond_signal(&cp->q_ready);
    pthread_mutex_unlock(&cp->qmu);
}

static void queue_close(campaign *cp) {
    pthread_mutex_lock(&cp->qmu);
    cp->closed = 1;
    pthread_cond_broadcast(&cp->q_ready);
    pthread_mutex_unlock(&cp->qmu);
}

/* ---- dispatcher ----------------------------------------------------------------------------- */

static void set_fatal(campaign *cp, const kvf_error *err) {
    pthread_mutex_lock(&cp->mu);
    if (!cp->fatal) {
        cp->fatal = err->code ? err->code : KVF_EIO;
        cp->fatal_err = *err;
    }
    pthread_mutex_unlock(&cp->mu);
    atomic_store(&cp->stop, 2);
}

static int submit(dispatcher *d, job *j, double *wait_kernel) {
    campaign *cp = d->cp;
    kvf_error err = {0};
    /* Counted as waiting for the kernel: a case larger than the socket buffer goes out only
     * as fast as the worker takes it in. */
    double t0 = now_s();
    int rc = kvf_runner_submit(d->runner, &j->c, &err);
    *wait_kernel += now_s() - t0;
    pthread_mutex_lock(&cp->mu);
    cp->worker_starts[d->id] = kvf_runner_starts(d->runner);
    cp->stats->worker_starts = 0;
    for (int i = 0; i < cp->nworkers; i++)
        cp->stats->worker_starts += cp->worker_starts[i];
    pthread_mutex_unlock(&cp->mu);
    if (rc) set_fatal(cp, &err);
    return rc;
}

/* The dispatcher's blocking calls, timed: where it waits names what limits the campaign. */
static job *timed_ready_pop(campaign *cp, double *wait_s) {
    double t0 = now_s();
    job *j = ready_pop(cp);
    *wait_s += now_s() - t0;
    return j;
}

static void timed_queue_push(campaign *cp, job *j, double *wait_s) {
    double t0 = now_s();
    queue_push(cp, j);
    *wait_s += now_s() - t0;
}

/* A determinism re-run came back: compare its bits with the first run's. */
/* The re-run of a case that crashed: a second crash files the finding (with the first run's
 * signal); anything else means the first was not the kernel's doing, and is only reported. */
static void crash_confirmed(campaign *cp, job *j, const kvf_run_result *res) {
    if (res->status == KVF_RUN_CRASH) {
        record_run_finding(cp, &j->first_crash, j);
        return;
    }
    pthread_mutex_lock(&cp->mu);
    cp->stats->crashes_unconfirmed++;
    fprintf(logf_(cp),
            "kvfuzz fuzz: case %" PRIu64 " crashed the worker (%s) but ran cleanly again: not "
            "filed (a worker killed from outside, or a flaky crash)\n",
            j->index, j->first_crash.message);
    pthread_mutex_unlock(&cp->mu);
}

static void recheck_done(campaign *cp, job *j, const kvf_run_result *res) {
    pthread_mutex_lock(&cp->mu);
    cp->stats->determinism_checks++;
    pthread_mutex_unlock(&cp->mu);
    if (res->status == KVF_RUN_OK) {
        kvf_outcome out;
        kvf_outcome_from_run(&out, KVF_RUN_OK, NULL);
        if (kvf_outcome_compare(&out, &j->c, j->o, j->lse, j->o2, j->lse2)) {
            pthread_mutex_lock(&cp->mu);
            record_finding(cp, &out, j);
            pthread_mutex_unlock(&cp->mu);
        }
    } else if (res->status != KVF_RUN_UNSUPPORTED) {
        record_run_finding(cp, res, j);
    }
}

typedef struct slot {
    job *j;
    int recheck; /* RECHECK_DETERMINISM: the second run of a sampled case; RECHECK_CRASH: the
                    re-run that confirms a crash */
} slot;

/* Keeps two launches in flight on its worker (one running, the next on its way), collects them
 * in order, and hands outputs to the oracle pool. Every determinism_every-th case goes through
 * the worker a second time, with another case run in between (stale scratch and races show up
 * there), before it is judged. */
static void *dispatcher_main(void *arg) {
    dispatcher *d = arg;
    campaign *cp = d->cp;
    const kvf_campaign_opts *o = cp->opts;
    double wait_cases = 0, wait_kernel = 0, wait_oracle = 0;
    if (o->oracle_only) { /* no kernel: straight from the generators to the oracle pool */
        job *j;
        while ((j = timed_ready_pop(cp, &wait_cases))) {
            pthread_mutex_lock(&cp->mu);
            cp->stats->cases++;
            pthread_mutex_unlock(&cp->mu);
            timed_queue_push(cp, j, &wait_oracle);
        }
        goto done;
    }
    /* Launches in the runner, oldest first: kept full so the worker never waits for us. */
    slot fifo[KVF_RUNNER_MAX_INFLIGHT];
    int n = 0;
    while (n < KVF_RUNNER_MAX_INFLIGHT && atomic_load(&cp->stop) == 0) {
        job *j = timed_ready_pop(cp, &wait_cases);
        if (!j) break;
        if (submit(d, j, &wait_kernel)) {
            job_free(j);
            break;
        }
        fifo[n++] = (slot){j, 0};
    }
    while (n > 0) {
        slot s0 = fifo[0];
        n--;
        memmove(fifo, fifo + 1, (size_t)n * sizeof *fifo);
        job *j = s0.j;
        kvf_run_result res;
        double t0 = now_s();
        const int second = s0.recheck == RECHECK_DETERMINISM;
        kvf_runner_collect(d->runner, second ? j->o2 : j->o, second ? j->lse2 : j->lse, &res);
        wait_kernel += now_s() - t0;
        if (atomic_load(&cp->stop) >= 2) { /* interrupted: this result may be our own kill */
            job_free(j);
            for (int i = 0; i < n; i++)
                if (fifo[i].j != j) job_free(fifo[i].j);
            n = 0;
            break;
        }
        int sampled =
            !s0.recheck && res.status == KVF_RUN_OK && o->determinism_every > 0 &&
            j->index % (uint64_t)o->determinism_every == (uint64_t)o->determinism_every - 1;
        if (sampled) {
            j->o2 = malloc((size_t)(kvf_case_o_elems(&j->c) + 1) * sizeof *j->o2);
            j->lse2 = malloc((size_t)(kvf_case_lse_elems(&j->c) + 1) * sizeof *j->lse2);
            sampled = j->o2 && j->lse2 && submit(d, j, &wait_kernel) == 0;
            if (sampled) fifo[n++] = (slot){j, RECHECK_DETERMINISM};
        }
        /* A crash is filed only once the same case crashes again: a worker killed from outside
         * (the OOM killer, kill -9) must not become a finding that never replays. */
        int confirming = !s0.recheck && res.status == KVF_RUN_CRASH &&
                         atomic_load(&cp->stop) == 0 && submit(d, j, &wait_kernel) == 0;
        if (confirming) {
            j->first_crash = res;
            fifo[n++] = (slot){j, RECHECK_CRASH};
        }
        if (!sampled && !confirming && atomic_load(&cp->stop) == 0) { /* keep the runner full */
            job *next = timed_ready_pop(cp, &wait_cases);
            if (next && submit(d, next, &wait_kernel))
                job_free(next);
            else if (next)
                fifo[n++] = (slot){next, 0};
        }
        if (s0.recheck == RECHECK_DETERMINISM) {
            recheck_done(cp, j, &res);
            timed_queue_push(cp, j, &wait_oracle);
            continue;
        }
        if (s0.recheck == RECHECK_CRASH) {
            crash_confirmed(cp, j, &res);
            job_free(j);
            continue;
        }
        pthread_mutex_lock(&cp->mu);
        cp->stats->cases++;
        cp->stats->kernel_s += res.kernel_s;
        if (res.status == KVF_RUN_UNSUPPORTED) cp->stats->unsupported++;
        pthread_mutex_unlock(&cp->mu);
        j->kernel_s = res.kernel_s;
        if (res.status == KVF_RUN_OK) snprintf(j->plan, sizeof j->plan, "%s", res.plan);
        if (res.status == KVF_RUN_OK) {
            if (!sampled) /* a sampled case is judged after its re-run */
                timed_queue_push(cp, j, &wait_oracle);
        } else if (!confirming) {
            if (res.status != KVF_RUN_UNSUPPORTED) record_run_finding(cp, &res, j);
            job_free(j);
        }
    }
done:
    pthread_mutex_lock(&cp->mu);
    cp->stats->wait_cases_s += wait_cases;
    cp->stats->wait_kernel_s += wait_kernel;
    cp->stats->wait_oracle_s += wait_oracle;
    pthread_mutex_unlock(&cp->mu);
    if (atomic_fetch_sub(&cp->live_dispatchers, 1) == 1) {
        /* The last dispatcher out: whatever the generators still hold is dropped (stop them and
         * let them drain), and the oracle pool finishes what it has. */
        atomic_store(&cp->stop, atomic_load(&cp->stop) ? atomic_load(&cp->stop) : 1);
        pthread_mutex_lock(&cp->rmu);
        pthread_cond_broadcast(&cp->r_space);
        pthread_mutex_unlock(&cp->rmu);
        queue_close(cp);
        atomic_store(&cp->dispatcher_done, 1);
    }
    return NULL;
}

/* ---- progress and summary ------------------------------------------------------------------- */

static void human(char *out, size_t n, double x) {
    if (x >= 1e9)
        snprintf(out, n, "%.2fG", x / 1e9);
    else if (x >= 1e6)
        snprintf(out, n, "%.2fM", x / 1e6);
    else if (x >= 1e4)
        snprintf(out, n, "%.1fk", x / 1e3);
    else
        snprintf(out, n, "%.0f", x);
}

static void progress(campaign *cp) {
    pthread_mutex_lock(&cp->mu);
    kvf_campaign_stats st = *cp->stats;
    size_t corpus = cp->ncorpus;
    pthread_mutex_unlock(&cp->mu);
    double t = now_s() - cp->start;
    char tok[32], tps[32];
    human(tok, sizeof tok, (double)st.tokens);
    human(tps, sizeof tps, t > 0 ? (double)st.tokens / t : 0);
    FILE *f = logf_(cp);
    fprintf(f,
            "kvfuzz fuzz: %6.0fs  cases %" PRId64 " (%.1f/s)  tokens %s (%s/s)  findings %" PRId64
            " new, %" PRId64 " hits  worst margin",
            t, st.cases, t > 0 ? (double)st.cases / t : 0, tok, tps, st.findings_new,
            st.finding_hits);
    for (int r = 0; r < cp->nrules; r++)
        fprintf(f, " %s %.3g", cp->rules[r].name, st.worst_margin[r]);
    fprintf(f, "  corpus %zu\n", corpus);
    fflush(f);
}

void kvf_campaign_print_summary(FILE *f, const kvf_campaign_opts *o, const kvf_campaign_stats *st) {
    fprintf(f, "kvfuzz fuzz: %s after %.1f s\n",
            st->interrupted
                ? (st->stop_signal == SIGTERM ? "stopped by SIGTERM" : "stopped by SIGINT")
                : "done",
            st->elapsed_s);
    const int nr = o->nrules > 0 ? o->nrules : 1;
    if (o->oracle_only) { /* no kernel ran and no rule judged: name neither */
        fprintf(f, "  oracle only (no kernel, nothing judged), seed %" PRIu64, o->seed);
    } else {
        fprintf(f, "  kernel %s, seed %" PRIu64 ", rules", o->kernel ? o->kernel->name : "?",
                o->seed);
        for (int r = 0; r < nr; r++)
            fprintf(f, " %s", o->nrules > 0 ? o->rules[r].name : "strict");
    }
    fprintf(f,
            "\n  cases %" PRId64 " (%.1f/s), %s %" PRId64 ", tokens %" PRId64
            " (%.0f/s), unsupported %" PRId64 ", rejected %" PRId64 "\n",
            st->cases, st->elapsed_s > 0 ? (double)st->judged / st->elapsed_s : 0,
            o->oracle_only ? "through the oracle" : "judged", st->judged, st->tokens,
            st->elapsed_s > 0 ? (double)st->tokens / st->elapsed_s : 0, st->unsupported,
            st->rejected);
    double util = st->jobs > 0 && st->elapsed_s > 0 ? st->oracle_s / (st->jobs * st->elapsed_s) : 0;
    if (o->oracle_only)
        fprintf(f, "  busy: oracle %.1f s (%.0f%% of %d thread(s))\n", st->oracle_s, 100 * util,
                st->jobs);
    else
        fprintf(f,
                "  busy: oracle %.1f s (%.0f%% of %d thread(s)), kernel %.1f s in %d worker(s); "
                "determinism checks %" PRId64 ", worker starts %" PRId64 "\n",
                st->oracle_s, 100 * util, st->jobs, st->kernel_s, st->workers,
                st->determinism_checks, st->worker_starts);
    fprintf(f,
            "  dispatcher waits: for generated cases %.1f s, for the kernel %.1f s, for room in "
            "the oracle queue %.1f s\n",
            st->wait_cases_s, st->wait_kernel_s, st->wait_oracle_s);
    if (st->crashes_unconfirmed)
        fprintf(f,
                "  %" PRId64 " crash(es) did not happen again on a re-run and were not filed (a "
                "worker killed from outside, or a flaky crash)\n",
                st->crashes_unconfirmed);
    fprintf(f, "  corpus %" PRId64 " (+%" PRId64 " new", st->corpus_size, st->corpus_added);
    if (st->corpus_unsaved) fprintf(f, ", %" PRId64 " of them not saved", st->corpus_unsaved);
    fprintf(f, ")\n");
    if (st->skipped_unsupported) {
        fprintf(f,
                "  skipped %" PRId64 " generated case(s) whose shape the kernel does not support"
                " (%.1f%% of those generated):\n",
                st->skipped_unsupported,
                100.0 * (double)st->skipped_unsupported /
                    (double)(st->skipped_unsupported + st->cases + (st->cases ? 0 : 1)));
        for (int i = 0; i < KVF_CAMPAIGN_REASONS && st->skip_reasons[i][0]; i++)
            fprintf(f, "    %" PRId64 " x %s\n", st->skip_counts[i], st->skip_reasons[i]);
    }
    if (!o->oracle_only) { /* nothing was judged: no margin to show */
        fprintf(f, "  worst margin:");
        for (int r = 0; r < nr; r++)
            fprintf(f, " %s %.3g", o->nrules > 0 ? o->rules[r].name : "strict",
                    st->worst_margin[r]);
        fprintf(f, "\n");
    }
    fprintf(f, "  findings: %" PRId64 " new signature(s)", st->findings_new);
    if (st->findings_lost)
        fprintf(f, ", %" PRId64 " LOST (could not be written; see above)", st->findings_lost);
    fprintf(f, ", %" PRId64 " case(s) with a finding", st->finding_hits);
    for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
        if (st->by_class[c])
            fprintf(f, "; %s %" PRId64, kvf_finding_class_name((kvf_finding_class)c),
                    st->by_class[c]);
    fprintf(f, "\n");
}

/* ---- run ------------------------------------------------------------------------------------ */

int kvf_campaign_run(const kvf_campaign_opts *o, kvf_campaign_stats *st, kvf_error *err) {
    memset(st, 0, sizeof *st);
    if (!o->kernel && !o->oracle_only) return kvf_error_set(err, KVF_EINVAL, "no kernel given");
    campaign *cp = calloc(1, sizeof *cp);
    if (!cp) return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    cp->opts = o;
    cp->stats = st;
    cp->nrules = o->nrules > 0 ? (o->nrules < KVF_MAX_RULES ? o->nrules : KVF_MAX_RULES) : 1;
    if (o->nrules > 0)
        memcpy(cp->rules, o->rules, (size_t)cp->nrules * sizeof *cp->rules);
    else
        kvf_rule_parse(&cp->rules[0], "strict", NULL);
    for (int r = 0; r < cp->nrules; r++)
        st->worst_margin[r] = 0;
    cp->jobs = o->jobs > 0 ? o->jobs : kvf_campaign_default_jobs(o, sysconf(_SC_NPROCESSORS_ONLN));
    if (cp->jobs > MAX_JOBS) cp->jobs = MAX_JOBS;
    st->jobs = cp->jobs;
    pthread_mutex_init(&cp->mu, NULL);
    pthread_mutex_init(&cp->rmu, NULL);
    pthread_cond_init(&cp->r_ready, NULL);
    pthread_cond_init(&cp->r_space, NULL);
    pthread_mutex_init(&cp->qmu, NULL);
    pthread_cond_init(&cp->q_ready, NULL);
    pthread_cond_init(&cp->q_space, NULL);
    cp->qcap = 2 * cp->jobs + 2;
    cp->queue = calloc((size_t)cp->qcap, sizeof *cp->queue);
    int ngen = o->generators > 0 ? o->generators : (cp->jobs + 3) / 4;
    if (ngen > MAX_GENERATORS) ngen = MAX_GENERATORS;
    cp->rcap = 2 * ngen + 2;
    cp->ready = calloc((size_t)cp->rcap, sizeof *cp->ready);
    cp->nfeatures = kvf_feature_space(cp->nrules);
    cp->seen = calloc((size_t)cp->nfeatures, 1);
    int rc = 0;
    if (!cp->queue || !cp->seen || !cp->ready) {
        rc = kvf_error_set(err, KVF_ENOMEM, "out of memory");
        goto out;
    }
    if (o->corpus_dir && (rc = corpus_load(cp, o->corpus_dir, err))) goto out;
    if (o->findings_dir && (rc = kvf_fuzz_mkdirs(o->findings_dir, err))) goto out;
    if (o->findings_dir && (rc = kvf_fuzz_check_writable(o->findings_dir, err))) goto out;
    st->corpus_size = (int64_t)cp->ncorpus;

    kvf_runner_opts ro = {o->kernel, o->case_limits, o->deadline_s > 0 ? o->deadline_s : 10, 0,
                          o->in_process};
    /* In-process kernels share this process's state: one at a time. */
    cp->nworkers = o->oracle_only || o->in_process ? 1 : o->workers > 0 ? o->workers : 1;
    if (cp->nworkers > MAX_WORKERS) cp->nworkers = MAX_WORKERS;
    for (int i = 0; i < cp->nworkers && !o->oracle_only; i++)
        if ((rc = kvf_runner_create(&cp->runners[i], &ro, err))) goto out;
    st->workers = cp->nworkers;

    /* Signals go to the main thread only: the others block them from birth. */
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    g_signal = 0;
    kvf_oracle_clear_stop();
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old_mask);

    cp->start = now_s();
    pthread_t oracle_tid[MAX_JOBS], disp_tid[MAX_WORKERS];
    oracle_thread oracles[MAX_JOBS];
    dispatcher disps[MAX_WORKERS];
    int started = 0;
    atomic_store(&cp->live_oracles, cp->jobs);
    for (int i = 0; i < cp->jobs; i++) {
        oracles[i] = (oracle_thread){cp, i};
        if (pthread_create(&oracle_tid[i], NULL, oracle_main, &oracles[i]) != 0) break;
        started++;
    }
    atomic_store(&cp->live_oracles, started);
    pthread_t gen_tid[MAX_GENERATORS];
    generator gens[MAX_GENERATORS];
    int gens_started = 0;
    atomic_store(&cp->live_generators, ngen);
    for (int i = 0; i < ngen && started > 0; i++) {
        gens[i].cp = cp;
        kvf_prng_seed_stream(&gens[i].rng, o->seed, (uint64_t)i);
        if (pthread_create(&gen_tid[i], NULL, generator_main, &gens[i]) != 0) break;
        gens_started++;
    }
    /* Generators that never started count as finished. */
    if (gens_started < ngen &&
        atomic_fetch_sub(&cp->live_generators, ngen - gens_started) == ngen - gens_started)
        ready_close(cp);
    int disp_started = 0;
    atomic_store(&cp->live_dispatchers, cp->nworkers);
    for (int i = 0; i < cp->nworkers && gens_started > 0; i++) {
        disps[i] = (dispatcher){cp, i, cp->runners[i]};
        if (pthread_create(&disp_tid[i], NULL, dispatcher_main, &disps[i]) != 0) break;
        disp_started++;
    }
    int disp_ok = disp_started > 0;
    if (disp_started < cp->nworkers &&
        atomic_fetch_sub(&cp->live_dispatchers, cp->nworkers - disp_started) ==
            cp->nworkers - disp_started) {
        queue_close(cp);
        atomic_store(&cp->dispatcher_done, 1);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);

    double progress_every = o->progress_s > 0 ? o->progress_s : 5;
    if (progress_every > 5) progress_every = 5;
    double next_progress = cp->start + progress_every;
    while (disp_ok && (!atomic_load(&cp->dispatcher_done) || atomic_load(&cp->live_oracles) > 0)) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        double t = now_s();
        if (g_signal && atomic_load(&cp->stop) < 2) {
            st->interrupted = 1;
            st->stop_signal = g_signal;
            atomic_store(&cp->stop, 2);
            /* Kill the launch in flight (the dispatcher discards what comes back) and wake a
             * dispatcher blocked on a full queue. */
            for (int i = 0; i < cp->nworkers; i++)
                if (cp->runners[i]) kvf_runner_interrupt(cp->runners[i]);
            pthread_mutex_lock(&cp->rmu);
            pthread_cond_broadcast(&cp->r_ready);
            pthread_cond_broadcast(&cp->r_space);
            pthread_mutex_unlock(&cp->rmu);
            pthread_mutex_lock(&cp->qmu);
            pthread_cond_broadcast(&cp->q_space);
            pthread_mutex_unlock(&cp->qmu);
        }
        if (o->time_limit_s > 0 && t - cp->start >= o->time_limit_s &&
            atomic_load(&cp->stop) == 0) {
            atomic_store(&cp->stop, 1);
            pthread_mutex_lock(&cp->rmu); /* generators waiting for room give up */
            pthread_cond_broadcast(&cp->r_space);
            pthread_mutex_unlock(&cp->rmu);
        }
        if (t >= next_progress) {
            progress(cp);
            next_progress += progress_every;
            if (next_progress < t) next_progress = t + progress_every;
        }
    }
    for (int i = 0; i < disp_started; i++)
        pthread_join(disp_tid[i], NULL);
    for (int i = 0; i < gens_started; i++)
        pthread_join(gen_tid[i], NULL);
    for (int i = 0; i < started; i++)
        pthread_join(oracle_tid[i], NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    st->elapsed_s = now_s() - cp->start;
    st->corpus_size = (int64_t)cp->ncorpus;
    if (!disp_ok && !cp->fatal)
        rc = kvf_error_set(err, KVF_ENOMEM, "could not start the campaign's threads");
    if (cp->fatal) {
        if (err) *err = cp->fatal_err;
        rc = cp->fatal;
    }
out:
    for (int i = 0; i < cp->nworkers; i++)
        if (cp->runners[i]) kvf_runner_destroy(cp->runners[i]);
    for (int i = 0; i < cp->rcount; i++) /* generated, never run */
        job_free(cp->ready[(cp->rhead + i) % cp->rcap]);
    free(cp->ready);
    pthread_mutex_destroy(&cp->rmu);
    pthread_cond_destroy(&cp->r_ready);
    pthread_cond_destroy(&cp->r_space);
    for (size_t i = 0; i < cp->ncorpus; i++)
        free(cp->corpus[i].bytes);
    free(cp->corpus);
    free(cp->seen);
    free(cp->signatures);
    free(cp->lost);
    free(cp->queue);
    pthread_mutex_destroy(&cp->mu);
    pthread_mutex_destroy(&cp->qmu);
    pthread_cond_destroy(&cp->q_ready);
    pthread_cond_destroy(&cp->q_space);
    free(cp);
    return rc;
}
