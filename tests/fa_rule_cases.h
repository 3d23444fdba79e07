/* Shared pieces of the fa rule's tests (tests/test_fa_*.c): the normalised-first legitimate
 * implementation of a row (weights normalised before P.V, as torch's softmax-then-matmul and
 * FlashInfer-Bench's reference do; sequential, or with eight-lane BLAS-style sums), the verdict
 * of a rule on given outputs, and loading a committed test case with its oracle result. */
#ifndef KVFUZZ_TESTS_FA_RULE_CASES_H
#define KVFUZZ_TESTS_FA_RULE_CASES_H

#include <math.h>
#include <stdint.h>

#include "check.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"

#define LOG2E_F 1.44269504088896340736f

static inline const kvf_bf16 *kv_at(const kvf_case *c, const kvf_bf16 *cache, int32_t b, int64_t t,
                                    int32_t g) {
    return cache + kvf_case_kv_offset(c, b, t, g, 0);
}

static inline float pairwise(const float *w, int64_t n) {
    if (n == 1) return w[0];
    int64_t h = n / 2;
    float a = pairwise(w, h), b = pairwise(w + h, n - h);
    return a + b;
}

/* The lanes of a vectorised BLAS kernel's accumulators, combined as a tree. */
static inline float lane_total(const float lane[8]) {
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
           ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/* A BLAS-style row with `lanes` FMA accumulators (1: sequential, up to 8): natural-unit
 * logits, exp, a pairwise sum, the weights normalised before P.V, then P.V over the tokens. */
static inline void blocked_row(const kvf_case *c, int32_t b, int32_t h, float *s, double *y,
                               float *lse, int lanes) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const int64_t L = kvf_case_seq_len(c, b);
    const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
    float m = -INFINITY;
    for (int64_t t = 0; t < L; t++) {
        const kvf_bf16 *k = kv_at(c, c->k_cache, b, t, g);
        float lane[8] = {0};
        for (int32_t d = 0; d < D; d++)
            lane[d % lanes] = fmaf(kvf_bf16_to_f32(q[d]), kvf_bf16_to_f32(k[d]), lane[d % lanes]);
        s[t] = lane_total(lane) * c->sm_scale;
        m = s[t] > m ? s[t] : m;
    }
    for (int64_t t = 0; t < L; t++)
        s[t] = expf(s[t] - m);
    float z = pairwise(s, L);
    for (int64_t t = 0; t < L; t++)
        s[t] /= z;
    for (int32_t d = 0; d < D; d++) {
        float lane[8] = {0};
        for (int64_t t = 0; t < L; t++)
            lane[t % lanes] =
                fmaf(s[t], kvf_bf16_to_f32(kv_at(c, c->v_cache, b, t, g)[d]), lane[t % lanes]);
        y[d] = lane_total(lane);
    }
    *lse = (m + logf(z)) * LOG2E_F;
}

/* The normalised-first row with one lane (IMPL_NORMALISED of tests/test_fa_legitimate.c):
 * y[D] and the lse. */
static inline void normalised_row(const kvf_case *c, int32_t b, int32_t h, double *y, float *lse) {
    const int64_t L = kvf_case_seq_len(c, b);
    for (int32_t d = 0; d < c->head_dim; d++)
        y[d] = 0.0;
    if (L == 0) {
        *lse = -INFINITY;
        return;
    }
    float *s = malloc((size_t)L * sizeof *s);
    blocked_row(c, b, h, s, y, lse, 1);
    free(s);
}

/* The verdict of rule `name` on the outputs o and lse of case c. */
static inline kvf_verdict judged_by(const char *name, const kvf_case *c, const kvf_oracle_result *r,
                                    const kvf_bf16 *o, const float *lse) {
    kvf_error err = {0};
    kvf_rule rule;
    kvf_verdict v;
    memset(&v, 0, sizeof v);
    CHECK_OK(kvf_rule_parse(&rule, name, &err), &err);
    CHECK_OK(kvf_judge(&v, &rule, c, r, o, lse, &err), &err);
    return v;
}

/* Loads tests/cases/NAME and runs the oracle on it. 1 (the caller returns): the source tree is
 * unknown (counted as skipped) or the case failed to load or to run (counted as failed). */
static inline int load_test_case(const char *name, kvf_case *c, kvf_oracle_result *r) {
    const char *src = getenv("KVF_SOURCE_DIR");
    if (!src) {
        printf("SKIP: KVF_SOURCE_DIR is not set\n");
        check_skipped++;
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/cases/%s", src, name);
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err = {0};
    if (kvf_case_load(path, NULL, c, &lim, &err)) {
        CHECK_FAIL_AT("%s does not load: %s", path, err.msg);
        return 1;
    }
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    if (kvf_oracle_run(r, c, &oo, &err)) {
        CHECK_FAIL_AT("oracle failed on %s: %s", path, err.msg);
        kvf_case_free(c);
        return 1;
    }
    return 0;
}

#endif
