/* Unit test of the fa rule's baselines (oracle/src/rules/fa_baseline.c, measured by
 * fa_allow.c): rows of equal logits and constant v, where a legitimate normalised-first kernel
 * is thousands of u off, have their baselines marked unusable and are judged as strict judges
 * them; rows of natural logits keep their baseline. */
#include "case_oracle.h"
#include "fa_allow.h"
#include "fa_rule_cases.h"

/* A row of equal logits and constant v (tests/cases/fa-alike-weights.kvfz: 30,053 tokens): a
 * kernel that normalises the weights first, as torch's softmax-then-matmul does, sums 30,053
 * copies of one rounded term, and each binade of the sum rounds the same way, thousands of u
 * off, far past the baselines' error (they sum exact ones). fa marks such rows unusable and
 * judges them as strict does; a row of natural logits keeps its baseline. */
static void test_alike_weights(void) {
    kvf_case c;
    kvf_oracle_result r;
    kvf_error err = {0};
    if (load_test_case("fa-alike-weights.kvfz", &c, &r)) return;
    const int32_t D = c.head_dim;
    const int64_t rows = kvf_case_lse_elems(&c);
    double *y = malloc((size_t)(rows * D) * sizeof *y), worst_u = 0;
    kvf_bf16 *o = malloc((size_t)(rows * D) * sizeof *o);
    float *lse = malloc((size_t)rows * sizeof *lse);
    double *allowed = malloc((size_t)D * sizeof *allowed), *pre = malloc((size_t)D * sizeof *pre);
    for (int64_t row = 0; row < rows; row++) {
        int32_t b = (int32_t)(row / c.num_qo_heads), h = (int32_t)(row % c.num_qo_heads);
        normalised_row(&c, b, h, y + row * D, &lse[row]);
        CHECK_INT_EQ(kvf_fa_bound_row(&c, &r, b, h, NULL, allowed, pre), 0);
        for (int32_t d = 0; d < D; d++) {
            const double x = r.o_exact[row * D + d], sc = r.o_cond[row * D + d] + fabs(x);
            o[row * D + d] = kvf_f32_to_bf16_rne((float)y[row * D + d]);
            if (isfinite(pre[d]))
                CHECK_FAIL_AT("row %lld d %d: fa kept its baseline", (long long)row, d);
            if (fabs(y[row * D + d] - x) / (sc * 0x1p-24) > worst_u)
                worst_u = fabs(y[row * D + d] - x) / (sc * 0x1p-24);
        }
    }
    printf("normalised-first kernel: worst error %.0f u of C + |x|\n", worst_u);
    CHECK(worst_u > 8 * KVF_FA_FLOOR_U); /* far outside what the baselines would allow */
    static const char *const names[] = {"strict", "fa"};
    for (int i = 0; i < 2; i++)
        if (!judged_by(names[i], &c, &r, o, lse).pass)
            CHECK_FAIL_AT("the normalised-first kernel fails %s", names[i]);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
    /* The seed workload's natural logits keep their baseline. */
    kvf_spec sp;
    CHECK_OK(kvf_spec_preset(&sp, "seed-h20kv4", 1, &err), &err);
    if (kvf_test_case_and_oracle(&sp, &c, &r) == 0) {
        for (int32_t h = 0; h < c.num_qo_heads; h++) {
            CHECK_INT_EQ(kvf_fa_bound_row(&c, &r, 0, h, NULL, allowed, pre), 0);
            CHECK(isfinite(pre[0]));
        }
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
    free(y);
    free(o);
    free(lse);
    free(allowed);
    free(pre);
}

static const check_test tests[] = {
    {"alike_weights", test_alike_weights},
    {NULL, NULL},
};

CHECK_MAIN(tests)
