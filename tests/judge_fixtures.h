/* Shared fixture for the judge and rule tests (test_rule_parse, test_rules_benchmarks,
 * test_rule_strict, test_judge_metrics): a case shape, an oracle result and the kernel's outputs,
 * all set by hand, so these tests depend on neither the oracle nor the case generator: only on
 * the judge, the bf16 helpers and the error table. */
#ifndef KVFUZZ_TESTS_JUDGE_FIXTURES_H
#define KVFUZZ_TESTS_JUDGE_FIXTURES_H

#include <float.h>
#include <stdint.h>

#include "check.h"
#include "kvfuzz/judge.h"

/* ------------------------------------------------------------------------------------------ */
/* Fixture: a case shape, an oracle result and the kernel's outputs, all set by hand.          */
/* ------------------------------------------------------------------------------------------ */

typedef struct fx {
    kvf_case c;
    kvf_oracle_result orc;
    kvf_bf16 *o; /* kernel o  [B][H][D] */
    float *lse;  /* kernel lse [B][H] */
} fx;

static inline double bf(kvf_bf16 h) {
    return (double)kvf_bf16_to_f32(h);
}

/* Round to nearest even of a double, independent of double rounding through float: take the
 * candidate from float and its two neighbours and keep the nearest (even on a tie). Positive x
 * only, which is all the tests need. */
static inline kvf_bf16 rn_bf16(double x) {
    kvf_bf16 c = kvf_f32_to_bf16_rne((float)x), best = c;
    double bd = fabs(bf(c) - x);
    for (int s = -1; s <= 1; s += 2) {
        if (c == 0 && s < 0) continue;
        kvf_bf16 n = (kvf_bf16)(c + s);
        double nd = fabs(bf(n) - x);
        if (nd < bd || (nd == bd && (n & 1u) == 0)) {
            best = n;
            bd = nd;
        }
    }
    return best;
}

static inline int64_t fx_rows(const fx *f) {
    return (int64_t)f->c.batch_size * f->c.num_qo_heads;
}
static inline int64_t fx_elems(const fx *f) {
    return fx_rows(f) * f->c.head_dim;
}

static inline void fx_set_o(fx *f, int64_t i, double x, double cond) {
    f->orc.o_exact[i] = x;
    f->orc.o_cond[i] = cond;
    f->orc.o_rounded[i] = x < 0 ? (kvf_bf16)(rn_bf16(-x) | 0x8000u) : rn_bf16(x);
    f->o[i] = f->orc.o_rounded[i];
}

static inline void fx_set_lse(fx *f, int64_t row, double x) {
    f->orc.lse_exact[row] = x;
    f->orc.lse_rounded[row] = (float)x;
    f->lse[row] = (float)x;
}

/* Every row: L tokens, modest logits, every o element exactly 0.5 with C = 0.5, lse = 3. The
 * kernel output starts equal to the correctly rounded one. */
static inline void fx_init(fx *f, int32_t B, int32_t H, int32_t D, int64_t L) {
    memset(f, 0, sizeof *f);
    f->c.batch_size = B;
    f->c.num_qo_heads = H;
    f->c.num_kv_heads = H;
    f->c.head_dim = D;
    f->c.page_size = 64;
    f->c.sm_scale = 1.0f / sqrtf((float)D);
    f->orc.batch_size = B;
    f->orc.num_qo_heads = H;
    f->orc.head_dim = D;
    int64_t rows = fx_rows(f), n = fx_elems(f);
    f->orc.o_rounded = calloc((size_t)n, sizeof *f->orc.o_rounded);
    f->orc.o_exact = calloc((size_t)n, sizeof *f->orc.o_exact);
    f->orc.o_cond = calloc((size_t)n, sizeof *f->orc.o_cond);
    f->orc.lse_rounded = calloc((size_t)rows, sizeof *f->orc.lse_rounded);
    f->orc.lse_exact = calloc((size_t)rows, sizeof *f->orc.lse_exact);
    f->orc.rows = calloc((size_t)rows, sizeof *f->orc.rows);
    f->o = calloc((size_t)n, sizeof *f->o);
    f->lse = calloc((size_t)rows, sizeof *f->lse);
    if (!f->orc.o_rounded || !f->orc.o_exact || !f->orc.o_cond || !f->orc.lse_rounded ||
        !f->orc.lse_exact || !f->orc.rows || !f->o || !f->lse) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t r = 0; r < rows; r++) {
        f->orc.rows[r].length = L;
        f->orc.rows[r].dot_abs_max = 2.0;
        f->orc.rows[r].logit_abs_max = 1.0;
        f->orc.rows[r].v_abs_max = 2.0;
        fx_set_lse(f, r, 3.0);
    }
    for (int64_t i = 0; i < n; i++)
        fx_set_o(f, i, 0.5, 0.5);
}

/* Row r becomes an empty sequence: o = 0, lse = -inf, and a correct kernel's output. */
static inline void fx_empty_row(fx *f, int64_t r) {
    kvf_oracle_row *row = &f->orc.rows[r];
    memset(row, 0, sizeof *row);
    for (int32_t d = 0; d < f->c.head_dim; d++)
        fx_set_o(f, r * f->c.head_dim + d, 0.0, 0.0);
    f->orc.lse_exact[r] = -INFINITY;
    f->orc.lse_rounded[r] = -INFINITY;
    f->lse[r] = -INFINITY;
}

static inline void fx_free(fx *f) {
    free(f->orc.o_rounded);
    free(f->orc.o_exact);
    free(f->orc.o_cond);
    free(f->orc.lse_rounded);
    free(f->orc.lse_exact);
    free(f->orc.rows);
    free(f->o);
    free(f->lse);
    memset(f, 0, sizeof *f);
}

static inline kvf_verdict fx_judge(const fx *f, const char *rule_text) {
    kvf_rule rule;
    kvf_error err = {0};
    kvf_verdict v;
    memset(&v, 0, sizeof v);
    CHECK_OK(kvf_rule_parse(&rule, rule_text, &err), &err);
    CHECK_OK(kvf_judge(&v, &rule, &f->c, &f->orc, f->o, f->lse, &err), &err);
    return v;
}

#define CHECK_VERDICT(f, rule, want_pass, want_finding)                                            \
    do {                                                                                           \
        kvf_verdict v_ = fx_judge((f), (rule));                                                    \
        CHECK_INT_EQ(v_.pass, (want_pass));                                                        \
        if (v_.finding != (want_finding))                                                          \
            CHECK_FAIL_AT("rule %s: finding %s, want %s", (rule),                                  \
                          kvf_finding_class_name(v_.finding),                                      \
                          kvf_finding_class_name(want_finding));                                   \
    } while (0)

#endif /* KVFUZZ_TESTS_JUDGE_FIXTURES_H */
