/* GPU tests, the oracle sweep: the `cuda` and `cuda-naive` kernels, run through the CUDA buffer
 * host as every kernel with a descriptor is (kvf_kernel_run), judged by the MPFR oracle under the
 * `strict` and `fib` rules on generated cases spanning every generator strategy and the shape
 * grid, then on a mix with quantized recipes (FP8 caches and their scales). Skips (exit 77) when
 * no usable CUDA device is present.
 *
 * Environment: KVF_GPU_CASES sets the random case count (default GPU_CASES_DEFAULT; a sanitizer
 * run uses a few dozen), KVF_GPU_THREADS the oracle worker threads (default: online CPUs). */
#include <pthread.h>
#include <stdatomic.h>

#include "gpu_fixtures.h"

#define MAX_REPORTS 12

static const int kPageSizes[] = {1, 2, 3, 7, 16, 32, 64, 128, 255, 256};
#define NUM_PAGE_SIZES ((int)(sizeof kPageSizes / sizeof kPageSizes[0]))

/* ---- the oracle sweep -------------------------------------------------------------------- */

typedef struct sweep {
    long cases;
    atomic_long next;
    pthread_mutex_t gpu; /* one pair of kernel states: device pools are cached per state */
    const kvf_kernel *kernels[2];
    void *states[2];
    kvf_rule rules[2];
    pthread_mutex_t stats;
    long runs, failures, unsupported, build_errors, oracle_errors, kernel_errors, overflow_rows;
    long rule_failures[2]; /* strict, fib */
    long fib_empty_lse;    /* fib verdicts failed (also) by the -inf lse of empty sequences */
    long fib_ill;          /* fib verdicts failed (also) on elements out of fp32's reach */
    long reports;
    /* coverage */
    long table[KVF_TABLE_COUNT], logits[KVF_LOGITS_COUNT], dist[3][KVF_DIST_COUNT];
    long poison[4], group[17], dim[3], page[NUM_PAGE_SIZES], triple[17][3][NUM_PAGE_SIZES];
    long empty_seqs, multi_seq;
    int quant;      /* draw quantized recipes too (kvf_random_opts.quant) */
    long fp8_cases; /* cases with FP8 caches */
} sweep;

static int dim_index(int d) {
    return d == 64 ? 0 : d == 128 ? 1 : d == 256 ? 2 : -1;
}
static int page_index(int s) {
    for (int i = 0; i < NUM_PAGE_SIZES; i++)
        if (kPageSizes[i] == s) return i;
    return -1;
}

/* Sorts one verdict's failing elements. Not failures of the kernel:
 *  - elements of rows the oracle flags as beyond f32: the overflow class, reported apart from
 *    accuracy (docs/design.md §4);
 *  - under fib, the -inf lse of an empty sequence: fib fails every non-finite kernel value and
 *    docs/design.md §1 makes that lse -inf (strict checks it exactly);
 *  - under fib, elements where fib's tolerance max(atol, rtol (|r| + 1e-8)) is out of reach of
 *    any correct fp32 kernel: the rows that need it (near-tie logits of large q.k, cancelling
 *    v) make the reference cpu-ref fail fib too. A fib failure counts as real only where the
 *    strict bound proves that a correct fp32 kernel meets fib: bound + |x - r| <= tolerance.
 * Everything else, and every strict failure on an ordinary row, is a real failure. */
typedef struct judge_tally {
    const kvf_case *c;
    const kvf_oracle_result *orc;
    const kvf_rule *rule;
    long unexpected, overflow, empty_lse, ill_conditioned;
    kvf_element_error first;
} judge_tally;

static int fib_reachable(const judge_tally *t, const kvf_element_error *e) {
    double x = e->exact_value, r = e->rounded_value;
    if (!isfinite(e->kernel_value) || !isfinite(x) || !isfinite(r)) return 1;
    double bound = e->output == KVF_OUTPUT_O ? kvf_strict_bound_o(t->c, t->orc, e->b, e->h, e->d)
                                             : kvf_strict_bound_lse(t->c, t->orc, e->b, e->h);
    double tol = fmax(t->rule->atol, t->rule->rtol * (fabs(r) + 1e-8));
    return isfinite(bound) && bound + fabs(x - r) <= tol;
}

static void tally_element(void *ctx, const kvf_element_error *e) {
    judge_tally *t = ctx;
    if (!e->fails) return;
    const kvf_oracle_row *row = &t->orc->rows[(int64_t)e->b * t->c->num_qo_heads + e->h];
    const int fib = t->rule->kind == KVF_RULE_FIB;
    if (row->overflow) {
        t->overflow++;
    } else if (fib && e->output == KVF_OUTPUT_LSE && row->length == 0) {
        t->empty_lse++;
    } else if (fib && !fib_reachable(t, e)) {
        t->ill_conditioned++;
    } else {
        if (t->unexpected++ == 0) t->first = *e;
    }
}

static void report_failure(sweep *sw, uint64_t seed, const kvf_kernel *k, int rule,
                           const kvf_verdict *v, const judge_tally *t) {
    pthread_mutex_lock(&sw->stats);
    sw->failures++;
    sw->rule_failures[rule]++;
    if (sw->reports++ < MAX_REPORTS) {
        const kvf_element_error *e = &t->first;
        fprintf(stderr,
                "  %s fails %s on random case seed 0x%llx: %s, %ld failing elements; first "
                "(b %d, h %d, d %d): kernel %.9g, rounded %.9g, exact %.9g, allowed %.3g\n",
                k->name, v->rule.name, (unsigned long long)seed, kvf_finding_class_name(v->finding),
                t->unexpected, e->b, e->h, e->d, e->kernel_value, e->rounded_value, e->exact_value,
                e->allowed);
    }
    pthread_mutex_unlock(&sw->stats);
}

static void count(sweep *sw, long *field, long n) {
    pthread_mutex_lock(&sw->stats);
    *field += n;
    pthread_mutex_unlock(&sw->stats);
}

static void record_coverage(sweep *sw, const kvf_spec *s, const kvf_case *c) {
    const kvf_recipe *r = &s->recipe;
    int g = c->num_qo_heads / c->num_kv_heads, di = dim_index(c->head_dim);
    int pi = page_index(c->page_size);
    pthread_mutex_lock(&sw->stats);
    if (r->table < KVF_TABLE_COUNT) sw->table[r->table]++;
    if (r->logits < KVF_LOGITS_COUNT) sw->logits[r->logits]++;
    const kvf_dist *d[3] = {&r->q, &r->k, &r->v};
    for (int i = 0; i < 3; i++)
        if (d[i]->kind < KVF_DIST_COUNT) sw->dist[i][d[i]->kind]++;
    for (int bit = 0; bit < 4; bit++)
        if (r->poison & (1u << bit)) sw->poison[bit]++;
    if (g >= 1 && g <= 16) sw->group[g]++;
    if (di >= 0) sw->dim[di]++;
    if (pi >= 0) sw->page[pi]++;
    if (g >= 1 && g <= 16 && di >= 0 && pi >= 0) sw->triple[g][di][pi]++;
    for (int32_t b = 0; b < c->batch_size; b++)
        if (kvf_case_seq_len(c, b) == 0) sw->empty_seqs++;
    if (c->batch_size > 1) sw->multi_seq++;
    pthread_mutex_unlock(&sw->stats);
}

static void *sweep_worker(void *arg) {
    sweep *sw = arg;
    kvf_random_opts ro;
    random_opts(&ro);
    ro.quant = sw->quant;
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    oo.threads = 1; /* parallel across cases instead */
    for (;;) {
        long i = atomic_fetch_add(&sw->next, 1);
        if (i >= sw->cases) break;
        uint64_t seed = GPU_SEED_BASE + (uint64_t)i;
        kvf_error err = {0};
        kvf_spec spec;
        kvf_case c;
        memset(&c, 0, sizeof c);
        if (kvf_spec_random(&spec, seed, &ro, &err) || kvf_case_build(&c, &spec, &lim, &err)) {
            pthread_mutex_lock(&sw->stats);
            if (sw->build_errors++ < 3)
                fprintf(stderr, "  case seed 0x%llx does not build: %s\n", (unsigned long long)seed,
                        err.msg);
            pthread_mutex_unlock(&sw->stats);
            kvf_spec_free(&spec);
            kvf_case_free(&c);
            continue;
        }
        record_coverage(sw, &spec, &c);
        if (kvf_kv_dtype_is_fp8(c.quant.k_dtype) || kvf_kv_dtype_is_fp8(c.quant.v_dtype))
            count(sw, &sw->fp8_cases, 1);
        kvf_oracle_result orc;
        memset(&orc, 0, sizeof orc);
        if (kvf_oracle_run(&orc, &c, &oo, &err)) {
            pthread_mutex_lock(&sw->stats);
            if (sw->oracle_errors++ < 3)
                fprintf(stderr, "  oracle fails on seed 0x%llx: %s\n", (unsigned long long)seed,
                        err.msg);
            pthread_mutex_unlock(&sw->stats);
        } else {
            size_t no = (size_t)kvf_case_o_elems(&c) + 1, nl = (size_t)kvf_case_lse_elems(&c) + 1;
            kvf_bf16 *o = malloc(no * sizeof *o);
            float *lse = malloc(nl * sizeof *lse);
            for (int k = 0; k < 2 && o && lse; k++) {
                pthread_mutex_lock(&sw->gpu);
                int rc = kvf_kernel_run(sw->kernels[k], sw->states[k], &c, o, lse, &err);
                pthread_mutex_unlock(&sw->gpu);
                if (rc == KVF_EUNSUPPORTED) {
                    count(sw, &sw->unsupported, 1);
                    pthread_mutex_lock(&sw->stats);
                    if (sw->unsupported <= 3)
                        fprintf(stderr, "  %s: unsupported on seed 0x%llx: %s\n",
                                sw->kernels[k]->name, (unsigned long long)seed, err.msg);
                    pthread_mutex_unlock(&sw->stats);
                    continue;
                }
                if (rc) {
                    pthread_mutex_lock(&sw->stats);
                    if (sw->kernel_errors++ < 3)
                        fprintf(stderr, "  %s fails to run seed 0x%llx: %s\n", sw->kernels[k]->name,
                                (unsigned long long)seed, err.msg);
                    pthread_mutex_unlock(&sw->stats);
                    continue;
                }
                count(sw, &sw->runs, 1);
                for (int r = 0; r < 2; r++) {
                    kvf_verdict v;
                    judge_tally t;
                    memset(&t, 0, sizeof t);
                    t.c = &c, t.orc = &orc, t.rule = &sw->rules[r];
                    if (kvf_judge_observe(&v, &sw->rules[r], &c, &orc, o, lse, tally_element, &t,
                                          &err)) {
                        count(sw, &sw->kernel_errors, 1);
                        fprintf(stderr, "  judge error on seed 0x%llx: %s\n",
                                (unsigned long long)seed, err.msg);
                        continue;
                    }
                    if (v.pass) continue;
                    if (t.unexpected == 0) {
                        if (t.overflow) count(sw, &sw->overflow_rows, 1);
                        if (t.empty_lse) count(sw, &sw->fib_empty_lse, 1);
                        if (t.ill_conditioned) count(sw, &sw->fib_ill, 1);
                        continue;
                    }
                    report_failure(sw, seed, sw->kernels[k], r, &v, &t);
                }
            }
            free(o);
            free(lse);
        }
        kvf_oracle_result_free(&orc);
        kvf_case_free(&c);
        kvf_spec_free(&spec);
    }
    kvf_oracle_thread_done();
    return NULL;
}

/* The sweep of bf16 cases (quant 0), or of the mix with quantized recipes (quant 1: one in
 * four has FP8 caches, with scales of every granularity and their edges). */
static void run_sweep(int quant) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    sweep *sw = calloc(1, sizeof *sw);
    CHECK(sw != NULL);
    if (!sw) return;
    sw->cases = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000);
    sw->quant = quant;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    long threads = env_long("KVF_GPU_THREADS", online > 0 ? online : 4, 1, 1024);
    atomic_init(&sw->next, 0);
    pthread_mutex_init(&sw->gpu, NULL);
    pthread_mutex_init(&sw->stats, NULL);
    kvf_error err = {0};
    CHECK_OK(kvf_rule_parse(&sw->rules[0], "strict", &err), &err);
    CHECK_OK(kvf_rule_parse(&sw->rules[1], "fib", &err), &err);
    sw->kernels[0] = kvf_kernel_find("cuda");
    sw->kernels[1] = kvf_kernel_find("cuda-naive");
    CHECK(sw->kernels[0] && sw->kernels[1]);
    if (!sw->kernels[0] || !sw->kernels[1]) return;
    for (int k = 0; k < 2; k++)
        CHECK_OK(kvf_kernel_create(sw->kernels[k], &sw->states[k], &err), &err);
    if (!sw->states[0] || !sw->states[1]) return;

    printf("  %ld random cases, %ld oracle threads\n", sw->cases, threads);
    fflush(stdout);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    for (long t = 0; t < threads; t++)
        pthread_create(&tid[t], NULL, sweep_worker, sw);
    for (long t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    free(tid);
    for (int k = 0; k < 2; k++)
        kvf_kernel_destroy(sw->kernels[k], sw->states[k]);

    printf("  %ld kernel runs judged by strict and fib: %ld strict failures, %ld fib failures, "
           "%ld unsupported, %ld kernel errors, %ld build errors, %ld oracle errors\n",
           sw->runs, sw->rule_failures[0], sw->rule_failures[1], sw->unsupported, sw->kernel_errors,
           sw->build_errors, sw->oracle_errors);
    printf("  not failures: %ld verdicts failing on overflow-class rows (past f32, docs/design.md "
           "§4), %ld fib verdicts failing on the -inf lse of empty sequences, %ld fib "
           "verdicts failing on elements no fp32 kernel can bring within fib's tolerance\n",
           sw->overflow_rows, sw->fib_empty_lse, sw->fib_ill);
    printf("  coverage: %ld empty sequences, %ld multi-sequence cases, %ld with FP8 caches\n",
           sw->empty_seqs, sw->multi_seq, sw->fp8_cases);
    if (quant) CHECK(sw->fp8_cases > 0);
    CHECK_INT_EQ(sw->failures, 0);
    CHECK_INT_EQ(sw->unsupported, 0);
    CHECK_INT_EQ(sw->kernel_errors, 0);
    CHECK_INT_EQ(sw->build_errors, 0);
    CHECK_INT_EQ(sw->oracle_errors, 0);
    CHECK_INT_EQ(sw->runs, 2 * sw->cases);
    if (!quant && sw->cases >= GPU_CASES_DEFAULT) {
        /* The strategy space and the shape grid, every value of every axis, every triple. */
        for (int i = 0; i < KVF_TABLE_COUNT; i++)
            if (!sw->table[i]) CHECK_FAIL_AT("table kind %s never drawn", kvf_table_name(i));
        for (int i = 0; i < KVF_LOGITS_BEYOND_F32; i++)
            if (!sw->logits[i]) CHECK_FAIL_AT("logit pattern %s never drawn", kvf_logits_name(i));
        for (int t = 0; t < 3; t++)
            for (int i = 0; i < KVF_DIST_COUNT; i++)
                if (!sw->dist[t][i] && !(t < 2 && i == KVF_DIST_SPECIAL))
                    CHECK_FAIL_AT("distribution %s never drawn for %c", kvf_dist_name(i), "qkv"[t]);
        for (int i = 0; i < 4; i++)
            if (!sw->poison[i]) CHECK_FAIL_AT("poison bit %d never drawn", i);
        long missing = 0;
        for (int g = 1; g <= 16; g++)
            for (int d = 0; d < 3; d++)
                for (int p = 0; p < NUM_PAGE_SIZES; p++)
                    if (!sw->triple[g][d][p]) missing++;
        printf("  shape grid: %ld of %d (group, head_dim, page_size) triples covered\n",
               16L * 3 * NUM_PAGE_SIZES - missing, 16 * 3 * NUM_PAGE_SIZES);
        CHECK_INT_EQ(missing, 0);
        CHECK(sw->empty_seqs > 0);
    }
    pthread_mutex_destroy(&sw->gpu);
    pthread_mutex_destroy(&sw->stats);
    free(sw);
}

static void test_oracle_sweep(void) {
    run_sweep(0);
}

static void test_oracle_sweep_fp8(void) {
    run_sweep(1);
}

static const check_test tests[] = {
    {"oracle_sweep", test_oracle_sweep},
    {"oracle_sweep_fp8", test_oracle_sweep_fp8},
    {NULL, NULL},
};

CHECK_MAIN(tests)
