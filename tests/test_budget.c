/* Unit test of the case budgets (core/src/cost.c's check, run by the decoder; the variables
 * KVF_MAX_MEMORY_MIB and KVF_MAX_WORK): costly cases inside every size limit refused at decode
 * with one sentence, budgets from the limits and the environment, bad values refused by name,
 * and every shipped preset inside the default budgets. */
#include "spec_fixtures.h"

/* The budgets (docs/case-format.md, "Budgets"): a 56-byte file of one 2^24-token sequence and
 * a 16 KiB file of 4,096 empty sequences at Hq 128, D 1024 are inside every size limit but
 * would cost about 10 GiB to judge; both are refused at decode, before any allocation, with
 * one sentence. A budget given by the limits or the environment lets them through; a bad
 * environment value is refused by name. */
static uint8_t *budget_case(int hq, int hk, int d, int s, int batch, uint16_t pages, uint16_t last,
                            size_t *size) {
    kvf_spec sp;
    memset(&sp, 0, sizeof sp);
    kvf_recipe *rp = &sp.recipe;
    rp->num_qo_heads = (uint8_t)hq;
    rp->num_kv_heads = (uint8_t)hk;
    rp->head_dim = (uint16_t)d;
    rp->page_size = (uint16_t)s;
    rp->sm_scale = 1.0f;
    rp->seed = 1;
    kvf_spec_set_batch(&sp, (uint16_t)batch, NULL);
    for (int b = 0; b < batch; b++) {
        rp->num_pages[b] = pages;
        rp->last_page_len[b] = last;
    }
    uint8_t *data = NULL;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_encode(&sp, &data, size, &err), &err);
    kvf_spec_free(&sp);
    return data;
}

static void test_budgets_refuse_costly_cases(void) {
    kvf_limits lim = limits();
    size_t n_long = 0, n_empty = 0;
    uint8_t *longest = budget_case(1, 1, 1, 1024, 1, 16384, 1024, &n_long);
    uint8_t *empty = budget_case(128, 1, 1024, 1, 4096, 0, 0, &n_empty);
    CHECK_INT_EQ(n_long, 56);
    CHECK_INT_EQ(n_empty, 52 + 4 * 4096);
    unsetenv("KVF_MAX_MEMORY_MIB");
    unsetenv("KVF_MAX_WORK");
    kvf_spec s;
    kvf_error err = {0};
    /* One row of 2^24 tokens fits the default budget: the oracle streams it, so its memory is
     * that of two row stores (docs/oracle.md, "Memory"), whatever the length. */
    CHECK_OK(kvf_spec_decode(&s, longest, n_long, &lim, &err), &err);
    kvf_case_cost cost;
    kvf_recipe_cost(&s.recipe, &cost);
    CHECK(cost.oracle_bytes <= 2 * KVF_ORACLE_ROW_STORE_BYTES + ((int64_t)1 << 20));
    CHECK(cost.oracle_bytes >= 2 * KVF_ORACLE_ROW_STORE_BYTES);
    kvf_spec_free(&s);
    setenv("KVF_MAX_MEMORY_MIB", "256", 1);
    CHECK_INT_EQ(kvf_spec_decode(&s, longest, n_long, &lim, &err), KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "past the memory budget of 256.00 MiB");
    CHECK(strchr(err.msg, '\n') == NULL);
    unsetenv("KVF_MAX_MEMORY_MIB");
    CHECK_INT_EQ(kvf_spec_decode(&s, empty, n_empty, &lim, &err), KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "past the memory budget of 2.00 GiB");
    CHECK(strchr(err.msg, '\n') == NULL);
    CHECK_OK(kvf_spec_decode(&s, longest, n_long,
                             &(kvf_limits){.max_batch = 1,
                                           .max_qo_heads = 1,
                                           .max_head_dim = 1,
                                           .max_page_size = 1024,
                                           .max_pool_pages = 1 << 20,
                                           .max_table_entries = 1 << 20,
                                           .max_tokens = 1 << 24,
                                           .max_pool_bytes = 1 << 30,
                                           .max_resident_bytes = 1 << 30,
                                           .max_memory_bytes = (int64_t)64 << 30},
                             &err),
             &err);
    kvf_recipe_cost(&s.recipe, &cost);
    /* A row that fits the store is costed per token (both paths' workspaces). */
    CHECK_INT_EQ(KVF_ORACLE_THREAD_BYTES(1024, 5), 1024 * KVF_ORACLE_TOKEN_BYTES(5));
    CHECK_INT_EQ(cost.memory_bytes, cost.tensor_bytes + cost.oracle_bytes + cost.kernel_bytes);
    CHECK_INT_EQ(cost.work, ((int64_t)1 << 24) * (1 + 64) + 1); /* + B x D */
    kvf_spec_free(&s);

    /* The environment: a larger budget admits, a smaller work budget refuses, junk is named. */
    setenv("KVF_MAX_MEMORY_MIB", "65536", 1);
    CHECK_OK(kvf_spec_decode(&s, longest, n_long, &lim, &err), &err);
    kvf_spec_free(&s);
    setenv("KVF_MAX_WORK", "1000000", 1);
    CHECK_INT_EQ(kvf_spec_decode(&s, longest, n_long, &lim, &err), KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "past the work budget of 1000000");
    static const char *const bad[] = {"abc", "0", "-5", "12x", " 5", "99999999999999999999",
                                      "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("KVF_MAX_WORK", bad[i], 1);
        CHECK_INT_EQ(kvf_spec_decode(&s, longest, n_long, &lim, &err), KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, "KVF_MAX_WORK must be a decimal integer in [1, ");
    }
    /* Empty is the default, as for every variable of the table (docs/cli.md). */
    setenv("KVF_MAX_WORK", "", 1);
    CHECK_OK(kvf_spec_decode(&s, longest, n_long, &lim, &err), &err);
    kvf_spec_free(&s);
    unsetenv("KVF_MAX_WORK");
    setenv("KVF_MAX_MEMORY_MIB", "lots", 1);
    CHECK_INT_EQ(kvf_spec_decode(&s, longest, n_long, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "KVF_MAX_MEMORY_MIB");
    unsetenv("KVF_MAX_MEMORY_MIB");
    /* A budget in the limits wins over the environment. */
    setenv("KVF_MAX_WORK", "1", 1);
    kvf_limits big = lim;
    big.max_work = (int64_t)1 << 40;
    big.max_memory_bytes = (int64_t)64 << 30;
    CHECK_OK(kvf_spec_decode(&s, longest, n_long, &big, &err), &err);
    kvf_spec_free(&s);
    unsetenv("KVF_MAX_WORK");
    /* Every shipped preset is inside the default budgets. */
    for (size_t i = 0; i < kvf_preset_count(); i++) {
        CHECK_OK(kvf_spec_preset(&s, kvf_preset_name(i), 1, &err), &err);
        kvf_recipe_cost(&s.recipe, &cost);
        CHECK(cost.memory_bytes <= KVF_DEFAULT_MAX_MEMORY_BYTES);
        CHECK(cost.work <= KVF_DEFAULT_MAX_WORK);
        kvf_spec_free(&s);
    }
    free(longest);
    free(empty);
}

/* Sizes in messages carry the unit that keeps them readable: a 1 MiB budget is not "0.00 GiB". */
static void test_size_text_units(void) {
    char buf[KVF_SIZE_TEXT_MAX];
    CHECK_STR_EQ(kvf_size_text(0, buf), "0 bytes");
    CHECK_STR_EQ(kvf_size_text(1023, buf), "1023 bytes");
    CHECK_STR_EQ(kvf_size_text(1536, buf), "1.50 KiB");
    CHECK_STR_EQ(kvf_size_text((int64_t)1 << 20, buf), "1.00 MiB");
    CHECK_STR_EQ(kvf_size_text(((int64_t)1 << 30) - 1, buf), "1024.00 MiB");
    CHECK_STR_EQ(kvf_size_text((int64_t)5 << 29, buf), "2.50 GiB");
    CHECK_STR_EQ(kvf_size_text(INT64_MAX, buf), "8589934592.00 GiB");
}

static const check_test tests[] = {
    {"budgets_refuse_costly_cases", test_budgets_refuse_costly_cases},
    {"size_text_units", test_size_text_units},
    {NULL, NULL},
};

CHECK_MAIN(tests)
