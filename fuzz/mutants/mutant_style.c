/* The mutant benchmark's bench-style checks (kvfuzz/mutant_bench.h): (b) FlashInfer-Bench-style
 * and (c) FlashInfer-test-style testing, each a few fixed workloads judged by one rule against
 * the fp32 reference cpu-ref, as those test suites judge a kernel (docs/mutants.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/mutant_bench.h"
#include "kvfuzz/trial.h"

typedef struct kvf__workload {
    int hq, hk, d, page, batch;
    int lens[8];
} kvf__workload;

/* FlashInfer-Bench's captured workloads for gqa_paged_decode_h20_kv4_d128_ps64: the seed shape,
 * contiguous tables, no empty requests. */
static const kvf__workload kvf__fib_workloads[] = {
    {20, 4, 128, 64, 1, {3202}},
    {20, 4, 128, 64, 4, {512, 1024, 2048, 4000}},
    {20, 4, 128, 64, 8, {100, 900, 1700, 2500, 3300, 4100, 300, 64}},
    {20, 4, 128, 64, 16, {1000, 200, 1500, 700, 64, 128, 1999, 333}},
};

/* FlashInfer's unit tests: identity page table, every request the same length, power-of-two
 * groups, N(0,1). */
static const kvf__workload kvf__test_workloads[] = {
    {32, 4, 128, 16, 4, {54, 54, 54, 54, 54, 54, 54, 54}},
    {32, 32, 128, 16, 4, {512, 512, 512, 512, 512, 512, 512, 512}},
    {32, 8, 128, 1, 4, {97, 97, 97, 97, 97, 97, 97, 97}},
    {32, 4, 128, 8, 4, {2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048}},
};

/* An fp32 reference's output dressed as an oracle result, for the benchmark-style checks that
 * compare against a reference implementation rather than the exact answer. */
static int kvf__reference_result(kvf_oracle_result *r, const kvf_case *c, kvf_error *err) {
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

/* Builds a benchmark-style case: contiguous page table, N(0,1) values, given lengths. */
static int kvf__style_case(kvf_case *c, const kvf__workload *w, uint64_t seed,
                           const kvf_limits *lim, kvf_error *err) {
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

/* Whether the kernel fails case c against reference ref under rule: a run that ends in an
 * error counts, one the kernel declines (unsupported) does not. */
static int kvf__style_fails(const kvf_kernel *k, void *state, const kvf_case *c,
                            const kvf_oracle_result *ref, const kvf_rule *rule) {
    kvf_error err = {0};
    kvf_trial_buffers b = {0};
    int rc = kvf_trial_buffers_alloc(&b, c, &err);
    if (!rc) rc = kvf_kernel_run(k, state, c, b.o, b.lse, &err);
    int fails = 0;
    if (rc && rc != KVF_EUNSUPPORTED) {
        fails = 1;
    } else if (rc == 0) {
        const kvf_trial_rules tr = {rule, 1, 0, 0, 0, KVF_FINDING_NONE};
        kvf_outcome out;
        fails = kvf_trial_judge(&out, &tr, c, ref, b.o, b.lse, NULL, NULL) == 0 &&
                out.finding != KVF_FINDING_NONE;
    }
    kvf_trial_buffers_free(&b);
    return fails;
}

/* 1 caught, 0 missed, or the kernel cannot start (err says why). */
static int kvf__style_check(const kvf_kernel *k, const kvf__workload *ws, size_t nw, int trials,
                            const kvf_rule *rule, const kvf_limits *lim, kvf_error *err) {
    void *state = NULL;
    int rc = kvf_kernel_create(k, &state, err);
    if (rc) return rc < 0 ? rc : KVF_EKERNEL;
    int caught = 0;
    for (size_t w = 0; w < nw && !caught; w++)
        for (int t = 0; t < trials && !caught; t++) {
            kvf_error why = {0};
            kvf_case c;
            kvf_oracle_result ref;
            /* A workload past the limits is not this kernel's failure: it is left out. */
            if (kvf__style_case(&c, &ws[w], (uint64_t)(1000 + t), lim, &why)) continue;
            if (kvf__reference_result(&ref, &c, &why) == 0)
                caught = kvf__style_fails(k, state, &c, &ref, rule);
            kvf_oracle_result_free(&ref);
            kvf_case_free(&c);
        }
    kvf_kernel_destroy(k, state);
    return caught;
}

int kvf_mutant_fib_bench_style(const kvf_kernel *k, const kvf_limits *lim, kvf_error *err) {
    kvf_rule fib;
    kvf_rule_parse(&fib, "fib", NULL);
    return kvf__style_check(k, kvf__fib_workloads,
                            sizeof kvf__fib_workloads / sizeof kvf__fib_workloads[0], 3, &fib, lim,
                            err);
}

int kvf_mutant_fi_tests_style(const kvf_kernel *k, const kvf_limits *lim, kvf_error *err) {
    kvf_rule allclose;
    kvf_rule_parse(&allclose, "allclose:1e-3:1e-3", NULL);
    return kvf__style_check(k, kvf__test_workloads,
                            sizeof kvf__test_workloads / sizeof kvf__test_workloads[0], 1,
                            &allclose, lim, err);
}
