/* The mutant benchmark (kvfuzz/mutant_bench.h): a campaign (a) per kernel over the shared case
 * cache, the seed cases per rule, and the whole run over mutants and controls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvfuzz/mutant_bench.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/relation.h"
#include "kvfuzz/trial.h"

static double kvf__now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Built-in kernels run in this process; a kernel that kvf_kernel_resolve allocated (a plugin
 * or a Python kernel, given as a control) runs in a worker process, so that a crash in it is
 * its finding, not the benchmark's end. */
typedef struct kvf__runner_or_state {
    kvf_runner *runner;
    void *state;
} kvf__runner_or_state;

static int kvf__start(const kvf_kernel *k, const kvf_limits *lim, kvf__runner_or_state *rs,
                      kvf_error *err) {
    memset(rs, 0, sizeof *rs);
    int rc;
    if (k->release) {
        kvf_runner_opts ro = {k, *lim, 60, 0, 0, 1};
        rc = kvf_runner_create(&rs->runner, &ro, err);
        if (!rc) rc = kvf_runner_start(rs->runner, err);
        if (rc) {
            kvf_runner_destroy(rs->runner);
            rs->runner = NULL;
        }
    } else {
        rc = kvf_kernel_create(k, &rs->state, err);
    }
    return rc == 0 ? 0 : rc < 0 ? rc : KVF_EKERNEL;
}

static void kvf__stop(const kvf_kernel *k, kvf__runner_or_state *rs) {
    if (rs->runner)
        kvf_runner_destroy(rs->runner);
    else
        kvf_kernel_destroy(k, rs->state);
    memset(rs, 0, sizeof *rs);
}

static int kvf__run(const kvf_kernel *k, kvf__runner_or_state *rs, const kvf_case *c,
                    kvf_trial_buffers *b, kvf_error *err) {
    int rc = kvf_trial_buffers_alloc(b, c, err);
    if (rc) return rc;
    if (!rs->runner) return kvf_kernel_run(k, rs->state, c, b->o, b->lse, err);
    kvf_run_result res;
    rc = kvf_runner_run(rs->runner, c, b->o, b->lse, &res, err);
    if (rc) return rc;
    if (res.status == KVF_RUN_OK) return 0;
    return kvf_error_set(err, res.status == KVF_RUN_UNSUPPORTED ? KVF_EUNSUPPORTED : KVF_EKERNEL,
                         "%s", res.message);
}

int kvf_mutant_can_start(const kvf_kernel *k, const kvf_limits *lim, kvf_error *err) {
    kvf__runner_or_state rs;
    int rc = kvf__start(k, lim, &rs, err);
    if (!rc) kvf__stop(k, &rs);
    return rc;
}

/* Every KVF__RELATION_EVERY-th case of a campaign also runs transformed by a relation, in turn,
 * as `kvfuzz fuzz` does by default (docs/invariance.md): 1 when a relation k promises broke. */
#define KVF__RELATION_EVERY 8
static int kvf__relation_breaks(const kvf_kernel *k, kvf__runner_or_state *rs,
                                const kvf_mutant_case *cc, size_t index, const kvf_bf16 *o,
                                const float *lse, const kvf_limits *lim) {
    if (index % KVF__RELATION_EVERY != KVF__RELATION_EVERY / 2) return 0;
    const size_t turn = index / KVF__RELATION_EVERY;
    const unsigned promised = kvf_kernel_promises(k);
    int broken = 0;
    for (int i = 0; i < KVF_RELATION_COUNT; i++) {
        const kvf_relation r = (kvf_relation)((turn + (size_t)i) % KVF_RELATION_COUNT);
        kvf_relation_pair p;
        if (kvf_relation_derive(&p, r, &cc->c, (uint64_t)index, lim, NULL)) continue;
        kvf_trial_buffers b2 = {0};
        kvf_error err = {0};
        if (kvf__run(k, rs, &p.derived, &b2, &err) == 0) {
            kvf_outcome out;
            kvf_outcome_from_run(&out, KVF_RUN_OK, NULL);
            const int is_promised = (promised & KVF_RELATION_BIT(r)) != 0;
            broken = kvf_outcome_relate(&out, &p, is_promised, &cc->c, o, lse, b2.o, b2.lse) > 0 &&
                     is_promised;
        }
        kvf_trial_buffers_free(&b2);
        kvf_relation_pair_free(&p);
        break;
    }
    return broken;
}

/* One case of a campaign: runs k and judges it, filling d on a finding. The attribution is
 * left out of *judge_seconds: a campaign attributes only what it saves, and the benchmark
 * times the finding, not its explanation. */
static void kvf__campaign_case(kvf_mutant_detection *d, const kvf_kernel *k,
                               kvf__runner_or_state *rs, const kvf_mutant_case *cc, size_t index,
                               const kvf_limits *lim, const kvf_rule *rules, int nrules,
                               double *judge_seconds) {
    double t0 = kvf__now_seconds(), explain = 0;
    kvf_error err = {0};
    kvf_trial_buffers b = {0};
    int rc = kvf__run(k, rs, &cc->c, &b, &err);
    if (rc && rc != KVF_EUNSUPPORTED) {
        d->caught = 1;
        snprintf(d->finding, sizeof d->finding, "kernel-error");
    } else if (rc == 0) {
        kvf_trial_rules tr = {rules, nrules, 0, 0, 0, KVF_FINDING_NONE};
        kvf_outcome out;
        if (kvf_trial_judge(&out, &tr, &cc->c, &cc->oracle, b.o, b.lse, NULL, NULL) == 0 &&
            out.finding != KVF_FINDING_NONE) {
            d->caught = 1;
            snprintf(d->finding, sizeof d->finding, "%s", kvf_finding_class_name(out.finding));
            double e0 = kvf__now_seconds();
            tr.with_attribution = 1;
            kvf_trial_explain(&out, &tr, &cc->c, &cc->oracle, b.o, b.lse);
            d->attribution = out.attribution;
            explain = kvf__now_seconds() - e0;
        } else if (kvf__relation_breaks(k, rs, cc, index, b.o, b.lse, lim)) {
            d->caught = 1;
            snprintf(d->finding, sizeof d->finding, "%s",
                     kvf_finding_class_name(KVF_FINDING_INVARIANCE));
        }
    }
    kvf_trial_buffers_free(&b);
    *judge_seconds += kvf__now_seconds() - t0 - explain;
}

int kvf_mutant_campaign(kvf_mutant_detection *d, const kvf_kernel *k, kvf_mutant_cases *cache,
                        const kvf_rule *rules, int nrules, double budget, kvf_error *err) {
    memset(d, 0, sizeof *d);
    kvf__runner_or_state rs;
    int rc = kvf__start(k, &cache->limits, &rs, err);
    if (rc) return rc; /* not a finding: the benchmark cannot run */
    double spent = 0;
    for (size_t i = 0; spent < budget && !d->caught; i++) {
        /* Out of memory for the cache ends the campaign as a spent budget would. */
        const kvf_mutant_case *cc = kvf_mutant_cases_get(cache, i);
        if (!cc) break;
        spent += cc->prepare_seconds;
        d->cases++;
        if (cc->ok) kvf__campaign_case(d, k, &rs, cc, i, &cache->limits, rules, nrules, &spent);
        kvf_mutant_cases_release(cache, i);
    }
    d->seconds = spent;
    kvf__stop(k, &rs);
    return 0;
}

int kvf_mutant_seeds_judge(const kvf_kernel *k, const kvf_mutant_seeds *s, const kvf_rule *rules,
                           int nrules, int *fails, kvf_error *err) {
    void *state = NULL;
    memset(fails, 0, (size_t)nrules * s->count * sizeof *fails);
    int rc = kvf_kernel_create(k, &state, err);
    if (rc) return rc < 0 ? rc : KVF_EKERNEL;
    for (size_t i = 0; i < s->count; i++) {
        if (!s->ok[i]) continue;
        kvf_error why = {0};
        kvf_trial_buffers b = {0};
        rc = kvf_trial_buffers_alloc(&b, &s->cases[i], &why);
        if (!rc) rc = kvf_kernel_run(k, state, &s->cases[i], b.o, b.lse, &why);
        for (int r = 0; r < nrules; r++) {
            int *f = &fails[(size_t)r * s->count + i];
            if (rc && rc != KVF_EUNSUPPORTED) {
                *f = 1;
            } else if (rc == 0) {
                const kvf_trial_rules tr = {&rules[r], 1, 0, 0, 0, KVF_FINDING_NONE};
                kvf_outcome out;
                *f = kvf_trial_judge(&out, &tr, &s->cases[i], &s->oracles[i], b.o, b.lse, NULL,
                                     NULL) == 0 &&
                     out.finding != KVF_FINDING_NONE;
            }
        }
        kvf_trial_buffers_free(&b);
    }
    kvf_kernel_destroy(k, state);
    return 0;
}

/* The run's shared state: the options, the cache of generated cases, the results. */
typedef struct kvf__bench_run {
    const kvf_mutant_opts *o;
    kvf_mutant_bench *b;
    kvf_mutant_cases cache;
} kvf__bench_run;

static void kvf__tell(const kvf__bench_run *run, kvf_mutant_event ev, const kvf_mutant_result *r) {
    if (run->o->progress) run->o->progress(run->o->ctx, ev, r);
}

/* A mutant: one campaign per rule of the default set over the same cases (the kvfuzz
 * detection is the earlier one: the first case either rule fails), the seed table, (b), (c). */
static int kvf__bench_mutant(kvf__bench_run *run, const kvf_mutant_entry *e, kvf_error *err) {
    kvf_mutant_bench *b = run->b;
    kvf_mutant_result *m = &b->mutants[b->nmutants];
    memset(m, 0, sizeof *m);
    m->index = b->nmutants;
    m->kernel = e->kernel;
    m->model = e->model;
    m->nrules = b->nrules;
    memcpy(m->rules, b->rules, sizeof m->rules);
    kvf_rules_apply_precision(m->rules, b->nrules, &e->model);
    int *fails = b->seed_fails + b->nmutants * (size_t)b->nrules * b->seeds.count;
    m->seed_fails = fails;
    int rc;
    for (int r = 0; r < b->ncampaign; r++) {
        kvf_mutant_detection *d = &m->per_rule[r];
        if ((rc = kvf_mutant_campaign(d, e->kernel, &run->cache, &m->rules[r], 1, run->o->budget,
                                      err)))
            return rc;
        if (d->caught && (!m->kvfuzz.caught || d->cases < m->kvfuzz.cases)) m->kvfuzz = *d;
    }
    if (b->seeds.count &&
        (rc = kvf_mutant_seeds_judge(e->kernel, &b->seeds, m->rules, m->nrules, fails, err)))
        return rc;
    m->fib_bench = kvf_mutant_fib_bench_style(e->kernel, &run->o->limits, err);
    if (m->fib_bench < 0) return m->fib_bench;
    m->fi_tests = kvf_mutant_fi_tests_style(e->kernel, &run->o->limits, err);
    if (m->fi_tests < 0) return m->fi_tests;
    if (!m->kvfuzz.caught) m->kvfuzz = m->per_rule[0];
    for (int r = 0; r < b->ncampaign; r++)
        b->rule_kills[r] += m->per_rule[r].caught;
    for (int r = 0; r < b->nrules; r++) {
        const int *f = fails + (size_t)r * b->seeds.count;
        int any = 0;
        for (size_t i = 0; i < b->seeds.count; i++)
            any |= f[i];
        b->seed_any[r] += any;
        b->seed_first[r] += b->seeds.count > 0 && f[0];
    }
    b->survivors += !m->kvfuzz.caught;
    b->missed_fib_bench += !m->fib_bench;
    b->missed_fi_tests += !m->fi_tests;
    b->nmutants++;
    kvf__tell(run, KVF_MUTANT_MUTANT_DONE, m);
    return 0;
}

/* A control: one campaign under the whole default set at once. */
static int kvf__bench_control(kvf__bench_run *run, const kvf_mutant_entry *e, kvf_error *err) {
    kvf_mutant_bench *b = run->b;
    kvf_mutant_result *c = &b->controls[b->ncontrols];
    memset(c, 0, sizeof *c);
    c->index = b->ncontrols;
    c->kernel = e->kernel;
    c->model = e->model;
    c->nrules = b->ncampaign;
    memcpy(c->rules, b->rules, (size_t)b->ncampaign * sizeof *c->rules);
    kvf_rules_apply_precision(c->rules, c->nrules, &e->model);
    int rc = kvf_mutant_campaign(&c->kvfuzz, e->kernel, &run->cache, c->rules, c->nrules,
                                 run->o->controls_budget, err);
    if (rc) return rc;
    b->noisy_controls += c->kvfuzz.caught;
    b->ncontrols++;
    kvf__tell(run, KVF_MUTANT_CONTROL_DONE, c);
    return 0;
}

static int kvf__bench_alloc(kvf_mutant_bench *b, const kvf_mutant_opts *o, kvf_error *err) {
    b->ncampaign = kvf_rule_default_set(b->rules, KVF_DEFAULT_RULES);
    kvf_rule_parse(&b->rules[b->ncampaign], "fib", NULL);
    b->nrules = b->ncampaign + 1;
    b->mutants = calloc(o->nmutants + 1, sizeof *b->mutants);
    b->controls = calloc(o->ncontrols + 1, sizeof *b->controls);
    if (!b->mutants || !b->controls)
        return kvf_error_set(err, KVF_ENOMEM, "out of memory for the results");
    return 0;
}

int kvf_mutant_bench_run(kvf_mutant_bench *b, const kvf_mutant_opts *o, kvf_error *err) {
    memset(b, 0, sizeof *b);
    kvf__bench_run run = {o, b, {0}};
    kvf_mutant_cases_init(&run.cache, o->seed, &o->limits, o->threads);
    /* One list of cases for every kernel: buffer layouts only when all of them take them. */
    for (size_t i = 0; i < o->nmutants + o->ncontrols; i++) {
        const kvf_kernel *k =
            i < o->nmutants ? o->mutants[i].kernel : o->controls[i - o->nmutants].kernel;
        if (!kvf_kernel_takes_layouts(k)) run.cache.ropts.layouts = 0;
    }
    run.cache.warn = o->warn;
    run.cache.warn_ctx = o->ctx;
    int rc = kvf__bench_alloc(b, o, err);
    if (!rc)
        rc = kvf_mutant_seeds_load(&b->seeds, o->seed_paths, o->nseed_paths, &o->limits,
                                   &run.cache.oopts, o->warn, o->ctx, err);
    if (!rc) {
        b->seed_fails =
            calloc((o->nmutants + 1) * (size_t)b->nrules * (b->seeds.count + 1), sizeof(int));
        if (!b->seed_fails) rc = kvf_error_set(err, KVF_ENOMEM, "out of memory");
    }
    const kvf_kernel *at = NULL;
    for (size_t i = 0; !rc && i < o->nmutants; i++)
        if ((rc = kvf__bench_mutant(&run, &o->mutants[i], err))) at = o->mutants[i].kernel;
    if (!rc) kvf__tell(&run, KVF_MUTANT_CONTROLS_BEGIN, NULL);
    for (size_t i = 0; !rc && i < o->ncontrols; i++)
        if ((rc = kvf__bench_control(&run, &o->controls[i], err))) at = o->controls[i].kernel;
    /* Within a kernel's turn only its start can fail: anything else is a detection. */
    if (at) b->start_kernel = at->name;
    kvf_mutant_cases_free(&run.cache);
    return rc;
}

void kvf_mutant_bench_free(kvf_mutant_bench *b) {
    kvf_mutant_seeds_free(&b->seeds);
    free(b->mutants);
    free(b->controls);
    free(b->seed_fails);
    memset(b, 0, sizeof *b);
}
