/* GPU tests: the `cuda` and `cuda-naive` kernels, run through the CUDA buffer host as every
 * kernel with a descriptor is (kvf_kernel_run), judged by the MPFR oracle under the `strict`
 * and `fib` rules on generated cases spanning every generator strategy and the shape grid, plus
 * determinism, merges of many splits, 64-bit page offsets, the host's pool poison and staging,
 * and input validation.
 * Every test skips (exit 77) when no usable CUDA device is present.
 *
 * Environment: KVF_GPU_CASES sets the random case count (default GPU_CASES_DEFAULT; a sanitizer
 * run uses a few dozen), KVF_GPU_THREADS the oracle worker threads (default: online CPUs). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"

/* Why 10,000: the generator draws the group (18 slots, 1..16 with 5 and 7 twice), the head
 * dim (3) and the page size (11 slots) independently, so the rarest (group, D, S) triple has
 * probability 1/594 per case; 10,000 cases miss a given triple with probability
 * (1 - 1/594)^10000 < 5e-8, so every triple of the grid is covered (asserted below), and every
 * table kind, logit pattern, distribution and poison bit hundreds of times. The cases are small
 * (at most 4 sequences, 384 tokens) so the MPFR oracle, not the GPU, sets the pace. */
#define GPU_CASES_DEFAULT 10000
#define GPU_SEED_BASE 0x6b7666757a7a0000ull
#define MAX_REPORTS 12

static const int kPageSizes[] = {1, 2, 3, 7, 16, 32, 64, 128, 255, 256};
#define NUM_PAGE_SIZES ((int)(sizeof kPageSizes / sizeof kPageSizes[0]))

static int gpu_skip_reason(char *why, size_t n) {
    return !kvf_cuda_available(why, n);
}

static long env_long(const char *name, long dflt, long lo, long hi) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "%s=\"%s\" is not an integer in [%ld, %ld]; using %ld\n", name, s, lo, hi,
                dflt);
        return dflt;
    }
    return v;
}

static void random_opts(kvf_random_opts *o) {
    kvf_random_opts_default(o);
    o->max_batch = 4;
    o->max_pages = 6;
    o->max_tokens = 384;   /* > 4 tiles of 64: several splits and merges per sequence */
    o->allow_overflow = 0; /* logits past f32 are their own finding class, not accuracy */
    o->allow_high_ids = 1;
}

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

static void test_oracle_sweep(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    sweep *sw = calloc(1, sizeof *sw);
    CHECK(sw != NULL);
    if (!sw) return;
    sw->cases = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000);
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
    printf("  coverage: %ld empty sequences, %ld multi-sequence cases\n", sw->empty_seqs,
           sw->multi_seq);
    CHECK_INT_EQ(sw->failures, 0);
    CHECK_INT_EQ(sw->unsupported, 0);
    CHECK_INT_EQ(sw->kernel_errors, 0);
    CHECK_INT_EQ(sw->build_errors, 0);
    CHECK_INT_EQ(sw->oracle_errors, 0);
    CHECK_INT_EQ(sw->runs, 2 * sw->cases);
    if (sw->cases >= GPU_CASES_DEFAULT) {
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

/* ---- determinism ------------------------------------------------------------------------- */

/* One run's outputs (one spare element each, as everywhere in the tests). */
typedef struct run_outputs {
    kvf_bf16 *o;
    float *lse;
    size_t n_o, n_lse;
} run_outputs;

static run_outputs outputs_for(const kvf_case *c) {
    run_outputs r;
    r.n_o = (size_t)kvf_case_o_elems(c);
    r.n_lse = (size_t)kvf_case_lse_elems(c);
    r.o = malloc((r.n_o + 1) * sizeof *r.o);
    r.lse = malloc((r.n_lse + 1) * sizeof *r.lse);
    return r;
}

static int outputs_same_bits(const run_outputs *a, const run_outputs *b) {
    return memcmp(a->o, b->o, a->n_o * sizeof *a->o) == 0 &&
           memcmp(a->lse, b->lse, a->n_lse * sizeof *a->lse) == 0;
}

static void outputs_free(run_outputs *r) {
    free(r->o);
    free(r->lse);
}

static void test_same_bits_twice(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    const char *names[2] = {"cuda", "cuda-naive"};
    kvf_random_opts ro;
    random_opts(&ro);
    ro.max_tokens = 2048; /* longer: more splits, more chances for a race to show */
    kvf_limits lim;
    kvf_limits_default(&lim);
    long n = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000) / 50;
    if (n < 4) n = 4;
    for (int k = 0; k < 2; k++) {
        const kvf_kernel *kern = kvf_kernel_find(names[k]);
        CHECK(kern != NULL);
        if (!kern) return;
        kvf_error err = {0};
        void *st1 = NULL, *st2 = NULL;
        CHECK_OK(kvf_kernel_create(kern, &st1, &err), &err);
        CHECK_OK(kvf_kernel_create(kern, &st2, &err), &err);
        if (!st1 || !st2) return;
        for (long i = 0; i < n; i++) {
            kvf_spec spec;
            kvf_case c;
            memset(&c, 0, sizeof c);
            uint64_t seed = GPU_SEED_BASE + 0x100000 + (uint64_t)i;
            if (kvf_spec_random(&spec, seed, &ro, &err) || kvf_case_build(&c, &spec, &lim, &err)) {
                CHECK_FAIL_AT("seed 0x%llx does not build: %s", (unsigned long long)seed, err.msg);
                kvf_spec_free(&spec);
                continue;
            }
            run_outputs out[3];
            for (int r = 0; r < 3; r++)
                out[r] = outputs_for(&c);
            /* Twice on one state (cached pool and plan), once on a fresh one. */
            CHECK_OK(kvf_kernel_run(kern, st1, &c, out[0].o, out[0].lse, &err), &err);
            CHECK_OK(kvf_kernel_run(kern, st1, &c, out[1].o, out[1].lse, &err), &err);
            CHECK_OK(kvf_kernel_run(kern, st2, &c, out[2].o, out[2].lse, &err), &err);
            for (int r = 1; r < 3; r++) {
                if (!outputs_same_bits(&out[0], &out[r]))
                    CHECK_FAIL_AT("%s: seed 0x%llx gives different bits on run %d", names[k],
                                  (unsigned long long)seed, r + 1);
            }
            for (int r = 0; r < 3; r++)
                outputs_free(&out[r]);
            kvf_case_free(&c);
            kvf_spec_free(&spec);
        }
        kvf_kernel_destroy(kern, st1);
        kvf_kernel_destroy(kern, st2);
    }
    printf("  %ld cases x 2 kernels, 3 runs each\n", n);
}

/* The oracle's default options with a thread per online core. */
static kvf_oracle_opts oracle_on_every_core(void) {
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    oo.threads = (int)(online > 0 ? online : 4);
    return oo;
}

/* ---- merges of many splits --------------------------------------------------------------- */

/* One tile per split (KVF_CUDA_CHUNK_TILES=1) gives a long sequence more splits than the merge
 * kernel weighs in one round (8 warps x 8 splits, merge.cuh), next to a single-split and an
 * empty sequence, for groups 1, 8 and 16 and every head dim. One state runs every shape twice
 * in turn, so each plan and workspace is reused after a different shape: each run is judged by
 * the oracle under strict, and the two runs of a shape must agree bit for bit (a merge that read
 * partial states left by the previous shape would not). */
typedef struct merge_shape {
    uint8_t hq, hk;
    uint16_t d, s;
    uint16_t pages[3]; /* per sequence; 0 is an empty sequence */
} merge_shape;

/* A case of the seed preset's values with the given shape and pages per sequence (0: empty),
 * last pages filled to 1 + (seed + b) % s slots. */
static int batch_case(kvf_case *c, kvf_spec *spec, int hq, int hk, int d, int s, int batch,
                      const uint16_t *pages, uint64_t seed, kvf_error *err) {
    memset(c, 0, sizeof *c);
    if (kvf_spec_preset(spec, "seed-h20kv4", seed, err)) return -1;
    kvf_recipe *r = &spec->recipe;
    r->num_qo_heads = hq, r->num_kv_heads = hk, r->head_dim = d, r->page_size = s;
    r->sm_scale = 1.0f / sqrtf((float)d);
    free(r->num_pages);
    free(r->last_page_len);
    r->batch_size = batch;
    r->num_pages = calloc((size_t)batch, sizeof *r->num_pages);
    r->last_page_len = calloc((size_t)batch, sizeof *r->last_page_len);
    if (!r->num_pages || !r->last_page_len) return -1;
    for (int b = 0; b < batch; b++) {
        r->num_pages[b] = pages[b];
        r->last_page_len[b] = pages[b] ? (uint16_t)(1 + (seed + (uint64_t)b) % s) : 0;
    }
    kvf_limits lim;
    kvf_limits_default(&lim);
    return kvf_case_build(c, spec, &lim, err);
}

static int merge_case(kvf_case *c, kvf_spec *spec, const merge_shape *m, uint64_t seed,
                      kvf_error *err) {
    return batch_case(c, spec, m->hq, m->hk, m->d, m->s, 3, m->pages, seed, err);
}

static void test_merge_many_splits(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    static const merge_shape shapes[] = {
        {20, 4, 128, 64, {150, 1, 0}}, /* the seed shape: 150 splits, three merge rounds */
        {16, 1, 64, 16, {0, 40, 2}},   /* group 16, D 64: 10 tiles of 4 pages */
        {2, 2, 256, 32, {70, 0, 1}},   /* group 1, D 256: tiles of 32 tokens */
        {32, 2, 256, 64, {1, 66, 3}},  /* group 16, D 256 */
        {8, 1, 128, 128, {3, 33, 0}},  /* pages of two tiles */
    };
    const int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    setenv("KVF_CUDA_CHUNK_TILES", "1", 1);
    const kvf_kernel *kern = kvf_kernel_find("cuda");
    CHECK(kern != NULL);
    kvf_error err = {0};
    void *st = NULL;
    if (kern) CHECK_OK(kvf_kernel_create(kern, &st, &err), &err);
    kvf_rule strict;
    CHECK_OK(kvf_rule_parse(&strict, "strict", &err), &err);
    const kvf_oracle_opts oo = oracle_on_every_core();
    kvf_case cs[sizeof shapes / sizeof shapes[0]];
    kvf_spec specs[sizeof shapes / sizeof shapes[0]];
    kvf_oracle_result orcs[sizeof shapes / sizeof shapes[0]];
    run_outputs first[sizeof shapes / sizeof shapes[0]];
    memset(orcs, 0, sizeof orcs);
    /* Every case and its oracle result first, so that the runs follow each other on one plan. */
    int built = 0;
    const int failures_before = check_failures;
    for (; st && built < n_shapes && check_failures == failures_before; built++) {
        CHECK_OK(merge_case(&cs[built], &specs[built], &shapes[built], 40 + (uint64_t)built, &err),
                 &err);
        if (check_failures == failures_before)
            CHECK_OK(kvf_oracle_run(&orcs[built], &cs[built], &oo, &err), &err);
        first[built] = outputs_for(&cs[built]);
    }
    for (int round = 0; round < 2 && built == n_shapes && check_failures == failures_before;
         round++) {
        for (int i = 0; i < n_shapes; i++) {
            run_outputs out = round == 0 ? first[i] : outputs_for(&cs[i]);
            CHECK_OK(kvf_kernel_run(kern, st, &cs[i], out.o, out.lse, &err), &err);
            kvf_verdict v;
            CHECK_OK(kvf_judge(&v, &strict, &cs[i], &orcs[i], out.o, out.lse, &err), &err);
            if (!v.pass)
                CHECK_FAIL_AT("shape %d (Hq %d, Hk %d, D %d, S %d), run %d fails strict: %s, %lld "
                              "o and %lld lse violations",
                              i, shapes[i].hq, shapes[i].hk, shapes[i].d, shapes[i].s, round + 1,
                              kvf_finding_class_name(v.finding), (long long)v.o.violations,
                              (long long)v.lse.violations);
            if (round == 1) {
                if (!outputs_same_bits(&first[i], &out))
                    CHECK_FAIL_AT("shape %d gives different bits on its second run", i);
                outputs_free(&out);
            }
        }
    }
    printf("  %d shapes, up to 150 splits of one sequence, each run twice on one state\n",
           n_shapes);
    for (int i = 0; i < built; i++) {
        outputs_free(&first[i]);
        kvf_oracle_result_free(&orcs[i]);
        kvf_case_free(&cs[i]);
        kvf_spec_free(&specs[i]);
    }
    if (st) kvf_kernel_destroy(kern, st);
    unsetenv("KVF_CUDA_CHUNK_TILES");
}

/* ---- CTAs beyond one wave ---------------------------------------------------------------- */

/* Sequences of different lengths whose split CTAs overflow one wave, at the plan's own chunk:
 * the plan orders their items longest first and each CTA writes its partial state to its
 * sequence's merge row (kernels/cuda/split_plan.h). 48 sequences of the seed shape, shortest
 * first, 1 to 142 pages, two of them empty; judged by the oracle under strict, and a second run
 * on the same state must give the same bits. Its 960 rows of at most 3 splits go through the
 * merge that gives each row a warp (merge.cuh); merge_many_splits's through the other. */
static void test_longest_first_batch(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    uint16_t pages[48];
    for (int b = 0; b < 48; b++)
        pages[b] = (uint16_t)(b == 7 || b == 30 ? 0 : 3 * b + 1);
    const kvf_kernel *kern = kvf_kernel_find("cuda");
    CHECK(kern != NULL);
    if (!kern) return;
    kvf_error err = {0};
    void *st = NULL;
    CHECK_OK(kvf_kernel_create(kern, &st, &err), &err);
    kvf_spec spec;
    kvf_case c;
    kvf_oracle_result orc;
    memset(&orc, 0, sizeof orc);
    kvf_rule strict;
    CHECK_OK(kvf_rule_parse(&strict, "strict", &err), &err);
    const kvf_oracle_opts oo = oracle_on_every_core();
    CHECK_OK(batch_case(&c, &spec, 20, 4, 128, 64, 48, pages, 77, &err), &err);
    CHECK_OK(kvf_oracle_run(&orc, &c, &oo, &err), &err);
    run_outputs out[2] = {outputs_for(&c), outputs_for(&c)};
    for (int r = 0; st && r < 2; r++) {
        CHECK_OK(kvf_kernel_run(kern, st, &c, out[r].o, out[r].lse, &err), &err);
        kvf_verdict v;
        CHECK_OK(kvf_judge(&v, &strict, &c, &orc, out[r].o, out[r].lse, &err), &err);
        if (!v.pass)
            CHECK_FAIL_AT("run %d fails strict: %s, %lld o and %lld lse violations", r + 1,
                          kvf_finding_class_name(v.finding), (long long)v.o.violations,
                          (long long)v.lse.violations);
    }
    if (!outputs_same_bits(&out[0], &out[1])) CHECK_FAIL_AT("the second run gives other bits");
    char facts[256] = "";
    if (st) kvf_kernel_describe(kern, st, facts, sizeof facts);
    printf("  48 sequences of 0 to 142 pages: %s\n", facts);
    outputs_free(&out[0]);
    outputs_free(&out[1]);
    kvf_oracle_result_free(&orc);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
    if (st) kvf_kernel_destroy(kern, st);
}

/* ---- 64-bit offsets ---------------------------------------------------------------------- */

/* The seed shape with page ids past 65536: page * page_elems (32768 elements) passes 2^31, so
 * a kernel with 32-bit element offsets reads the wrong page (bug class B10). The pool is over
 * 4 GiB per cache on the device. Judged by the oracle under strict. */
static void test_high_page_ids(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    kvf_error err = {0};
    kvf_spec spec;
    kvf_case c;
    memset(&c, 0, sizeof c);
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_spec_preset(&spec, "seed-h20kv4", 7, &err), &err);
    spec.recipe.table = KVF_TABLE_HIGH_IDS;
    spec.recipe.page_id_base = 65540;
    spec.recipe.poison = KVF_POISON_ALL;
    const int failures_before = check_failures;
    CHECK_OK(kvf_case_build(&c, &spec, &lim, &err), &err);
    if (check_failures != failures_before) return;
    int32_t min_id = INT32_MAX;
    for (int32_t i = 0; i < c.kv_indptr[c.batch_size]; i++)
        if (c.kv_indices[i] < min_id) min_id = c.kv_indices[i];
    CHECK(min_id > 65536);
    CHECK((int64_t)min_id * kvf_case_page_elems(&c) > INT32_MAX);
    const kvf_oracle_opts oo = oracle_on_every_core();
    kvf_oracle_result orc;
    memset(&orc, 0, sizeof orc);
    CHECK_OK(kvf_oracle_run(&orc, &c, &oo, &err), &err);
    kvf_rule strict;
    CHECK_OK(kvf_rule_parse(&strict, "strict", &err), &err);
    kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c) * sizeof *o);
    float *lse = malloc((size_t)kvf_case_lse_elems(&c) * sizeof *lse);
    const char *names[2] = {"cuda", "cuda-naive"};
    for (int k = 0; k < 2 && check_failures == failures_before; k++) {
        CHECK_OK(kvf_kernel_run_once(kvf_kernel_find(names[k]), &c, o, lse, &err), &err);
        kvf_verdict v;
        CHECK_OK(kvf_judge(&v, &strict, &c, &orc, o, lse, &err), &err);
        if (!v.pass)
            CHECK_FAIL_AT("%s fails strict with page ids from %d: %s, %lld o violations", names[k],
                          min_id, kvf_finding_class_name(v.finding), (long long)v.o.violations);
    }
    printf("  page ids from %d, pool %.2f GiB per cache\n", min_id,
           (double)c.pool_bytes / (1 << 30));
    free(o);
    free(lse);
    kvf_oracle_result_free(&orc);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

/* ---- the poisoned pool across runs ------------------------------------------------------- */

/* The CUDA buffer host keeps its device pools between runs and re-poisons only what the previous
 * run wrote. With KVF_CUDA_VERIFY_POOL the host checks after every upload that no byte outside
 * the pages the current case reads is anything but KVF_HOST_POISON_INPUT, so a stale page of an
 * earlier case (which a kernel reading the wrong page would see as plausible data instead of
 * NaN) fails the run.
 * The sequence mixes a 4 GiB high-id pool, generated cases of every shape and page size, and a
 * case rejected before its upload (which leaves the pools as they were, so the next run must
 * find them clean without refilling them). */
static void test_pool_poison_between_runs(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    setenv("KVF_CUDA_VERIFY_POOL", "1", 1);
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_random_opts ro;
    random_opts(&ro);
    const long n = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000) / 50 + 4;
    const char *names[2] = {"cuda", "cuda-naive"};
    long runs = 0;
    for (int k = 0; k < 2; k++) {
        const kvf_kernel *kern = kvf_kernel_find(names[k]);
        kvf_error err = {0};
        void *st = NULL;
        CHECK_OK(kvf_kernel_create(kern, &st, &err), &err);
        if (!st) break;
        for (long i = -1; i < n; i++) {
            kvf_spec spec;
            kvf_case c;
            memset(&c, 0, sizeof c);
            const uint64_t seed = GPU_SEED_BASE + 0x200000 + (uint64_t)i;
            int rc;
            if (i < 0) { /* first the largest pool, so later cases run inside a larger allocation */
                rc = kvf_spec_preset(&spec, "seed-h20kv4", 7, &err);
                spec.recipe.table = KVF_TABLE_HIGH_IDS;
                spec.recipe.page_id_base = 65540;
            } else {
                rc = kvf_spec_random(&spec, seed, &ro, &err);
            }
            if (rc || kvf_case_build(&c, &spec, &lim, &err)) {
                CHECK_FAIL_AT("case %ld does not build: %s", i, err.msg);
                kvf_spec_free(&spec);
                continue;
            }
            kvf_bf16 *o = malloc(((size_t)kvf_case_o_elems(&c) + 1) * sizeof *o);
            float *lse = malloc(((size_t)kvf_case_lse_elems(&c) + 1) * sizeof *lse);
            if (i == n / 2 && c.batch_size > 0 && c.kv_indptr[c.batch_size] > 0) {
                /* A rejected case between two good ones. */
                int32_t saved = c.kv_indices[0];
                c.kv_indices[0] = -1;
                CHECK(kvf_kernel_run(kern, st, &c, o, lse, &err) == KVF_EINVAL);
                c.kv_indices[0] = saved;
            }
            rc = kvf_kernel_run(kern, st, &c, o, lse, &err);
            if (rc)
                CHECK_FAIL_AT("%s: case %ld (seed 0x%llx, %lld resident pages of %lld): %s",
                              names[k], i, (unsigned long long)seed,
                              (long long)c.num_resident_pages, (long long)c.num_pages, err.msg);
            runs++;
            free(o);
            free(lse);
            kvf_case_free(&c);
            kvf_spec_free(&spec);
        }
        kvf_kernel_destroy(kern, st);
    }
    unsetenv("KVF_CUDA_VERIFY_POOL");
    printf("  %ld runs checked for stale pages\n", runs);
}

/* Resident pages reach the device through a pinned staging buffer, K and V together, in as many
 * batches as the buffer needs. With the buffer shrunk to one or two page pairs
 * (KVF_CUDA_STAGE_BYTES) every case with several resident pages goes up in several batches; its
 * output must equal, bit for bit, the one-batch upload of a default state, and the pools must
 * stay poisoned outside the resident pages (KVF_CUDA_VERIFY_POOL). */
static void test_staging_in_batches(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    const char *names[2] = {"cuda", "cuda-naive"};
    kvf_random_opts ro;
    random_opts(&ro);
    ro.max_tokens = 2048;
    kvf_limits lim;
    kvf_limits_default(&lim);
    const long n = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000) / 100 + 8;
    long batched = 0, most_batches = 0;
    for (int k = 0; k < 2; k++) {
        const kvf_kernel *kern = kvf_kernel_find(names[k]);
        kvf_error err = {0};
        setenv("KVF_CUDA_STAGE_BYTES", "12x", 1);
        void *bad = NULL;
        CHECK_INT_EQ(kvf_kernel_create(kern, &bad, &err), KVF_EINVAL);
        CHECK(strstr(err.msg, "KVF_CUDA_STAGE_BYTES") != NULL);
        unsetenv("KVF_CUDA_STAGE_BYTES");
        void *whole = NULL;
        CHECK_OK(kvf_kernel_create(kern, &whole, &err), &err);
        if (!whole) return;
        for (long i = 0; i < n; i++) {
            kvf_spec spec;
            kvf_case c;
            memset(&c, 0, sizeof c);
            const uint64_t seed = GPU_SEED_BASE + 0x300000 + (uint64_t)i;
            if (kvf_spec_random(&spec, seed, &ro, &err) || kvf_case_build(&c, &spec, &lim, &err)) {
                CHECK_FAIL_AT("seed 0x%llx does not build: %s", (unsigned long long)seed, err.msg);
                kvf_spec_free(&spec);
                continue;
            }
            const long pairs = 1 + i % 2;
            const size_t page_bytes = (size_t)kvf_case_page_elems(&c) * sizeof(kvf_bf16);
            char bytes[32];
            snprintf(bytes, sizeof bytes, "%zu", 2 * page_bytes * (size_t)pairs);
            setenv("KVF_CUDA_STAGE_BYTES", bytes, 1);
            setenv("KVF_CUDA_VERIFY_POOL", "1", 1);
            void *small = NULL;
            CHECK_OK(kvf_kernel_create(kern, &small, &err), &err);
            unsetenv("KVF_CUDA_STAGE_BYTES");
            unsetenv("KVF_CUDA_VERIFY_POOL");
            run_outputs one_batch = outputs_for(&c), batched_out = outputs_for(&c);
            CHECK_OK(kvf_kernel_run(kern, whole, &c, one_batch.o, one_batch.lse, &err), &err);
            if (small)
                CHECK_OK(kvf_kernel_run(kern, small, &c, batched_out.o, batched_out.lse, &err),
                         &err);
            if (small && !outputs_same_bits(&one_batch, &batched_out))
                CHECK_FAIL_AT("%s: seed 0x%llx (%lld resident pages, %ld per batch) differs from "
                              "its one-batch upload",
                              names[k], (unsigned long long)seed, (long long)c.num_resident_pages,
                              pairs);
            const long batches = (long)((c.num_resident_pages + pairs - 1) / pairs);
            if (batches > 1) batched++;
            if (batches > most_batches) most_batches = batches;
            if (small) kvf_kernel_destroy(kern, small);
            outputs_free(&one_batch);
            outputs_free(&batched_out);
            kvf_case_free(&c);
            kvf_spec_free(&spec);
        }
        kvf_kernel_destroy(kern, whole);
    }
    CHECK(batched > 0);
    printf("  %ld cases uploaded in several batches (up to %ld)\n", batched, most_batches);
}

/* ---- validation -------------------------------------------------------------------------- */

static void expect_error(void *st, const kvf_kernel *k, const kvf_case *c, int code,
                         const char *needle) {
    kvf_error err = {0};
    size_t no = (size_t)kvf_case_o_elems(c) + 1, nl = (size_t)kvf_case_lse_elems(c) + 1;
    kvf_bf16 *o = malloc(no * sizeof *o);
    float *lse = malloc(nl * sizeof *lse);
    int rc = kvf_kernel_run(k, st, c, o, lse, &err);
    if (rc != code)
        CHECK_FAIL_AT("%s: expected %s, got %d (%s)", k->name, kvf_errname(code), rc, err.msg);
    else
        CHECK_STR_CONTAINS(err.msg, needle);
    free(o);
    free(lse);
}

static void test_validation(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    kvf_error err = {0};
    kvf_spec spec;
    kvf_case c;
    memset(&c, 0, sizeof c);
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_spec_preset(&spec, "mixed-lengths", 3, &err), &err);
    const int failures_before = check_failures;
    CHECK_OK(kvf_case_build(&c, &spec, &lim, &err), &err);
    if (check_failures != failures_before) return;
    const char *names[2] = {"cuda", "cuda-naive"};
    for (int k = 0; k < 2; k++) {
        const kvf_kernel *kern = kvf_kernel_find(names[k]);
        void *st = NULL;
        CHECK_OK(kvf_kernel_create(kern, &st, &err), &err);
        if (!st) return;
        int32_t saved_idx = c.kv_indices[0];
        c.kv_indices[0] = (int32_t)c.num_pages;
        expect_error(st, kern, &c, KVF_EINVAL, "kv_indices[0]");
        c.kv_indices[0] = saved_idx;

        int32_t saved_last = c.kv_last_page_len[0];
        c.kv_last_page_len[0] = c.page_size + 1;
        expect_error(st, kern, &c, KVF_EINVAL, "kv_last_page_len[0]");
        c.kv_last_page_len[0] = saved_last;

        int32_t saved_ip = c.kv_indptr[1];
        c.kv_indptr[1] = c.kv_indptr[2] + 1;
        expect_error(st, kern, &c, KVF_EINVAL, "kv_indptr");
        c.kv_indptr[1] = saved_ip;

        int32_t hq = c.num_qo_heads, hk = c.num_kv_heads;
        c.num_kv_heads = 3; /* 20 % 3 != 0 */
        expect_error(st, kern, &c, KVF_EINVAL, "multiple");
        c.num_kv_heads = 1, c.num_qo_heads = 17; /* group 17: memory layout still fits q */
        expect_error(st, kern, &c, KVF_EUNSUPPORTED, "group 17");
        c.num_qo_heads = hq, c.num_kv_heads = hk;

        int32_t d = c.head_dim;
        c.head_dim = 96;
        expect_error(st, kern, &c, KVF_EUNSUPPORTED, "head_dim 96");
        c.head_dim = d;

        /* Still a working state after rejected inputs. */
        kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c) * sizeof *o);
        float *lse = malloc((size_t)kvf_case_lse_elems(&c) * sizeof *lse);
        CHECK_OK(kvf_kernel_run(kern, st, &c, o, lse, &err), &err);
        free(o);
        free(lse);
        kvf_kernel_destroy(kern, st);
    }
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

static const check_test tests[] = {
    {"validation", test_validation},
    {"same_bits_twice", test_same_bits_twice},
    {"merge_many_splits", test_merge_many_splits},
    {"longest_first_batch", test_longest_first_batch},
    {"high_page_ids", test_high_page_ids},
    {"pool_poison_between_runs", test_pool_poison_between_runs},
    {"staging_in_batches", test_staging_in_batches},
    {"oracle_sweep", test_oracle_sweep},
    {NULL, NULL},
};

CHECK_MAIN(tests)
