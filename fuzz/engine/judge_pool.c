/* Oracle threads (campaign_internal.h): each takes one case at a time from the dispatchers,
 * computes its oracle, judges it under every rule, grows the corpus with cases reaching new
 * error buckets, and files findings. One case per thread, so small cases keep every core
 * busy. */
#define _GNU_SOURCE /* SCHED_BATCH */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "campaign_internal.h"
#include "kvfuzz/file.h"
#include "kvfuzz/trial.h"

/* How far below the campaign's other threads an oracle thread runs (nice steps). */
#define ORACLE_NICE 10

/* The oracle threads are throughput work that keeps every core it can get; the dispatcher, the
 * generators and the kernel worker are a pipeline that feeds the kernel, and each waits on the
 * next. With every core claimed, an oracle thread that preempts the worker's driving thread
 * idles the GPU and, behind it, the whole campaign. So an oracle thread runs as a batch thread
 * ten nice steps down: it still gets every core nobody else wants, and yields the ones the
 * pipeline needs. Lowering one's own priority needs no privilege; where the system refuses, the
 * thread keeps its priority, which is only slower. */
static void oracle_thread_yield_priority(void) {
#ifdef __linux__
    const struct sched_param batch = {0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch);
    const id_t tid = (id_t)syscall(SYS_gettid); /* per thread on Linux */
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0) (void)setpriority(PRIO_PROCESS, tid, now + ORACLE_NICE);
#endif
}

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

/* The saved signature's index, or n. */
static size_t set_index(const uint64_t *set, size_t n, uint64_t h) {
    size_t i = 0;
    while (i < n && set[i] != h)
        i++;
    return i;
}

/* Adds a saved signature with its first hit. */
static void signature_add(struct kvf_campaign *cp, uint64_t h, kvf_finding_class cls) {
    size_t n = cp->nsignatures;
    kvf_finding_class *c = realloc(cp->sig_class, (n + 1) * sizeof *c);
    if (c) cp->sig_class = c;
    int64_t *hits = realloc(cp->sig_hits, (n + 1) * sizeof *hits);
    if (hits) cp->sig_hits = hits;
    if (!c || !hits) return; /* then the signature is simply tried again when it recurs */
    set_add(&cp->signatures, &cp->nsignatures, h);
    if (cp->nsignatures == n + 1) {
        cp->sig_class[n] = cls;
        cp->sig_hits[n] = 1;
    }
}

void kvf__write_hits(struct kvf_campaign *cp) {
    const kvf_campaign_opts *o = cp->opts;
    if (!o->findings_dir || cp->nsignatures == 0) return;
    json_t *hits = json_object(), *root = json_pack("{s:i,s:o}", "kvfuzz_hits", 1, "hits", hits);
    int bad = !hits || !root;
    for (size_t i = 0; i < cp->nsignatures && !bad; i++) {
        char stem[96];
        snprintf(stem, sizeof stem, "%s-%012" PRIx64, kvf_finding_class_name(cp->sig_class[i]),
                 cp->signatures[i] & UINT64_C(0xFFFFFFFFFFFF));
        bad = json_object_set_new(hits, stem, json_integer((json_int_t)cp->sig_hits[i])) != 0;
    }
    char *text = bad ? NULL : json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
    char path[4200];
    snprintf(path, sizeof path, "%s/hits-%ld-%lld.counts", o->findings_dir, (long)getpid(),
             (long long)time(NULL));
    kvf_error err = {0};
    if (!text || kvf_write_atomic_bytes(path, text, strlen(text), &err))
        fprintf(kvf__log(cp), "kvfuzz fuzz: could not write %s: %s\n", path,
                text ? err.msg : "out of memory");
    free(text);
    json_decref(root);
}

void kvf__record_finding(struct kvf_campaign *cp, const kvf_outcome *out, const kvf__job *j) {
    const kvf_campaign_opts *o = cp->opts;
    kvf_campaign_stats *st = cp->stats;
    st->finding_hits++;
    st->by_class[out->finding]++;
    char sig[512];
    uint64_t h = kvf_outcome_signature(out, o->kernel->name, sig, sizeof sig);
    /* A signature counts as saved only once its files are on disk: one whose save failed
     * (a full disk, a folder made unwritable) is tried again each time it recurs. */
    size_t at = set_index(cp->signatures, cp->nsignatures, h);
    if (at < cp->nsignatures) {
        cp->sig_hits[at]++;
        return;
    }
    char path[4300] = "";
    int is_new = 1;
    if (o->findings_dir) {
        /* Where the campaign found it: enough to find the case again from the seed. */
        char seed_text[32];
        snprintf(seed_text, sizeof seed_text, "%" PRIu64, o->seed);
        json_t *extra = json_pack("{s:{s:o,s:I,s:o}}", "campaign", "seed",
                                  o->seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)o->seed)
                                                                 : json_string(seed_text),
                                  "case_index", (json_int_t)j->index, "elapsed_s",
                                  kvf_json_number(kvf__now_s() - cp->start));
        kvf_error err = {0};
        int failed = kvf_finding_save(o->findings_dir, out, o->kernel->name, &j->spec, &j->c, extra,
                                      &is_new, path, sizeof path, &err);
        json_decref(extra);
        if (failed) {
            if (!set_has(cp->lost, cp->nlost, h)) { /* said once per signature */
                set_add(&cp->lost, &cp->nlost, h);
                fprintf(kvf__log(cp),
                        "kvfuzz fuzz: could not save finding %s [%s]: %s (tried again if it "
                        "recurs)\n",
                        kvf_finding_class_name(out->finding), sig, err.msg);
            }
            st->findings_lost = (int64_t)cp->nlost;
            return;
        }
    }
    signature_add(cp, h, out->finding);
    if (o->max_findings > 0 && (int64_t)cp->nsignatures >= o->max_findings)
        kvf__campaign_stop(cp, KVF__FINISH); /* --max-findings: finish what is in flight */
    if (set_has(cp->lost, cp->nlost, h)) {
        set_remove(cp->lost, &cp->nlost, h);
        st->findings_lost = (int64_t)cp->nlost;
        fprintf(kvf__log(cp), "kvfuzz fuzz: finding [%s] saved on a later try\n", sig);
    }
    if (!is_new) return; /* already in the findings folder from an earlier run */
    st->findings_new++;
    if (out->attribution.kind == KVF_ATTRIB_DEFECT) st->signatures_defect++;
    if (out->attribution.kind == KVF_ATTRIB_PRECISION) st->signatures_precision++;
    FILE *lf = kvf__log(cp);
    fprintf(lf, "kvfuzz fuzz: new finding %s [%s]%s%s%s%s%s\n",
            kvf_finding_class_name(out->finding), sig, path[0] ? " -> " : "", path,
            out->fib < 0 ? ""
            : out->fib   ? "; fib catches it"
                         : "; fib misses it",
            out->attribution.kind != KVF_ATTRIB_NONE ? "; " : "", out->attribution.text);
    if (o->verbose) kvf_outcome_print(lf, out, o->kernel->name, &j->spec, &j->c);
    fflush(lf);
}

void kvf__record_run_finding(struct kvf_campaign *cp, const kvf_run_result *res,
                             const kvf__job *j) {
    kvf_outcome out;
    kvf_outcome_from_run(&out, res->status, res->message);
    out.signal = res->signal;
    out.exit_code = res->exit_code;
    if (res->status == KVF_RUN_HANG) out.deadline = cp->opts->deadline_s;
    pthread_mutex_lock(&cp->mu);
    if (out.finding != KVF_FINDING_NONE) kvf__record_finding(cp, &out, j);
    pthread_mutex_unlock(&cp->mu);
}

/* Whether the outcome's signature is already saved (a peek: it may be saved meanwhile, which
 * only costs a judging that was not needed). */
static int signature_saved(struct kvf_campaign *cp, const kvf_outcome *out) {
    uint64_t h = kvf_outcome_signature(out, cp->opts->kernel->name, NULL, 0);
    pthread_mutex_lock(&cp->mu);
    int saved = set_has(cp->signatures, cp->nsignatures, h);
    pthread_mutex_unlock(&cp->mu);
    return saved;
}

static void count_reach(kvf_campaign_stats *st, const kvf__job *j) {
    double work = (double)kvf_spec_work(&j->spec);
    if (j->large) {
        st->large_cases++;
        st->work_large += work;
    } else {
        st->work_small += work;
    }
    for (int32_t b = 0; b < (int32_t)j->c.batch_size; b++) {
        int64_t len = kvf_case_seq_len(&j->c, b);
        if (len > st->longest_seq) st->longest_seq = len;
    }
    if (j->c.batch_size > st->largest_batch) st->largest_batch = j->c.batch_size;
}

static void count_oracle(kvf_campaign_stats *st, const kvf_oracle_result *r, double seconds) {
    st->oracle_s += seconds;
    st->oracle_rows += r->fast_rows + r->fallback_rows;
    st->oracle_mpfr_rows += r->fallback_rows;
}

static void judge_job(struct kvf_campaign *cp, kvf__job *j, int thread) {
    const kvf_campaign_opts *o = cp->opts;
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    oo.threads = 1; /* one case per thread: small cases parallelise across cases */
    kvf_oracle_result oracle;
    kvf_error err = {0};
    double t0 = kvf__now_s();
    if (kvf_oracle_run(&oracle, &j->c, &oo, &err)) {
        if (err.code == KVF_EINTR) return; /* stopping: the case is not judged */
        pthread_mutex_lock(&cp->mu);
        fprintf(kvf__log(cp), "kvfuzz fuzz: the oracle failed on case %" PRIu64 ": %s\n", j->index,
                err.msg);
        pthread_mutex_unlock(&cp->mu);
        return;
    }
    double oracle_s = kvf__now_s() - t0;
    if (o->oracle_only) { /* measuring the oracle-bound rate: nothing to judge */
        pthread_mutex_lock(&cp->mu);
        cp->stats->judged++;
        cp->stats->tokens += kvf_case_total_tokens(&j->c);
        count_oracle(cp->stats, &oracle, oracle_s);
        count_reach(cp->stats, j);
        pthread_mutex_unlock(&cp->mu);
        kvf_oracle_result_free(&oracle);
        return;
    }
    kvf_outcome out;
    kvf_judge_hooks hooks;
    int hooked =
        o->judge_hooks && o->judge_hooks(o->observer_ctx, thread, &j->spec, &j->c, &hooks) == 0;
    const kvf_trial_rules judge = {cp->rules, cp->nrules, o->require_overflow,
                                   0,         0,          KVF_FINDING_NONE};
    const kvf_trial_rules explain = {cp->rules, cp->nrules, o->require_overflow,
                                     1,         1,          KVF_FINDING_NONE};
    int rc =
        kvf_trial_judge(&out, &judge, &j->c, &oracle, j->o, j->lse, hooked ? &hooks : NULL, &err);
    snprintf(out.plan, sizeof out.plan, "%s", j->plan);
    /* A finding to be saved says whether FlashInfer-Bench's rule would have caught it and which
     * precision model, if any, explains it (docs/precision.md): judged here, outside the lock,
     * and only for a signature not saved yet (recurrences are many). */
    if (rc == 0 && out.finding != KVF_FINDING_NONE && !signature_saved(cp, &out))
        kvf_trial_explain(&out, &explain, &j->c, &oracle, j->o, j->lse);
    pthread_mutex_lock(&cp->mu);
    kvf_campaign_stats *st = cp->stats;
    if (rc) {
        fprintf(kvf__log(cp), "kvfuzz fuzz: could not judge case %" PRIu64 ": %s\n", j->index,
                err.msg);
        pthread_mutex_unlock(&cp->mu);
        kvf_oracle_result_free(&oracle);
        return;
    }
    st->judged++;
    st->tokens += kvf_case_total_tokens(&j->c);
    if (!kvf_kv_quant_is_plain(&j->c.quant)) st->judged_quant++;
    count_oracle(st, &oracle, oracle_s);
    count_reach(st, j);
    for (int r = 0; r < cp->nrules; r++) {
        const kvf_verdict *v = &out.verdicts[r];
        if (kvf_verdict_status_of(v, o->require_overflow) == KVF_VERDICT_OUT_OF_MODEL) continue;
        double m = fmax(v->o.max_margin, v->lse.max_margin);
        if (m > st->worst_margin[r] || isnan(m)) st->worst_margin[r] = m;
        double x = fmax(v->o.max_excess_margin, v->lse.max_excess_margin);
        if (x > st->worst_excess[r] || isnan(x)) st->worst_excess[r] = x;
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
        kvf_error e2 = {0};
        st->corpus_added++;
        if (kvf__corpus_add(&cp->corpus, j->bytes, j->size, &e2)) {
            /* Said once: the same cause (a full disk, an unwritable folder) would repeat for
             * every new corpus entry. The entry stays in this run's memory corpus. */
            if (st->corpus_unsaved++ == 0)
                fprintf(kvf__log(cp),
                        "kvfuzz fuzz: %s (corpus entries stay in memory; the count of "
                        "unsaved ones is in the summary)\n",
                        e2.msg);
        }
    }
    if (out.finding != KVF_FINDING_NONE) kvf__record_finding(cp, &out, j);
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

static void add_judge_time(struct kvf_campaign *cp, double s) {
    pthread_mutex_lock(&cp->mu);
    cp->stats->judge_s += s;
    pthread_mutex_unlock(&cp->mu);
}

void *kvf__oracle_main(void *arg) {
    const kvf__oracle_thread *self = arg;
    struct kvf_campaign *cp = self->cp;
    kvf__job *j;
    /* Busy time, added to the statistics in batches: a lock per case more would be felt by the
     * dispatcher, which takes the same lock. */
    double busy = 0;
    int unsaved = 0;
    oracle_thread_yield_priority();
    while ((j = kvf__queue_pop(&cp->judged))) {
        const double t0 = kvf__now_s();
        if (atomic_load(&cp->stop) < KVF__DROP) judge_job(cp, j, self->index);
        kvf__job_free(j);
        busy += kvf__now_s() - t0;
        if (++unsaved == 64) {
            add_judge_time(cp, busy);
            busy = 0, unsaved = 0;
        }
    }
    add_judge_time(cp, busy);
    kvf_oracle_thread_done();
    atomic_fetch_sub(&cp->live_oracles, 1);
    return NULL;
}
