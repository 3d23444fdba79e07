/* The campaign's lifecycle (campaign.h): init builds it (corpus, runners, queues), start
 * launches its threads, wait keeps time, prints progress, re-reads the corpus folder and turns
 * SIGINT/SIGTERM into an orderly stop, free releases it. The threads' work is in generate.c,
 * dispatch.c and judge_pool.c (campaign_internal.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "campaign_internal.h"
#include "kvfuzz/file.h"

void kvf_campaign_opts_default(kvf_campaign_opts *o) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->deadline_s = 10;
    o->determinism_every = 16;
    o->relations_every = 8;
    o->progress_s = 5;
    o->reload_s = 10;
    kvf_mutate_limits_default(&o->mutate);
    /* Large cases: docs/fuzzing.md, "Reach". */
    kvf_mutate_limits_default(&o->large);
    o->large.max_batch = 256;
    o->large.max_pages = 65535;
    o->large.max_work = (int64_t)1 << 24;
    o->large.max_pool_elems = (int64_t)1 << 24;
    /* Logits past the f32 range leave the oracle's fast path for MPFR on every row; at 10^5
     * tokens that took 21 s for one case. The overflow class is small cases' business. */
    o->large.allow_overflow = 0;
    o->large_share = 0.25;
    o->shape_set = -1;
    kvf_limits_default(&o->case_limits);
}

int kvf_campaign_lanes(const kvf_campaign_opts *o) {
    if (o->in_process || o->oracle_only || !o->kernel) return 1;
    return o->lanes > 0 ? o->lanes : 0;
}

int kvf_campaign_default_jobs(const kvf_campaign_opts *o, long cores) {
    if (cores < 1) cores = 1;
    if (cores > KVF_CAMPAIGN_MAX_JOBS) cores = KVF_CAMPAIGN_MAX_JOBS;
    long kept = o->oracle_only ? 0 : cores / 4;
    if (kept > 4) kept = 4;
    return (int)(cores - kept);
}

/* ---- signals -------------------------------------------------------------------------------- */

static volatile sig_atomic_t g_signal;
static int g_caught; /* handlers installed (by kvf_campaign_catch_signals or a campaign) */
static struct sigaction g_old_int, g_old_term;

static void on_signal(int sig) {
    g_signal = sig;
    kvf_oracle_request_stop(); /* an oracle run in progress returns within a second */
    /* A second Ctrl-C should not wait for the orderly stop. */
    signal(sig, SIG_DFL);
}

void kvf_campaign_catch_signals(void) {
    if (g_caught) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    g_signal = 0;
    kvf_oracle_clear_stop();
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_caught = 1;
}

void kvf_campaign_release_signals(void) {
    if (!g_caught) return;
    sigaction(SIGINT, &g_old_int, NULL);
    sigaction(SIGTERM, &g_old_term, NULL);
    g_caught = 0;
}

int kvf_campaign_stop_signal(void) {
    return (int)g_signal;
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

static void progress(kvf_campaign *cp) {
    pthread_mutex_lock(&cp->mu);
    kvf_campaign_stats st = *cp->stats;
    size_t corpus = kvf__corpus_size(&cp->corpus);
    pthread_mutex_unlock(&cp->mu);
    double t = kvf__now_s() - cp->start;
    char tok[32], tps[32];
    human(tok, sizeof tok, (double)st.tokens);
    human(tps, sizeof tps, t > 0 ? (double)st.tokens / t : 0);
    FILE *f = kvf__log(cp);
    fprintf(f, "kvfuzz fuzz: %6.0fs  cases %" PRId64 " (%.1f/s)  tokens %s (%s/s)", t, st.cases,
            t > 0 ? (double)st.cases / t : 0, tok, tps);
    /* With no kernel nothing is judged: no findings or margins to show (a margin of 0 would
     * read as a failure). */
    if (!cp->opts->oracle_only)
        fprintf(f, "  findings %" PRId64 " new, %" PRId64 " hits  worst margin", st.findings_new,
                st.finding_hits);
    for (int r = 0; !cp->opts->oracle_only && r < cp->nrules; r++) {
        char m[32], e[32];
        kvf_margin_text(m, sizeof m, st.worst_margin[r]);
        kvf_margin_text(e, sizeof e, st.worst_excess[r]);
        fprintf(f, " %s %s (excess %s)", cp->rules[r].name, m, e);
    }
    fprintf(f, "  corpus %zu\n", corpus);
    fflush(f);
}

/* The rate per device, and whether the oracle can feed them all (docs/scaling.md). */
static void print_devices(FILE *f, const kvf_campaign_stats *st) {
    if (st->ndevices == 0) return;
    int active = 0;
    fprintf(f, "  devices: %d, %d worker(s) each\n", st->ndevices, st->workers / st->ndevices);
    for (int k = 0; k < st->ndevices; k++) {
        const kvf_campaign_device *d = &st->device[k];
        active += !d->retired;
        fprintf(f,
                "    device %d: %" PRId64 " cases (%.1f/s), kernel busy %.1f s, %" PRId64
                " crash(es), %" PRId64 " hang(s), %" PRId64
                " kernel error(s), worker starts %" PRId64 "\n",
                d->ordinal, d->cases, d->active_s > 0 ? (double)d->cases / d->active_s : 0.0,
                d->kernel_s, d->crashes, d->hangs, d->kernel_errors, d->worker_starts);
        if (d->retired) fprintf(f, "      retired after %.1f s: %s\n", d->active_s, d->why);
    }
    if (st->judged == 0 || st->elapsed_s <= 0 || active == 0) return;
    /* Cores of judging (the oracle, the rules, the statistics) each serving GPU used: what a host
     * needs per GPU at this rate. */
    double cores_per_gpu = st->judge_s / st->elapsed_s / active;
    int oracle_bound =
        st->wait_oracle_s > st->wait_kernel_s && st->wait_oracle_s > st->wait_cases_s;
    fprintf(f,
            "  placement: %.2f judging core(s) per GPU at %.0f cases/s per GPU (%.3g core-ms a "
            "case); %s\n",
            cores_per_gpu, (double)st->judged / st->elapsed_s / active,
            1e3 * st->judge_s / (double)st->judged,
            oracle_bound ? "the oracle set the pace (the dispatchers waited most for room in its "
                           "queue): this host has more GPUs than its oracle threads can feed"
                         : "the oracle kept up");
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
    double work = st->work_large + st->work_small;
    fprintf(f,
            "  reach: %" PRId64
            " large case(s), %.0f%% of the oracle work; longest sequence %" PRId64
            " tokens, largest batch %" PRId64 "\n",
            st->large_cases, work > 0 ? 100 * st->work_large / work : 0.0, st->longest_seq,
            st->largest_batch);
    if (st->crashes || st->hangs || st->kernel_errors)
        fprintf(f,
                "  launches without output: %" PRId64 " crash(es), %" PRId64 " hang(s), %" PRId64
                " kernel error(s)\n",
                st->crashes, st->hangs, st->kernel_errors);
    if (st->corpus_reloaded)
        fprintf(f, "  corpus: %" PRId64 " entr%s taken in from other campaigns\n",
                st->corpus_reloaded, st->corpus_reloaded == 1 ? "y" : "ies");
    double util = st->jobs > 0 && st->elapsed_s > 0 ? st->judge_s / (st->jobs * st->elapsed_s) : 0;
    fprintf(f,
            "  busy: oracle threads %.1f s (%.0f%% of %d thread(s)), the oracle %.1f s of it "
            "(%.1f%% of its rows by MPFR)",
            st->judge_s, 100 * util, st->jobs, st->oracle_s,
            st->oracle_rows > 0 ? 100.0 * (double)st->oracle_mpfr_rows / (double)st->oracle_rows
                                : 0.0);
    if (!o->oracle_only)
        fprintf(f,
                "; kernel %.1f s in %d worker(s) of %d lane(s); determinism checks %" PRId64
                ", worker starts %" PRId64,
                st->kernel_s, st->workers, st->lanes > 0 ? st->lanes : 1, st->determinism_checks,
                st->worker_starts);
    fputc('\n', f);
    fprintf(f,
            "  dispatcher waits: for generated cases %.1f s, for the kernel %.1f s (blocked on "
            "the worker %.1f s of it), for room in the oracle queue %.1f s\n",
            st->wait_cases_s, st->wait_kernel_s, st->wait_worker_idle_s, st->wait_oracle_s);
    print_devices(f, st);
    kvf__relations_print(f, st);
    if (st->reruns_alone)
        fprintf(f,
                "  %" PRId64 " failure(s) came while a worker ran several cases at once; those "
                "cases ran again one at a time and only failures that happened again alone were "
                "filed\n",
                st->reruns_alone);
    if (st->unrepeated_alone)
        fprintf(f,
                "  %" PRId64 " of them did not happen again alone: the kernel's states may "
                "interfere with each other (run with --lanes 1 to fuzz it one case at a time)\n",
                st->unrepeated_alone);
    if (st->crashes_unconfirmed)
        fprintf(f,
                "  %" PRId64 " crash(es) did not happen again on a re-run and were not filed (a "
                "worker killed from outside, or a flaky crash)\n",
                st->crashes_unconfirmed);
    fprintf(f, "  corpus %" PRId64 " (+%" PRId64 " new", st->corpus_size, st->corpus_added);
    if (st->corpus_unsaved) fprintf(f, ", %" PRId64 " of them not saved", st->corpus_unsaved);
    fprintf(f, ")\n");
    const unsigned dtypes = kvf_kv_dtypes_norm(o->mutate.kv_dtypes);
    if (st->judged_quant || dtypes != KVF_KV_DTYPES_ALL) {
        fprintf(f, "  kv caches: %" PRId64 " of the judged cases had FP8 caches", st->judged_quant);
        if (dtypes != KVF_KV_DTYPES_ALL) fprintf(f, " (--kv-dtype %s)", kvf_kv_dtypes_name(dtypes));
        fputc('\n', f);
    }
    if (st->shape_set_size)
        fprintf(f,
                "  shapes: %d in the shape set, %" PRId64 " case(s) took one of them instead of "
                "their own (--shape-set 0 draws every shape)\n",
                st->shape_set_size, st->shape_set_replaced);
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
        for (int r = 0; r < nr; r++) {
            char m[32], e[32];
            kvf_margin_text(m, sizeof m, st->worst_margin[r]);
            kvf_margin_text(e, sizeof e, st->worst_excess[r]);
            fprintf(f, " %s %s (excess %s)", o->nrules > 0 ? o->rules[r].name : "strict", m, e);
        }
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
    if (st->signatures_defect + st->signatures_precision > 0)
        fprintf(f, "; attributed: %" PRId64 " defect, %" PRId64 " precision", st->signatures_defect,
                st->signatures_precision);
    fprintf(f, "\n");
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int kvf_campaign_init(kvf_campaign **out, const kvf_campaign_opts *o, kvf_campaign_stats *st,
                      kvf_error *err) {
    *out = NULL;
    memset(st, 0, sizeof *st);
    if (!o->kernel && !o->oracle_only) return kvf_error_set(err, KVF_EINVAL, "no kernel given");
    /* FP8 caches in every case (a dtype set without bf16) need a kernel that reads them. */
    const int quant_kernel = !o->kernel || o->oracle_only || kvf_kernel_takes_quant(o->kernel);
    if (!quant_kernel && (!(kvf_kv_dtypes_norm(o->mutate.kv_dtypes) & KVF_KV_DTYPES_BF16) ||
                          !(kvf_kv_dtypes_norm(o->large.kv_dtypes) & KVF_KV_DTYPES_BF16)))
        return kvf_error_set(err, KVF_EINVAL,
                             "kernel %s does not read FP8 caches, and every case was to have "
                             "them",
                             o->kernel->name);
    kvf_campaign *cp = calloc(1, sizeof *cp);
    if (!cp) return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    /* Buffer layouts only for a kernel whose host lays them out (kvf_kernel_takes_layouts). */
    cp->own_opts = *o;
    if (o->kernel && !kvf_kernel_takes_layouts(o->kernel))
        cp->own_opts.mutate.allow_layouts = cp->own_opts.large.allow_layouts = 0;
    /* Quantized caches only for a kernel that reads them (kvf_kernel_takes_quant). */
    if (!quant_kernel) cp->own_opts.mutate.allow_quant = cp->own_opts.large.allow_quant = 0;
    cp->opts = &cp->own_opts;
    int shapes = o->shape_set;
    if (shapes < 0)
        shapes = o->kernel && !o->oracle_only && kvf_kernel_compiles_per_shape(o->kernel)
                     ? KVF_CAMPAIGN_SHAPE_SET
                     : 0;
    kvf__shape_set_init(&cp->shapes, shapes, KVF_CAMPAIGN_SHAPE_GROWTH);
    cp->stats = st;
    cp->nrules = o->nrules > 0 ? (o->nrules < KVF_MAX_RULES ? o->nrules : KVF_MAX_RULES) : 1;
    if (o->nrules > 0)
        memcpy(cp->rules, o->rules, (size_t)cp->nrules * sizeof *cp->rules);
    else
        kvf_rule_parse(&cp->rules[0], "strict", NULL);
    for (int r = 0; r < cp->nrules; r++)
        st->worst_margin[r] = st->worst_excess[r] = 0;
    cp->jobs = o->jobs > 0 ? o->jobs : kvf_campaign_default_jobs(o, sysconf(_SC_NPROCESSORS_ONLN));
    if (cp->jobs > KVF_CAMPAIGN_MAX_JOBS) cp->jobs = KVF_CAMPAIGN_MAX_JOBS;
    st->jobs = cp->jobs;
    pthread_mutex_init(&cp->mu, NULL);
    kvf__corpus_init(&cp->corpus, o->corpus_dir, &o->case_limits);
    cp->ngen = o->generators > 0 ? o->generators : (cp->jobs + 3) / 4;
    if (cp->ngen > KVF__MAX_GENERATORS) cp->ngen = KVF__MAX_GENERATORS;
    cp->nfeatures = kvf_feature_space(cp->nrules);
    cp->seen = calloc((size_t)cp->nfeatures, 1);
    *out = cp; /* from here kvf_campaign_free releases whatever was made */
    /* Deep enough that a burst of slow cases at the oracle or the generators does not stall
     * the dispatcher (the kernel would wait with it), and bounded in bytes as well. */
    if (kvf__queue_init(&cp->judged, 8 * cp->jobs + 16, KVF__JUDGED_QUEUE_BYTES) ||
        kvf__queue_init(&cp->ready, 16 * cp->ngen + 16, KVF__READY_QUEUE_BYTES) || !cp->seen)
        return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    int rc;
    if ((rc = kvf__corpus_load(&cp->corpus, kvf__log(cp), err))) return rc;
    if (o->findings_dir && (rc = kvf_mkdirs(o->findings_dir, err))) return rc;
    if (o->findings_dir && (rc = kvf_fuzz_check_writable(o->findings_dir, err))) return rc;
    st->corpus_size = (int64_t)kvf__corpus_size(&cp->corpus);

    kvf_runner_opts ro = {o->kernel, o->case_limits, o->deadline_s > 0 ? o->deadline_s : 10,
                          0,         o->in_process,  kvf_campaign_lanes(o)};
    /* In-process kernels share this process's state: one at a time. */
    const int per_device = o->workers > 0 ? o->workers : 1;
    const int ndev = o->devices && !o->oracle_only && !o->in_process ? o->devices->n : 0;
    if (ndev > KVF_MAX_DEVICES || (ndev && per_device > KVF__MAX_WORKERS / ndev))
        return kvf_error_set(err, KVF_EINVAL,
                             "%d device(s) x %d worker(s) each is more than the %d workers a "
                             "campaign runs",
                             ndev, per_device, KVF__MAX_WORKERS);
    cp->nworkers = o->oracle_only || o->in_process ? 1 : ndev ? ndev * per_device : per_device;
    if (cp->nworkers > KVF__MAX_WORKERS) cp->nworkers = KVF__MAX_WORKERS;
    st->ndevices = ndev;
    for (int k = 0; k < ndev; k++)
        st->device[k].ordinal = o->devices->ordinal[k];
    for (int i = 0; i < cp->nworkers && !o->oracle_only; i++) {
        cp->worker_device[i] = ndev ? i / per_device : -1;
        if ((rc = kvf_runner_create(&cp->runners[i], &ro, err))) return rc;
        if (ndev) kvf_runner_set_device(cp->runners[i], o->devices->visible[i / per_device]);
    }
    st->workers = cp->nworkers;
    return 0;
}

int kvf_campaign_start(kvf_campaign *cp, kvf_error *err) {
    (void)err;
    const kvf_campaign_opts *o = cp->opts;
    /* Signals go to the main thread only: the others block them from birth. */
    cp->own_signals = !g_caught;
    kvf_campaign_catch_signals();
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old_mask);

    cp->start = kvf__now_s();
    atomic_store(&cp->live_oracles, cp->jobs);
    for (int i = 0; i < cp->jobs; i++) {
        cp->oracles[i] = (kvf__oracle_thread){cp, i};
        if (pthread_create(&cp->oracle_tid[i], NULL, kvf__oracle_main, &cp->oracles[i]) != 0) break;
        cp->oracles_started++;
    }
    atomic_store(&cp->live_oracles, cp->oracles_started);
    atomic_store(&cp->live_generators, cp->ngen);
    for (int i = 0; i < cp->ngen && cp->oracles_started > 0; i++) {
        cp->gens[i].cp = cp;
        kvf_prng_seed_stream(&cp->gens[i].rng, o->seed, (uint64_t)i);
        if (pthread_create(&cp->gen_tid[i], NULL, kvf__generator_main, &cp->gens[i]) != 0) break;
        cp->gens_started++;
    }
    /* Generators that never started count as finished. */
    int missing = cp->ngen - cp->gens_started;
    if (missing > 0 && atomic_fetch_sub(&cp->live_generators, missing) == missing)
        kvf__queue_close(&cp->ready);
    atomic_store(&cp->live_dispatchers, cp->nworkers);
    atomic_store(&cp->serving, cp->nworkers);
    for (int i = 0; i < cp->nworkers && cp->gens_started > 0; i++) {
        cp->disps[i] = (kvf__dispatcher){cp, i, cp->runners[i], cp->worker_device[i], 0};
        if (pthread_create(&cp->disp_tid[i], NULL, kvf__dispatcher_main, &cp->disps[i]) != 0) break;
        cp->disps_started++;
    }
    missing = cp->nworkers - cp->disps_started;
    if (missing > 0 && atomic_fetch_sub(&cp->live_dispatchers, missing) == missing) {
        kvf__queue_close(&cp->judged);
        atomic_store(&cp->dispatcher_done, 1);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    return 0;
}

int kvf_campaign_wait(kvf_campaign *cp, kvf_error *err) {
    const kvf_campaign_opts *o = cp->opts;
    kvf_campaign_stats *st = cp->stats;
    int disp_ok = cp->disps_started > 0;
    double progress_every = o->progress_s > 0 ? o->progress_s : 5;
    if (progress_every > 5) progress_every = 5;
    double next_progress = cp->start + progress_every;
    double next_reload = o->reload_s > 0 ? cp->start + o->reload_s : INFINITY;
    while (disp_ok && (!atomic_load(&cp->dispatcher_done) || atomic_load(&cp->live_oracles) > 0)) {
        if (!g_signal) { /* a signal before the first sleep stops at once */
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
        double t = kvf__now_s();
        if (g_signal && atomic_load(&cp->stop) < KVF__DROP) {
            st->interrupted = 1;
            st->stop_signal = g_signal;
            kvf__campaign_stop(cp, KVF__DROP);
            /* Kill the launch in flight (the dispatcher discards what comes back). */
            for (int i = 0; i < cp->nworkers; i++)
                if (cp->runners[i]) kvf_runner_interrupt(cp->runners[i]);
        }
        if (o->time_limit_s > 0 && t - cp->start >= o->time_limit_s &&
            atomic_load(&cp->stop) == KVF__RUN)
            kvf__campaign_stop(cp, KVF__FINISH);
        if (t >= next_reload && atomic_load(&cp->stop) == KVF__RUN) {
            size_t got = kvf__corpus_reload(&cp->corpus);
            if (got) {
                pthread_mutex_lock(&cp->mu);
                st->corpus_reloaded += (int64_t)got;
                pthread_mutex_unlock(&cp->mu);
            }
            next_reload = kvf__now_s() + o->reload_s;
        }
        if (t >= next_progress) {
            progress(cp);
            next_progress += progress_every;
            if (next_progress < t) next_progress = t + progress_every;
        }
    }
    for (int i = 0; i < cp->disps_started; i++)
        pthread_join(cp->disp_tid[i], NULL);
    for (int i = 0; i < cp->gens_started; i++)
        pthread_join(cp->gen_tid[i], NULL);
    for (int i = 0; i < cp->oracles_started; i++)
        pthread_join(cp->oracle_tid[i], NULL);
    cp->disps_started = cp->gens_started = cp->oracles_started = 0;
    cp->waited = 1;
    if (cp->own_signals) kvf_campaign_release_signals();
    st->elapsed_s = kvf__now_s() - cp->start;
    for (int k = 0; k < st->ndevices; k++)
        if (!st->device[k].retired) st->device[k].active_s = st->elapsed_s;
    for (int i = 0; i < cp->nworkers; i++)
        if (cp->worker_device[i] >= 0)
            st->device[cp->worker_device[i]].worker_starts += cp->worker_starts[i];
    st->corpus_size = (int64_t)kvf__corpus_size(&cp->corpus);
    st->shape_set_size = cp->shapes.initial > 0 ? kvf__shape_set_size(&cp->shapes) : 0;
    st->shape_set_replaced = (int64_t)cp->shapes.replaced;
    kvf__write_hits(cp);
    if (cp->fatal) {
        if (err) *err = cp->fatal_err;
        return cp->fatal;
    }
    if (!disp_ok) return kvf_error_set(err, KVF_ENOMEM, "could not start the campaign's threads");
    return 0;
}

void kvf_campaign_free(kvf_campaign *cp) {
    if (!cp) return;
    if (cp->disps_started || cp->gens_started || cp->oracles_started) {
        /* Started and never waited for: stop everything first. */
        kvf__campaign_stop(cp, KVF__DROP);
        for (int i = 0; i < cp->nworkers; i++)
            if (cp->runners[i]) kvf_runner_interrupt(cp->runners[i]);
        kvf_campaign_wait(cp, NULL);
    }
    for (int i = 0; i < cp->nworkers; i++)
        if (cp->runners[i]) kvf_runner_destroy(cp->runners[i]);
    kvf__queue_free(&cp->ready, kvf__job_free_any); /* generated, never run */
    kvf__queue_free(&cp->judged, kvf__job_free_any);
    kvf__corpus_free(&cp->corpus);
    free(cp->seen);
    free(cp->signatures);
    free(cp->sig_class);
    free(cp->sig_hits);
    free(cp->lost);
    pthread_mutex_destroy(&cp->mu);
    kvf__shape_set_destroy(&cp->shapes);
    free(cp);
}

int kvf_campaign_run(const kvf_campaign_opts *o, kvf_campaign_stats *st, kvf_error *err) {
    kvf_campaign *cp;
    int rc = kvf_campaign_init(&cp, o, st, err);
    if (!rc) rc = kvf_campaign_start(cp, err);
    if (!rc) rc = kvf_campaign_wait(cp, err);
    kvf_campaign_free(cp);
    return rc;
}
