/* kvfuzz mutants: the bug-finding benchmark. For every mutant (a deliberate bug modelled on a
 * real bug class) it runs (a) kvfuzz's generated cases judged by the default rule against the
 * oracle, (b) a FlashInfer-Bench-style check (captured-style workloads: contiguous page tables,
 * the seed shape, N(0,1) values, 3 trials, the fib rule against an fp32 reference) and (c) a
 * FlashInfer-test-style check (identity page table, equal lengths, allclose 1e-3/1e-3 against
 * cpu-ref), then prints which caught it. (a) runs once per rule of the default set (strict,
 * fa), so the table says which rule kills what; a second table lists, per rule, the seed cases
 * (corpus/seeds) on which each mutant fails. Production kernels run through (a) under the whole
 * default set as controls and must produce no finding.
 *
 * The generated cases of (a) are the same sequence for every kernel, so each case and its
 * oracle result are computed once and reused; the time reported for a detection counts the
 * generation and oracle time of every case consumed, as a standalone campaign would spend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/spec.h"
#include "kvfuzz/trial.h"

typedef struct cached_case {
    kvf_case c;
    kvf_oracle_result oracle;
    double prepare_seconds; /* generation + oracle */
    int ok;
    int present; /* built and held; cases past CACHE_KEEP are released after each use */
} cached_case;

/* Mutants are caught within a few dozen cases, so the first cases are kept for all of them;
 * the long control campaigns stream past this point without holding their cases. */
#define CACHE_KEEP 4096

typedef struct case_cache {
    cached_case *cases;
    size_t count, cap;
    uint64_t seed;
    kvf_limits limits;
    kvf_random_opts ropts;
    kvf_oracle_opts oopts;
} case_cache;

typedef struct detection {
    int caught;
    double seconds;
    long cases;
    char finding[32];
    kvf_attribution attribution; /* the catching verdict's, for a strict or fa tolerance one */
    int start_failed; /* the kernel could not start: why is in start_error, nothing ran */
    char start_error[KVF_ERROR_MSG_MAX];
} detection;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void cache_build(case_cache *cache, size_t i) {
    cached_case *cc = &cache->cases[i];
    double t0 = now_seconds();
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
    if (!cc->ok)
        fprintf(stderr, "kvfuzz mutants: case %llu skipped: %s\n", (unsigned long long)seed,
                err.msg);
    cc->prepare_seconds = now_seconds() - t0;
    cc->present = 1;
}

static const cached_case *cache_get(case_cache *cache, size_t i) {
    while (cache->count <= i) {
        if (cache->count == cache->cap) {
            size_t ncap = cache->cap ? cache->cap * 2 : 256;
            cached_case *n = realloc(cache->cases, ncap * sizeof *n);
            if (!n) return NULL;
            cache->cases = n;
            cache->cap = ncap;
        }
        memset(&cache->cases[cache->count++], 0, sizeof *cache->cases);
    }
    if (!cache->cases[i].present) cache_build(cache, i);
    return &cache->cases[i];
}

static void cache_release(case_cache *cache, size_t i) {
    cached_case *cc = &cache->cases[i];
    if (i < CACHE_KEEP || !cc->present) return;
    if (cc->ok) {
        kvf_oracle_result_free(&cc->oracle);
        kvf_case_free(&cc->c);
    }
    cc->present = 0;
}

static void cache_free(case_cache *cache) {
    for (size_t i = 0; i < cache->count; i++)
        if (cache->cases[i].present && cache->cases[i].ok) {
            kvf_oracle_result_free(&cache->cases[i].oracle);
            kvf_case_free(&cache->cases[i].c);
        }
    free(cache->cases);
}

/* Built-in kernels run in this process; a control given with --control (a plugin or a Python
 * kernel) runs in a worker process, so that a crash in it is its finding, not this run's end. */
typedef struct runner_or_state {
    kvf_runner *runner;
    void *state;
} runner_or_state;

static int run_kernel(const kvf_kernel *k, runner_or_state *rs, const kvf_case *c, kvf_bf16 **o,
                      float **lse, kvf_error *err) {
    *o = malloc((size_t)(kvf_case_o_elems(c) + 1) * sizeof **o);
    *lse = malloc((size_t)(kvf_case_lse_elems(c) + 1) * sizeof **lse);
    if (!*o || !*lse) return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    if (!rs->runner) return kvf_kernel_run(k, rs->state, c, *o, *lse, err);
    kvf_run_result res;
    int rc = kvf_runner_run(rs->runner, c, *o, *lse, &res, err);
    if (rc) return rc;
    if (res.status == KVF_RUN_OK) return 0;
    return kvf_error_set(err, res.status == KVF_RUN_UNSUPPORTED ? KVF_EUNSUPPORTED : KVF_EKERNEL,
                         "%s", res.message);
}

/* Starts and stops k the way campaign() runs it: 0, or the reason in err. */
static int can_start(const kvf_kernel *k, const kvf_limits *lim, kvf_error *err) {
    if (k->release) {
        kvf_runner *r = NULL;
        kvf_runner_opts ro = {k, *lim, 60, 0, 0, 1};
        int rc = kvf_runner_create(&r, &ro, err);
        if (!rc) rc = kvf_runner_start(r, err);
        kvf_runner_destroy(r);
        return rc;
    }
    void *state = NULL;
    int rc = kvf_kernel_create(k, &state, err);
    if (!rc) kvf_kernel_destroy(k, state);
    return rc;
}

/* (a): generated cases until the first finding under any of the rules (a verdict that is no
 * kernel failure does not count, as in replay without --require-overflow:
 * kvf_verdict_status_of) or until the budget is spent. */
static detection campaign(const kvf_kernel *k, case_cache *cache, const kvf_rule *rules, int nrules,
                          double budget) {
    detection d = {0};
    runner_or_state rs = {0};
    kvf_error err = {0};
    int start_rc;
    if (k->release) { /* resolved from --control: not one of the built-in kernels */
        kvf_runner_opts ro = {k, cache->limits, 60, 0, 0, 1};
        start_rc = kvf_runner_create(&rs.runner, &ro, &err);
        if (!start_rc) start_rc = kvf_runner_start(rs.runner, &err);
    } else {
        start_rc = kvf_kernel_create(k, &rs.state, &err);
    }
    if (start_rc) { /* not a finding: the benchmark cannot run (exit 2) */
        kvf_runner_destroy(rs.runner);
        d.start_failed = 1;
        snprintf(d.start_error, sizeof d.start_error, "%s", err.msg);
        return d;
    }
    double spent = 0;
    for (size_t i = 0; spent < budget; i++) {
        const cached_case *cc = cache_get(cache, i);
        if (!cc) break;
        spent += cc->prepare_seconds;
        d.cases++;
        if (!cc->ok) {
            cache_release(cache, i);
            continue;
        }
        double t0 = now_seconds();
        kvf_bf16 *o = NULL;
        float *lse = NULL;
        int rc = run_kernel(k, &rs, &cc->c, &o, &lse, &err);
        if (rc && rc != KVF_EUNSUPPORTED) {
            d.caught = 1;
            snprintf(d.finding, sizeof d.finding, "kernel-error");
        } else if (rc == 0) {
            kvf_trial_rules tr = {rules, nrules, 0, 0, 0, KVF_FINDING_NONE};
            kvf_outcome out;
            if (kvf_trial_judge(&out, &tr, &cc->c, &cc->oracle, o, lse, NULL, NULL) == 0 &&
                out.finding != KVF_FINDING_NONE) {
                d.caught = 1;
                snprintf(d.finding, sizeof d.finding, "%s", kvf_finding_class_name(out.finding));
                /* Outside the time to detection: a campaign attributes only what it saves, and
                 * the benchmark times the finding, not its explanation. */
                spent += now_seconds() - t0;
                tr.with_attribution = 1;
                kvf_trial_explain(&out, &tr, &cc->c, &cc->oracle, o, lse);
                d.attribution = out.attribution;
                t0 = now_seconds();
            }
        }
        free(o);
        free(lse);
        spent += now_seconds() - t0;
        cache_release(cache, i);
        if (d.caught) break;
    }
    d.seconds = spent;
    if (rs.runner)
        kvf_runner_destroy(rs.runner);
    else
        kvf_kernel_destroy(k, rs.state);
    return d;
}

/* An fp32 reference's output dressed as an oracle result, for the benchmark-style checks that
 * compare against a reference implementation rather than the exact answer. */
static int reference_result(kvf_oracle_result *r, const kvf_case *c, kvf_error *err) {
    memset(r, 0, sizeof *r);
    int64_t no = kvf_case_o_elems(c), nl = kvf_case_lse_elems(c);
    r->batch_size = c->batch_size;
    r->num_qo_heads = c->num_qo_heads;
    r->head_dim = c->head_dim;
    r->o_rounded = malloc((size_t)(no + 1) * sizeof *r->o_rounded);
    r->o_exact = malloc((size_t)(no + 1) * sizeof *r->o_exact);
    r->o_cond = malloc((size_t)(no + 1) * sizeof *r->o_cond);
    r->lse_rounded = malloc((size_t)(nl + 1) * sizeof *r->lse_rounded);
    r->lse_exact = malloc((size_t)(nl + 1) * sizeof *r->lse_exact);
    r->rows = calloc((size_t)(nl + 1), sizeof *r->rows);
    if (!r->o_rounded || !r->o_exact || !r->o_cond || !r->lse_rounded || !r->lse_exact || !r->rows)
        return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    int rc = kvf_kernel_run_once(kvf_kernel_find("cpu-ref"), c, r->o_rounded, r->lse_rounded, err);
    if (rc) return rc;
    for (int64_t i = 0; i < no; i++) {
        r->o_exact[i] = kvf_bf16_to_f32(r->o_rounded[i]);
        r->o_cond[i] = fabs(r->o_exact[i]);
    }
    for (int64_t i = 0; i < nl; i++) {
        r->lse_exact[i] = r->lse_rounded[i];
        r->rows[i].length = kvf_case_seq_len(c, (int32_t)(i / c->num_qo_heads));
    }
    return 0;
}

/* The seed cases, each with its oracle result, for the per-rule seed table. */
typedef struct seed_set {
    size_t count;
    char **names; /* file names without the folder */
    kvf_case *cases;
    kvf_oracle_result *oracles;
    int *ok;
} seed_set;

static void seeds_load(seed_set *s, const char *dir, const kvf_limits *lim,
                       const kvf_oracle_opts *oo) {
    memset(s, 0, sizeof *s);
    char *args[1] = {(char *)dir};
    char **paths = NULL;
    size_t n = 0;
    if (cli_collect_cases("mutants", args, 1, &paths, &n) || n == 0) return;
    s->names = calloc(n, sizeof *s->names);
    s->cases = calloc(n, sizeof *s->cases);
    s->oracles = calloc(n, sizeof *s->oracles);
    s->ok = calloc(n, sizeof *s->ok);
    if (!s->names || !s->cases || !s->oracles || !s->ok) n = 0;
    for (size_t i = 0; i < n; i++) {
        kvf_error err = {0};
        const char *base = strrchr(paths[i], '/');
        s->names[i] = strdup(base ? base + 1 : paths[i]);
        if (kvf_case_load(paths[i], NULL, &s->cases[i], lim, &err) == 0) {
            if (kvf_oracle_run(&s->oracles[i], &s->cases[i], oo, &err) == 0)
                s->ok[i] = 1;
            else
                kvf_case_free(&s->cases[i]);
        }
        if (!s->ok[i])
            fprintf(stderr, "kvfuzz mutants: seed case %s skipped: %s\n", paths[i], err.msg);
    }
    cli_free_paths(paths, n);
    s->count = n;
}

static void seeds_free(seed_set *s) {
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
}

/* Which seed cases kernel k fails under each rule: fails[r * count + i]. Only kernel failures
 * count (kvf_verdict_status_of, overflow not required); a kernel error counts for every rule. */
static int seeds_judge(const kvf_kernel *k, const seed_set *s, const kvf_rule *rules, int nrules,
                       int *fails, kvf_error *start_err) {
    runner_or_state rs = {0};
    kvf_error err = {0};
    memset(fails, 0, (size_t)nrules * s->count * sizeof *fails);
    if (kvf_kernel_create(k, &rs.state, start_err)) return -1;
    for (size_t i = 0; i < s->count; i++) {
        if (!s->ok[i]) continue;
        kvf_bf16 *o = NULL;
        float *lse = NULL;
        int rc = run_kernel(k, &rs, &s->cases[i], &o, &lse, &err);
        for (int r = 0; r < nrules; r++) {
            if (rc && rc != KVF_EUNSUPPORTED) {
                fails[(size_t)r * s->count + i] = 1;
            } else if (rc == 0) {
                const kvf_trial_rules tr = {&rules[r], 1, 0, 0, 0, KVF_FINDING_NONE};
                kvf_outcome out;
                fails[(size_t)r * s->count + i] =
                    kvf_trial_judge(&out, &tr, &s->cases[i], &s->oracles[i], o, lse, NULL, NULL) ==
                        0 &&
                    out.finding != KVF_FINDING_NONE;
            }
        }
        free(o);
        free(lse);
    }
    kvf_kernel_destroy(k, rs.state);
    return 0;
}

/* "00,03,15": the two-character prefixes of the failing seed files, or "-". */
static void seeds_list(const seed_set *s, const int *fails, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < s->count && used + 4 < size; i++)
        if (fails[i])
            used +=
                (size_t)snprintf(buf + used, size - used, "%s%.2s", used ? "," : "", s->names[i]);
    if (!used) snprintf(buf, size, "-");
}

typedef struct workload {
    int hq, hk, d, page, batch;
    int lens[8];
} workload;

/* Builds a benchmark-style case: contiguous page table, N(0,1) values, given lengths. */
static int style_case(kvf_case *c, const workload *w, uint64_t seed, const kvf_limits *lim,
                      kvf_error *err) {
    kvf_spec s;
    int rc = kvf_spec_preset(&s, "seed-h20kv4", seed, err);
    if (rc) return rc;
    /* The benchmark-style cases keep the values they had before expansion 2 (docs/mutants.md):
     * the (b) and (c) columns stay comparable with earlier runs. */
    s.recipe.expansion = KVF_EXPANSION_1;
    s.recipe.num_qo_heads = (uint8_t)w->hq;
    s.recipe.num_kv_heads = (uint8_t)w->hk;
    s.recipe.head_dim = (uint16_t)w->d;
    s.recipe.page_size = (uint16_t)w->page;
    s.recipe.sm_scale = (float)(1.0 / sqrt((double)w->d));
    s.recipe.table = KVF_TABLE_CONTIGUOUS;
    s.recipe.spare_pages = 0;
    if ((rc = kvf_spec_set_batch(&s, (uint16_t)w->batch, err))) goto done;
    for (int b = 0; b < w->batch; b++) {
        int len = w->lens[b % 8];
        s.recipe.num_pages[b] = (uint16_t)((len + w->page - 1) / w->page);
        s.recipe.last_page_len[b] = (uint16_t)(len - (s.recipe.num_pages[b] - 1) * w->page);
    }
    rc = kvf_case_build(c, &s, lim, err);
done:
    kvf_spec_free(&s);
    return rc;
}

/* FlashInfer-Bench's captured workloads for gqa_paged_decode_h20_kv4_d128_ps64: the seed shape,
 * contiguous tables, no empty requests. */
static const workload fib_workloads[] = {
    {20, 4, 128, 64, 1, {3202}},
    {20, 4, 128, 64, 4, {512, 1024, 2048, 4000}},
    {20, 4, 128, 64, 8, {100, 900, 1700, 2500, 3300, 4100, 300, 64}},
    {20, 4, 128, 64, 16, {1000, 200, 1500, 700, 64, 128, 1999, 333}},
};

/* FlashInfer's unit tests: identity page table, every request the same length, power-of-two
 * groups, N(0,1). */
static const workload test_workloads[] = {
    {32, 4, 128, 16, 4, {54, 54, 54, 54, 54, 54, 54, 54}},
    {32, 32, 128, 16, 4, {512, 512, 512, 512, 512, 512, 512, 512}},
    {32, 8, 128, 1, 4, {97, 97, 97, 97, 97, 97, 97, 97}},
    {32, 4, 128, 8, 4, {2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048}},
};

/* 1 caught, 0 missed, -1 the kernel could not start (start_err says why). */
static int style_check(const kvf_kernel *k, const workload *ws, size_t nw, int trials,
                       const kvf_rule *rule, const kvf_limits *lim, kvf_error *start_err) {
    runner_or_state rs = {0};
    kvf_error err = {0};
    if (kvf_kernel_create(k, &rs.state, start_err)) return -1;
    int caught = 0;
    for (size_t w = 0; w < nw && !caught; w++)
        for (int t = 0; t < trials && !caught; t++) {
            kvf_case c;
            kvf_oracle_result ref;
            if (style_case(&c, &ws[w], (uint64_t)(1000 + t), lim, &err)) continue;
            if (reference_result(&ref, &c, &err) == 0) {
                kvf_bf16 *o = NULL;
                float *lse = NULL;
                int rc = run_kernel(k, &rs, &c, &o, &lse, &err);
                if (rc && rc != KVF_EUNSUPPORTED) {
                    caught = 1;
                } else if (rc == 0) {
                    const kvf_trial_rules tr = {rule, 1, 0, 0, 0, KVF_FINDING_NONE};
                    kvf_outcome out;
                    caught = kvf_trial_judge(&out, &tr, &c, &ref, o, lse, NULL, NULL) == 0 &&
                             out.finding != KVF_FINDING_NONE;
                }
                free(o);
                free(lse);
            }
            kvf_oracle_result_free(&ref);
            kvf_case_free(&c);
        }
    kvf_kernel_destroy(k, rs.state);
    return caught;
}

enum {
    MUT_CONTROL = 256,
    MUT_DEVICE,
    MUT_BUDGET,
    MUT_CONTROLS_BUDGET,
    MUT_SEED,
    MUT_JOBS,
    MUT_SEEDS,
    MUT_JSON,
    MUT_PRECISION
};

/* --help names the plugin kernel limit in words. */
_Static_assert(KVF_PLUGIN_MAX_KERNELS == 4096u, "--help states the plugin kernel limit");

static const cli_option mutants_options[] = {
    {"control", MUT_CONTROL, "K",
     "also run kernel K through (a) as a control (repeatable): a\n"
     "plugin's kernels of role reference for PATH.so (all of them;\n"
     "a plugin lists at most 4096 kernels), or the one named by\n"
     "PATH.so:NAME, python:MODULE:FUNCTION, a built-in"},
    {"device", MUT_DEVICE, "D", "cpu (default) or cuda"},
    {"budget", MUT_BUDGET, "S", "seconds of (a) per mutant (default 60)"},
    {"controls-budget", MUT_CONTROLS_BUDGET, "S",
     "seconds of (a) per control kernel (default: --budget)"},
    {"seed", MUT_SEED, "N", "first generated case (default 1)"},
    {"jobs", MUT_JOBS, "N", "oracle threads (default: all cores)"},
    {"seeds", MUT_SEEDS, "DIR",
     "seed cases for the per-rule table (default corpus/seeds when\n"
     "that folder exists; none otherwise)"},
    {"json", MUT_JSON, NULL, "one JSON object instead of the table (progress on stderr)"},
    {"precision", MUT_PRECISION, "MODEL",
     CLI_PRECISION_HELP "\nHere it applies to every mutant and control; (b) and (c) are\n"
                        "unaffected."},
    {0},
};

static void mutants_help(void) {
    printf("usage: kvfuzz mutants [--device cpu|cuda] [--budget S] [--controls-budget S]\n"
           "                      [--control K]... [--seed N] [--jobs N] [--seeds DIR]\n"
           "                      [--precision MODEL] [--json]\n\n"
           "The bug-finding benchmark. For every mutant kernel (a deliberate bug modelled on a\n"
           "real bug class; `kvfuzz kernels` lists them with the class) it reports whether it\n"
           "is caught by\n"
           "  (a) kvfuzz: generated cases (every strategy) judged by the default rules (strict,\n"
           "      fa) against the oracle, with the time and cases to the first finding, once\n"
           "      per rule (the kvfuzz column is the earlier of the two);\n"
           "  (b) FlashInfer-Bench-style testing: contiguous page tables, the seed shape,\n"
           "      N(0,1) values, 3 trials of 4 captured-style workloads, the fib rule against\n"
           "      an fp32 reference;\n"
           "  (c) FlashInfer-test-style testing: identity page table, equal lengths,\n"
           "      allclose(1e-3, 1e-3) against cpu-ref.\n"
           "The production kernels of the device run through (a) under both rules at once as\n"
           "controls. A second table lists, per rule (strict, fa, fib), the seed cases on which\n"
           "each mutant fails.\n"
           "strict and fa judge each mutant and control within the precision model it declares\n"
           "(f32 when none; `kvfuzz kernels` shows them), or --precision; a mutant that declares\n"
           "one gets a line naming it and the attribution of its finding (docs/precision.md).\n\n");
    cli_print_options(stdout, mutants_options);
    printf("\nExit status: 0 when kvfuzz catches every mutant and no control reports a finding,\n"
           "1 otherwise, 2 on usage errors or a kernel that cannot start.\n");
}

/* Building the JSON answer: any failure (out of memory) sets *bad and the value is dropped. */
static json_t *jset(json_t *obj, const char *key, json_t *value, int *bad) {
    if (!*bad && obj && kvf_json_set(obj, key, value) == 0) return value;
    if (*bad || !obj) json_decref(value);
    *bad = 1;
    return NULL;
}

static json_t *jpush(json_t *arr, json_t *value, int *bad) {
    if (!*bad && arr && kvf_json_push(arr, value) == 0) return value;
    if (*bad || !arr) json_decref(value);
    *bad = 1;
    return NULL;
}

/* The finding's class, or null when nothing was caught (never an empty string). */
static json_t *finding_json(const detection *d) {
    return d->caught ? json_string(d->finding) : json_null();
}

int kvf_cmd_mutants(int argc, char **argv) {
    const char *cmd = "mutants", *device = "cpu", *precision = NULL;
    double budget = 60, controls_budget = -1;
    uint64_t seed = 1;
    int64_t jobs = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    int json = 0;
    /* The controls --control adds: grows, as a plugin may list any number of references. */
    kvf_kernel_list extras = {0};
    const char *seeds_dir = access("corpus/seeds", R_OK) == 0 ? "corpus/seeds" : NULL;
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, mutants_options);
    const char *v;
    int bad = 0;
    for (int key; !bad && (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            mutants_help();
            kvf_kernel_list_free(&extras);
            return KVF_EXIT_OK;
        case CLI_ERROR:
            bad = 1;
            break;
        case MUT_JSON:
            json = 1;
            break;
        case MUT_PRECISION:
            bad = cli_precision_check(cmd, v);
            precision = v;
            break;
        case MUT_CONTROL: {
            const size_t before = extras.count;
            if (cli_add_kernel(cmd, v, &extras)) {
                bad = 1;
                break;
            }
            /* A whole plugin contributes its reference kernels; a named kernel is taken as is. */
            const size_t n = extras.count - before;
            size_t kept = before;
            for (size_t j = before; j < extras.count; j++) {
                if (n > 1 && extras.items[j]->role != KVF_PLUGIN_ROLE_REFERENCE)
                    kvf_kernel_free(extras.items[j]);
                else
                    extras.items[kept++] = extras.items[j];
            }
            extras.count = kept;
            if (kept == before)
                bad = cli_usage_error(cmd,
                                      "%s lists no kernel of role reference; name one with "
                                      "PATH.so:NAME",
                                      v);
            break;
        }
        case MUT_SEEDS: {
            /* Named, it must hold cases: a mistyped folder dropped the seed table from a run of
             * minutes with a line on stderr. */
            char *dir = (char *)v, **found = NULL;
            size_t nfound = 0;
            if (cli_collect_cases(cmd, &dir, 1, &found, &nfound))
                bad = KVF_EXIT_USAGE;
            else if (nfound == 0)
                bad = cli_usage_error(cmd, "--seeds %s holds no .kvfz case", v);
            cli_free_paths(found, nfound);
            seeds_dir = v;
            break;
        }
        case MUT_DEVICE:
            if (strcmp(v, "cpu") && strcmp(v, "cuda"))
                bad = cli_usage_error(cmd, "--device must be cpu or cuda, got \"%s\"", v);
            else
                device = v;
            break;
        case MUT_SEED:
            bad = cli_opt_u64(cmd, "--seed", v, &seed);
            break;
        case MUT_JOBS:
            bad = cli_opt_i64(cmd, "--jobs", v, 1, 1024, &jobs);
            break;
        case MUT_BUDGET:
            bad = cli_opt_seconds(cmd, "--budget", v, 1e9, &budget);
            break;
        case MUT_CONTROLS_BUDGET:
            bad = cli_opt_seconds(cmd, "--controls-budget", v, 1e9, &controls_budget);
            break;
        }
    }
    char **rest;
    if (!bad && cli_operands(&p, &rest))
        bad =
            cli_usage_error(cmd, "unexpected argument \"%s\" (see kvfuzz mutants --help)", rest[0]);
    if (bad) {
        kvf_kernel_list_free(&extras);
        return KVF_EXIT_USAGE;
    }
    if (controls_budget < 0) controls_budget = budget;
    /* A control that cannot start fails the run before any case runs, as replay does. */
    for (size_t i = 0; i < extras.count; i++) {
        kvf_limits lim;
        cli_limits(&lim);
        kvf_error err = {0};
        if (can_start(extras.items[i], &lim, &err)) {
            int urc = cli_kernel_cannot_start(cmd, extras.items[i]->name, err.msg);
            kvf_kernel_list_free(&extras);
            return urc;
        }
    }
    kvf_device dev = strcmp(device, "cuda") == 0 ? KVF_DEVICE_CUDA : KVF_DEVICE_CPU;
    /* A declared model kvfuzz cannot read is the kernel's error, found before minutes of work
     * rather than at its turn. */
    for (size_t i = 0; i < kvf_kernel_count() + extras.count; i++) {
        const kvf_kernel *k =
            i < kvf_kernel_count() ? kvf_kernel_at(i) : extras.items[i - kvf_kernel_count()];
        kvf_precision m;
        cli_precision_source src;
        if ((i >= kvf_kernel_count() || k->device == dev) &&
            cli_kernel_precision(cmd, k, precision, &m, &src)) {
            kvf_kernel_list_free(&extras);
            return KVF_EXIT_USAGE;
        }
    }
    if (dev == KVF_DEVICE_CUDA) {
        char why[256];
        if (!kvf_cuda_available(why, sizeof why))
            return cli_usage_error(cmd, "--device cuda needs a usable GPU: %s", why);
    }
    case_cache cache = {0};
    cache.seed = seed;
    cli_limits(&cache.limits);
    kvf_random_opts_default(&cache.ropts);
    cache.ropts.max_work = 1 << 19; /* small cases: many per second, bugs show at short lengths */
    kvf_oracle_opts_default(&cache.oopts);
    cache.oopts.threads = (int)jobs;
    kvf_rule fib, allclose;
    kvf_rule_parse(&fib, "fib", NULL);
    kvf_rule_parse(&allclose, "allclose:1e-3:1e-3", NULL);
    kvf_rule set[KVF_DEFAULT_RULES];
    int nset = kvf_rule_default_set(set, KVF_DEFAULT_RULES);
    /* The seed table's rules: the default set, then FlashInfer-Bench's. */
    kvf_rule seed_rules[KVF_DEFAULT_RULES + 1];
    memcpy(seed_rules, set, (size_t)nset * sizeof *set);
    seed_rules[nset] = fib;
    int nseed_rules = nset + 1;
    seed_set seeds = {0};
    if (seeds_dir) seeds_load(&seeds, seeds_dir, &cache.limits, &cache.oopts);
    size_t nmut = 0;
    for (size_t i = 0; i < kvf_kernel_count(); i++)
        nmut += kvf_kernel_at(i)->device == dev && kvf_kernel_at(i)->models;
    int *seed_fails = calloc((nmut + 1) * (size_t)nseed_rules * (seeds.count + 1), sizeof(int));
    const char **mut_names = calloc(nmut + 1, sizeof *mut_names);
    int rule_kills[KVF_DEFAULT_RULES] = {0};
    if (!seed_fails || !mut_names) {
        free(seed_fails);
        free(mut_names);
        seeds_free(&seeds);
        cache_free(&cache);
        fprintf(stderr, "kvfuzz mutants: out of memory\n");
        return KVF_EXIT_USAGE;
    }

    int survivors = 0, noisy_controls = 0, mutants = 0, missed_b = 0, missed_c = 0;
    int rc = KVF_EXIT_OK;
    kvf_error start_err = {0};
    const char *start_kernel = NULL; /* the kernel that could not start, which ends the run */
    /* The JSON answer is built as the run goes and written once at the end (jansson,
     * kvfuzz/json_io.h); progress then goes to stderr. */
    int jbad = 0;
    json_t *root = json ? json_object() : NULL, *jmutants = NULL, *jcontrols = NULL;
    if (json) {
        jbad = !root;
        jset(root, "device", json_string(device), &jbad);
        jset(root, "budget_seconds", kvf_json_number(budget), &jbad);
        jmutants = jset(root, "mutants", json_array(), &jbad);
    } else {
        printf("%-44s %-9s %-8s %9s %7s %-12s %-9s %-9s %-9s %-9s\n", "mutant", "class", "kvfuzz",
               "seconds", "cases", "finding", "strict", "fa", "fib-bench", "fi-tests");
    }
    for (size_t i = 0; i < kvf_kernel_count() && !start_kernel; i++) {
        const kvf_kernel *k = kvf_kernel_at(i);
        if (k->device != dev || !k->models) continue;
        /* strict and fa within the mutant's own model (checked above: cannot fail here); fib
         * keeps its place in the seed table. */
        kvf_rule kset[KVF_DEFAULT_RULES + 1];
        kvf_precision kmodel;
        cli_precision_source ksource;
        cli_rules_for_kernel(cmd, k, precision, seed_rules, nseed_rules, kset, &kmodel, &ksource);
        /* One campaign per rule over the same cases; the default set's detection is the
         * earlier one (the first case either rule fails). */
        detection per[KVF_DEFAULT_RULES];
        detection a = {0};
        for (int r = 0; r < nset && !start_kernel; r++) {
            per[r] = campaign(k, &cache, &kset[r], 1, budget);
            if (per[r].start_failed) {
                start_kernel = k->name;
                kvf_error_set(&start_err, KVF_EKERNEL, "%s", per[r].start_error);
                break;
            }
            rule_kills[r] += per[r].caught;
            if (per[r].caught && (!a.caught || per[r].cases < a.cases)) a = per[r];
        }
        if (!start_kernel && seeds.count &&
            seeds_judge(k, &seeds, kset, nseed_rules,
                        seed_fails + (size_t)mutants * nseed_rules * seeds.count, &start_err))
            start_kernel = k->name;
        int b = start_kernel
                    ? 0
                    : style_check(k, fib_workloads, sizeof fib_workloads / sizeof fib_workloads[0],
                                  3, &fib, &cache.limits, &start_err);
        int c =
            start_kernel || b < 0
                ? 0
                : style_check(k, test_workloads, sizeof test_workloads / sizeof test_workloads[0],
                              1, &allclose, &cache.limits, &start_err);
        if (b < 0 || c < 0) start_kernel = k->name;
        if (start_kernel) break;
        if (!a.caught) a = per[0];
        mut_names[mutants] = k->name;
        survivors += !a.caught;
        missed_b += !b;
        missed_c += !c;
        char kmodel_name[KVF_PRECISION_NAME_MAX], kmodel_text[96];
        kvf_precision_name(&kmodel, kmodel_name, sizeof kmodel_name);
        cli_precision_text(&kmodel, ksource, kmodel_text, sizeof kmodel_text);
        if (json) {
            json_t *m = jpush(jmutants, json_object(), &jbad);
            jset(m, "kernel", json_string(k->name), &jbad);
            jset(m, "class", json_string(k->models), &jbad);
            /* The model strict and fa judged it under; per_rule keeps the rules' plain names
             * ("strict", "fa") so that readers find them whatever the model. */
            jset(m, "precision", json_string(kmodel_name), &jbad);
            json_t *kv = jset(m, "kvfuzz", json_object(), &jbad);
            jset(kv, "caught", json_boolean(a.caught), &jbad);
            jset(kv, "seconds", kvf_json_number(a.seconds), &jbad);
            jset(kv, "cases", json_integer(a.cases), &jbad);
            jset(kv, "finding", finding_json(&a), &jbad);
            jset(kv, "attribution", kvf_attribution_json(&a.attribution), &jbad);
            json_t *pr = jset(m, "per_rule", json_object(), &jbad);
            for (int r = 0; r < nseed_rules; r++) {
                json_t *ro = jset(pr, seed_rules[r].name, json_object(), &jbad);
                jset(ro, "rule", json_string(kset[r].name), &jbad);
                if (r < nset) {
                    jset(ro, "caught", json_boolean(per[r].caught), &jbad);
                    jset(ro, "seconds", kvf_json_number(per[r].seconds), &jbad);
                    jset(ro, "cases", json_integer(per[r].cases), &jbad);
                    jset(ro, "attribution", kvf_attribution_json(&per[r].attribution), &jbad);
                }
                json_t *failed = jset(ro, "seed_cases_failed", json_array(), &jbad);
                const int *f = seed_fails + ((size_t)mutants * nseed_rules + r) * seeds.count;
                for (size_t sc = 0; sc < seeds.count; sc++)
                    if (f[sc]) jpush(failed, json_string(seeds.names[sc]), &jbad);
            }
            jset(m, "fib_bench", json_boolean(b), &jbad);
            jset(m, "fi_tests", json_boolean(c), &jbad);
            fprintf(stderr, "kvfuzz mutants: %s %s\n", k->name, a.caught ? "caught" : "SURVIVED");
        } else {
            char sr[2][16];
            for (int r = 0; r < 2; r++) {
                if (r < nset && per[r].caught)
                    snprintf(sr[r], sizeof sr[r], "%.2fs", per[r].seconds);
                else
                    snprintf(sr[r], sizeof sr[r], "missed");
            }
            printf("%-44s %-9s %-8s %9.2f %7ld %-12s %-9s %-9s %-9s %-9s\n", k->name, k->models,
                   a.caught ? "caught" : "SURVIVED", a.seconds, a.cases, a.caught ? a.finding : "-",
                   sr[0], sr[1], b ? "caught" : "missed", c ? "caught" : "missed");
            /* A mutant judged under a model of its own says so, and what its finding is: a
             * defect, or precision below the model it declares. */
            if (!kvf_precision_is_f32(&kmodel)) {
                printf("    precision model %s", kmodel_text);
                if (a.attribution.kind != KVF_ATTRIB_NONE)
                    printf("; its finding %s", a.attribution.text);
                printf("\n");
            }
        }
        fflush(stdout);
        mutants++;
    }
    if (json)
        jcontrols = jset(root, "controls", json_array(), &jbad);
    else if (!start_kernel)
        printf("\ncontrols (production kernels, %g s of generated cases each):\n", controls_budget);
    for (size_t i = 0; i < kvf_kernel_count() + extras.count && !start_kernel; i++) {
        const kvf_kernel *k =
            i < kvf_kernel_count() ? kvf_kernel_at(i) : extras.items[i - kvf_kernel_count()];
        if (i < kvf_kernel_count() &&
            (k->device != dev || k->models || strcmp(k->name, "cuda-naive") == 0))
            continue;
        kvf_rule kset[KVF_DEFAULT_RULES];
        kvf_precision kmodel;
        cli_rules_for_kernel(cmd, k, precision, set, nset, kset, &kmodel, NULL);
        char kmodel_name[KVF_PRECISION_NAME_MAX];
        kvf_precision_name(&kmodel, kmodel_name, sizeof kmodel_name);
        detection a = campaign(k, &cache, kset, nset, controls_budget);
        if (a.start_failed) {
            start_kernel = k->name;
            kvf_error_set(&start_err, KVF_EKERNEL, "%s", a.start_error);
            break;
        }
        noisy_controls += a.caught;
        if (json) {
            json_t *ct = jpush(jcontrols, json_object(), &jbad);
            jset(ct, "kernel", json_string(k->name), &jbad);
            jset(ct, "precision", json_string(kmodel_name), &jbad);
            jset(ct, "findings", json_integer(a.caught), &jbad);
            jset(ct, "finding", finding_json(&a), &jbad);
            jset(ct, "attribution", kvf_attribution_json(&a.attribution), &jbad);
            jset(ct, "seconds", kvf_json_number(a.seconds), &jbad);
            jset(ct, "cases", json_integer(a.cases), &jbad);
            fprintf(stderr, "kvfuzz mutants: control %s: %s\n", k->name,
                    a.caught ? a.finding : "no finding");
        } else {
            printf("  %-20s %s after %ld cases (%.1f s)", k->name,
                   a.caught ? a.finding : "no finding", a.cases, a.seconds);
            if (!kvf_precision_is_f32(&kmodel)) printf(", precision model %s", kmodel_name);
            if (a.attribution.kind != KVF_ATTRIB_NONE) printf("; %s", a.attribution.text);
            printf("\n");
        }
        fflush(stdout);
    }
    if (start_kernel) {
        rc = cli_kernel_cannot_start(cmd, start_kernel, start_err.msg);
        goto out;
    }
    /* Per rule: mutants killed by the campaign, and on the seed cases (any, and the seed
     * workload itself, the first seed file). */
    int seed_any[KVF_DEFAULT_RULES + 1] = {0}, seed_first[KVF_DEFAULT_RULES + 1] = {0};
    for (int m = 0; m < mutants; m++)
        for (int r = 0; r < nseed_rules; r++) {
            const int *f = seed_fails + ((size_t)m * nseed_rules + r) * seeds.count;
            int any = 0;
            for (size_t sc = 0; sc < seeds.count; sc++)
                any |= f[sc];
            seed_any[r] += any;
            seed_first[r] += seeds.count > 0 && f[0];
        }
    if (json) {
        jset(root, "killed", json_integer(mutants - survivors), &jbad);
        jset(root, "total", json_integer(mutants), &jbad);
        jset(root, "missed_by_fib_bench", json_integer(missed_b), &jbad);
        jset(root, "missed_by_fi_tests", json_integer(missed_c), &jbad);
        json_t *rules = jset(root, "rules", json_object(), &jbad);
        for (int r = 0; r < nseed_rules; r++) {
            json_t *ro = jset(rules, seed_rules[r].name, json_object(), &jbad);
            if (r < nset) jset(ro, "killed_by_campaign", json_integer(rule_kills[r]), &jbad);
            jset(ro, "killed_on_seed_cases", json_integer(seed_any[r]), &jbad);
            jset(ro, "killed_on_first_seed", json_integer(seed_first[r]), &jbad);
        }
        if (jbad || kvf_json_dump(root, stdout, 1)) {
            fprintf(stderr, "kvfuzz mutants: %s\n",
                    jbad ? "out of memory building the JSON" : "cannot write the JSON");
            rc = KVF_EXIT_USAGE;
            goto out;
        }
    } else {
        if (seeds.count) {
            printf("\nseed cases failed, per rule (%s; file-name prefixes; - none):\n", seeds_dir);
            printf("%-44s", "mutant");
            for (int r = 0; r < nseed_rules; r++)
                printf(" %-28s", seed_rules[r].name);
            printf("\n");
            for (int m = 0; m < mutants; m++) {
                printf("%-44s", mut_names[m]);
                for (int r = 0; r < nseed_rules; r++) {
                    char buf[160];
                    seeds_list(&seeds, seed_fails + ((size_t)m * nseed_rules + r) * seeds.count,
                               buf, sizeof buf);
                    printf(" %-28s", buf);
                }
                printf("\n");
            }
        }
        printf("\nper rule, of %d mutants:", mutants);
        for (int r = 0; r < nseed_rules; r++) {
            printf(" %s", seed_rules[r].name);
            if (r < nset) printf(" killed by the campaign %d,", rule_kills[r]);
            if (seeds.count)
                printf(" on some seed case %d, on %s %d;", seed_any[r], seeds.names[0],
                       seed_first[r]);
        }
        printf("\nkvfuzz killed %d of %d mutants; FlashInfer-Bench-style testing missed %d, "
               "FlashInfer-test-style testing missed %d; controls with findings: %d\n",
               mutants - survivors, mutants, missed_b, missed_c, noisy_controls);
    }
    rc = (survivors || noisy_controls) ? KVF_EXIT_FINDINGS : KVF_EXIT_OK;
out:
    json_decref(root);
    free(seed_fails);
    free(mut_names);
    seeds_free(&seeds);
    cache_free(&cache);
    kvf_kernel_list_free(&extras);
    return rc;
}
