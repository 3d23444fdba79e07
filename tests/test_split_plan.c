/* The CUDA kernels' split plan (kernels/cuda/split_plan.h), a pure host function: schedules that
 * cover every token exactly once in whole tiles, the heuristic's wave arithmetic, the forced
 * chunk size, empty batches and sequences, the workspace size, and the refusals. Plain C: runs
 * in every build, with or without CUDA. */
#include "check.h"

#include <stdint.h>

#include "split_plan.h"

typedef struct problem {
    int32_t indptr[65];
    int32_t last[64];
    kvf_cuda_problem pr;
} problem;

/* A problem of B sequences with the given token counts (0: empty). */
static void make_problem(problem *p, int32_t hq, int32_t hk, int32_t d, int32_t s, int32_t b,
                         const int64_t *tokens) {
    memset(p, 0, sizeof *p);
    p->indptr[0] = 0;
    for (int32_t i = 0; i < b; i++) {
        const int64_t pages = (tokens[i] + s - 1) / s;
        p->indptr[i + 1] = p->indptr[i] + (int32_t)pages;
        p->last[i] = tokens[i] == 0 ? 0 : (int32_t)(tokens[i] - (pages - 1) * s);
    }
    p->pr.num_qo_heads = hq, p->pr.num_kv_heads = hk, p->pr.head_dim = d;
    p->pr.page_size = s, p->pr.batch_size = b;
    p->pr.num_pages = p->indptr[b];
    p->pr.sm_scale = 0.088388f;
    p->pr.kv_indptr = p->indptr, p->pr.kv_last_page_len = p->last;
}

static kvf__cuda_split_device h200(int32_t tile) {
    kvf__cuda_split_device d = {132, 2, tile, 0};
    return d;
}

/* Every invariant of a schedule against the problem it was built for. */
static void check_schedule(const problem *p, const kvf__cuda_split_device *dev,
                           const kvf__cuda_split_plan *sp, const int64_t *tokens) {
    const int32_t B = p->pr.batch_size, T = dev->tile_tokens;
    const int64_t chunk = sp->info.chunk_tokens;
    CHECK_INT_EQ(sp->info.tile_tokens, T);
    CHECK(chunk >= T && chunk % T == 0);
    CHECK_INT_EQ(sp->items_at % 4, 0);
    CHECK(sp->items_at >= (size_t)B + 1 && sp->items_at < (size_t)B + 5);
    CHECK_INT_EQ(sp->sched_len, sp->items_at + 4 * (size_t)sp->n_items);
    const int32_t *first = sp->sched, *items = sp->sched + sp->items_at;
    for (size_t i = (size_t)B + 1; i < sp->items_at; i++)
        CHECK_INT_EQ(first[i], 0);
    CHECK_INT_EQ(first[0], 0);
    CHECK_INT_EQ(first[B], sp->n_items);
    int32_t max_splits = 1;
    for (int32_t b = 0; b < B; b++) {
        const int32_t n = first[b + 1] - first[b];
        CHECK(n >= 1); /* an empty sequence is written too */
        if (n > max_splits) max_splits = n;
        if (tokens[b] > 0) CHECK_INT_EQ(n, (tokens[b] + chunk - 1) / chunk);
        if (tokens[b] == 0) CHECK_INT_EQ(n, 1);
    }
    /* Split k of sequence b covers [k chunk, min((k + 1) chunk, tokens)), once: with the
     * counts above, every token exactly once. Its merge row is first[b] + k. */
    uint8_t *seen = calloc((size_t)sp->n_items + 1, 1);
    CHECK(seen != NULL);
    int in_order = 1;
    int64_t prev_b = -1, prev_k = -1, prev_tiles = INT64_MAX;
    int ordered_by_tiles = 1;
    for (int32_t i = 0; i < sp->n_items && seen; i++) {
        const int32_t *it = items + 4 * (int64_t)i;
        const int32_t b = it[0];
        CHECK(b >= 0 && b < B);
        if (b < 0 || b >= B) break;
        const int64_t beg = it[2], end = it[3] & 0x7fffffff, n = first[b + 1] - first[b];
        CHECK_INT_EQ(it[1], p->indptr[b]);
        CHECK_INT_EQ(beg % chunk, 0);
        const int64_t k = beg / chunk;
        CHECK(k >= 0 && k < n);
        if (k < 0 || k >= n) break;
        CHECK_INT_EQ(end, beg + chunk < tokens[b] ? beg + chunk : tokens[b]);
        CHECK_INT_EQ(it[3] < 0, n == 1); /* the "only item" bit */
        CHECK_INT_EQ(seen[first[b] + k], 0);
        seen[first[b] + k] = 1;
        if (b < prev_b || (b == prev_b && k < prev_k)) in_order = 0;
        const int64_t tiles = (end - beg + T - 1) / T;
        if (tiles > prev_tiles) ordered_by_tiles = 0;
        prev_b = b, prev_k = k, prev_tiles = tiles;
    }
    free(seen);
    /* Sequence order within one wave of CTAs; longest first beyond it. */
    const int64_t slots = (int64_t)dev->num_sms * dev->ctas_per_sm;
    if ((int64_t)sp->n_items * p->pr.num_kv_heads <= slots)
        CHECK(in_order);
    else
        CHECK(ordered_by_tiles);
    CHECK_INT_EQ(sp->info.max_splits, max_splits);
    CHECK_INT_EQ(sp->info.merge, max_splits > 1);
    /* The arithmetic form (split_item.h) exactly when every sequence has the same length and
     * the items are in sequence order, and then it gives every item of the table. */
    int uniform = B > 0;
    for (int32_t b = 1; b < B; b++)
        if (tokens[b] != tokens[0]) uniform = 0;
    CHECK_INT_EQ(sp->form.splits > 0, uniform && in_order);
    if (sp->form.splits > 0) {
        CHECK_INT_EQ((int64_t)sp->form.splits * B, sp->n_items);
        CHECK_INT_EQ(sp->form.len, tokens[0]);
        CHECK_INT_EQ(sp->form.chunk_tokens, chunk);
        for (int32_t i = 0; i < sp->n_items; i++) {
            int32_t it[4];
            kvf__split_form_item(sp->form.splits, sp->form.pages, sp->form.len,
                                 sp->form.chunk_tokens, sp->form.single, i, it);
            for (int e = 0; e < 4; e++)
                CHECK_INT_EQ(it[e], items[4 * (int64_t)i + e]);
        }
    }
    CHECK_INT_EQ(sp->info.ctas, (int64_t)sp->n_items * p->pr.num_kv_heads);
    CHECK_INT_EQ(sp->info.num_sms, dev->num_sms);
    CHECK_INT_EQ(sp->info.ctas_per_sm, dev->ctas_per_sm);
    if (sp->info.merge) {
        const size_t rows = (size_t)sp->n_items * (size_t)p->pr.num_qo_heads;
        CHECK_INT_EQ(sp->ws_acc_bytes, rows * (size_t)p->pr.head_dim * 4);
        CHECK_INT_EQ(sp->ws_ml_at % 256, 0);
        CHECK(sp->ws_ml_at >= sp->ws_acc_bytes && sp->ws_ml_at < sp->ws_acc_bytes + 256);
        CHECK_INT_EQ(sp->ws_bytes, sp->ws_ml_at + rows * 8);
    } else {
        CHECK_INT_EQ(sp->ws_bytes, 0);
        CHECK_INT_EQ(sp->ws_acc_bytes, 0);
    }
}

static void test_schedules_cover_every_token(void) {
    uint64_t x = 12345;
    for (int iter = 0; iter < 400; iter++) {
        int64_t tokens[64];
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int32_t B = 1 + (int32_t)((x >> 33) % 64);
        const int32_t sizes[] = {1, 3, 16, 64, 100, 256};
        const int32_t S = sizes[(x >> 20) % 6];
        const int32_t hk = 1 + (int32_t)((x >> 12) % 8), g = 1 + (int32_t)((x >> 8) % 16);
        const int32_t dims[] = {64, 128, 256};
        const int32_t D = dims[(x >> 4) % 3];
        for (int32_t b = 0; b < B; b++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const uint64_t r = x >> 33;
            tokens[b] = r % 7 == 0 ? 0 : (int64_t)(r % (iter % 3 == 0 ? 70000 : 3000));
            if (iter % 4 == 1 && b > 0) tokens[b] = tokens[0]; /* a uniform batch */
        }
        problem p;
        make_problem(&p, hk * g, hk, D, S, B, tokens);
        kvf__cuda_split_device dev = h200(D == 256 ? 32 : 64);
        if (iter % 5 == 0) dev.force_chunk_tiles = 1 + iter % 7;
        kvf__cuda_split_plan sp;
        kvf_error err = {0, {0}};
        CHECK_OK(kvf__cuda_split_build(&p.pr, &dev, &sp, &err), &err);
        check_schedule(&p, &dev, &sp, tokens);
        kvf__cuda_split_free(&sp);
    }
}

/* CTAs beyond one wave: longest first. B 64, Hk 8 (512 CTAs, no split), sequence b of b + 1
 * tiles: the schedule runs from sequence 63 down to sequence 0. The first 16 sequences with Hk 2
 * split into 51 items (102 CTAs, one wave), which stay in sequence order. */
static void test_longest_first_beyond_one_wave(void) {
    int64_t tokens[64];
    for (int32_t b = 0; b < 64; b++)
        tokens[b] = 64 * (int64_t)b + 1;
    kvf__cuda_split_device dev = h200(64);
    kvf_error err = {0, {0}};
    problem p;
    kvf__cuda_split_plan sp;
    make_problem(&p, 40, 8, 128, 64, 64, tokens);
    CHECK_OK(kvf__cuda_split_build(&p.pr, &dev, &sp, &err), &err);
    CHECK_INT_EQ(sp.info.max_splits, 1);
    CHECK_INT_EQ(sp.n_items, 64);
    for (int32_t i = 0; i < sp.n_items; i++)
        CHECK_INT_EQ(sp.sched[sp.items_at + 4 * (size_t)i], 63 - i);
    check_schedule(&p, &dev, &sp, tokens);
    kvf__cuda_split_free(&sp);
    make_problem(&p, 10, 2, 128, 64, 16, tokens);
    CHECK_OK(kvf__cuda_split_build(&p.pr, &dev, &sp, &err), &err);
    CHECK_INT_EQ(sp.n_items, 51);
    CHECK_INT_EQ(sp.sched[sp.items_at], 0);
    check_schedule(&p, &dev, &sp, tokens);
    kvf__cuda_split_free(&sp);
}

/* Builds p's plan on dev and checks the chunk (tiles of 64 tokens), the splits and the CTAs. */
static void expect_plan(const problem *p, const kvf__cuda_split_device *dev, const int64_t *tokens,
                        int32_t chunk_tiles, int32_t max_splits, int64_t ctas) {
    kvf_error err = {0, {0}};
    kvf__cuda_split_plan sp;
    CHECK_OK(kvf__cuda_split_build(&p->pr, dev, &sp, &err), &err);
    CHECK_INT_EQ(sp.info.chunk_tokens, chunk_tiles * 64);
    CHECK_INT_EQ(sp.info.max_splits, max_splits);
    CHECK_INT_EQ(sp.info.ctas, ctas);
    CHECK_INT_EQ(sp.info.merge, max_splits > 1);
    check_schedule(p, dev, &sp, tokens);
    kvf__cuda_split_free(&sp);
}

/* The heuristic by hand: one wave is 132 SMs x 2 CTAs = 264 slots. */
static void test_heuristic_fills_one_wave(void) {
    kvf__cuda_split_device dev = h200(64);
    problem p;
    /* B 1, Hk 8, 4096 tokens: 64 tiles x 8 heads = 512 tiles of work, 2 per slot: short CTAs,
     * so one CTA per SM instead: 4 tiles per split, 16 splits, 128 CTAs. */
    int64_t one[1] = {4096};
    make_problem(&p, 32, 8, 128, 16, 1, one);
    expect_plan(&p, &dev, one, 4, 16, 128);
    /* The seed workload: 51 tiles x 4 heads = 204, 1 per slot -> 2 per SM: 26 splits. */
    int64_t seed[1] = {3202};
    make_problem(&p, 20, 4, 128, 64, 1, seed);
    expect_plan(&p, &dev, seed, 2, 26, 104);
    /* B 8 x 32768 tokens, Hk 4: 16384 tiles over 264 slots -> 63 tiles, 9 splits of each
     * sequence, 288 CTAs: 24 in a second wave. 64 tiles (a quarter longer at most) fit one. */
    int64_t eight[8];
    for (int b = 0; b < 8; b++)
        eight[b] = 32768;
    make_problem(&p, 20, 4, 128, 64, 8, eight);
    expect_plan(&p, &dev, eight, 64, 8, 256);
    /* B 64 x 4096, Hk 4: 256 pairs, 63-tile chunks would double the CTAs; whole sequences fit
     * the wave. */
    int64_t b64[64];
    for (int b = 0; b < 64; b++)
        b64[b] = 4096;
    make_problem(&p, 20, 4, 128, 64, 64, b64);
    expect_plan(&p, &dev, b64, 64, 1, 256);
    /* Mixed lengths: 59 one-tile sequences and one of 1000 tiles, Hk 4: 4236 tiles of work, 17
     * per slot. 472 CTAs overflow the wave, and fitting it would take 143 tiles a chunk, far
     * more than a quarter longer: the equal-work chunk stays. */
    int64_t mixed[60];
    for (int b = 0; b < 59; b++)
        mixed[b] = 64;
    mixed[59] = 64000;
    make_problem(&p, 20, 4, 128, 64, 60, mixed);
    expect_plan(&p, &dev, mixed, 17, 59, 472);
    /* B 33 x Hk 8 = 264 (sequence, kv head) pairs fill the wave already: no split. */
    int64_t many[33];
    for (int b = 0; b < 33; b++)
        many[b] = 100 + 50 * b;
    make_problem(&p, 32, 8, 128, 16, 33, many);
    expect_plan(&p, &dev, many, (100 + 50 * 32 + 63) / 64, 1, 264);
    /* A smaller device gets longer chunks for the same problem: 512 tiles over 33 SMs x 2 ->
     * 8 tiles, short, so 512 / 33 -> 16 tiles, 4 splits. */
    dev.num_sms = 33;
    make_problem(&p, 32, 8, 128, 16, 1, one);
    expect_plan(&p, &dev, one, 16, 4, 32);
}

static void test_forced_chunk_is_clamped_to_the_longest(void) {
    kvf_error err = {0, {0}};
    kvf__cuda_split_device dev = h200(64);
    kvf__cuda_split_plan sp;
    problem p;
    int64_t t[2] = {1000, 300};
    make_problem(&p, 4, 4, 64, 64, 2, t);
    dev.force_chunk_tiles = 3;
    CHECK_OK(kvf__cuda_split_build(&p.pr, &dev, &sp, &err), &err);
    CHECK_INT_EQ(sp.info.chunk_tokens, 192);
    CHECK_INT_EQ(sp.n_items, 6 + 2);
    check_schedule(&p, &dev, &sp, t);
    kvf__cuda_split_free(&sp);
    dev.force_chunk_tiles = 1000; /* more than the 16 tiles of the longest sequence */
    CHECK_OK(kvf__cuda_split_build(&p.pr, &dev, &sp, &err), &err);
    CHECK_INT_EQ(sp.info.chunk_tokens, 16 * 64);
    CHECK_INT_EQ(sp.info.max_splits, 1);
    kvf__cuda_split_free(&sp);
}

static void test_empty_batch_and_empty_sequences(void) {
    kvf_error err = {0, {0}};
    kvf__cuda_split_device dev = h200(64);
    kvf__cuda_split_plan sp;
    problem p;
    make_problem(&p, 8, 1, 128, 16, 0, NULL);
    CHECK_OK(kvf__cuda_split_build(&p.pr, &dev, &sp, &err), &err);
    CHECK_INT_EQ(sp.n_items, 0);
    CHECK_INT_EQ(sp.sched_len, 4);
    CHECK_INT_EQ(sp.info.merge, 0);
    CHECK_INT_EQ(sp.ws_bytes, 0);
    kvf__cuda_split_free(&sp);
    int64_t t[3] = {0, 0, 0};
    make_problem(&p, 8, 2, 128, 16, 3, t);
    CHECK_OK(kvf__cuda_split_build(&p.pr, &dev, &sp, &err), &err);
    CHECK_INT_EQ(sp.n_items, 3);
    CHECK_INT_EQ(sp.info.chunk_tokens, 64);
    check_schedule(&p, &dev, &sp, t);
    kvf__cuda_split_free(&sp);
    kvf__cuda_split_free(&sp); /* twice is fine */
}

/* Expects the build (and the problem check) to refuse with `code` and a sentence holding `msg`. */
static void expect_refusal(const problem *p, const kvf__cuda_split_device *dev, int code,
                           const char *msg) {
    kvf__cuda_split_plan sp;
    kvf_error err = {0, {0}};
    CHECK_INT_EQ(kvf__cuda_split_build(&p->pr, dev, &sp, &err), code);
    CHECK_STR_CONTAINS(err.msg, msg);
    CHECK(sp.sched == NULL);
}

static void test_refuses_what_the_kernels_do_not_take(void) {
    kvf__cuda_split_device dev = h200(64);
    problem p;
    int64_t t[2] = {100, 20};
    make_problem(&p, 34, 2, 128, 16, 2, t);
    expect_refusal(&p, &dev, KVF_EUNSUPPORTED, "GQA group 17");
    make_problem(&p, 6, 4, 128, 16, 2, t);
    expect_refusal(&p, &dev, KVF_EINVAL, "not a multiple");
    make_problem(&p, 8, 8, 96, 16, 2, t);
    expect_refusal(&p, &dev, KVF_EUNSUPPORTED, "head_dim 96");
    make_problem(&p, 8, 8, 128, 16, 2, t);
    p.pr.page_size = 0;
    expect_refusal(&p, &dev, KVF_EINVAL, "page_size 0");
    p.pr.page_size = 257;
    expect_refusal(&p, &dev, KVF_EUNSUPPORTED, "page_size 257");
    make_problem(&p, 8, 8, 128, 16, 2, t);
    p.pr.sm_scale = NAN;
    expect_refusal(&p, &dev, KVF_EINVAL, "sm_scale");
    make_problem(&p, 8, 8, 128, 16, 2, t);
    p.indptr[0] = 1;
    expect_refusal(&p, &dev, KVF_EINVAL, "kv_indptr[0] is 1");
    make_problem(&p, 8, 8, 128, 16, 2, t);
    p.indptr[2] = p.indptr[1] - 1;
    expect_refusal(&p, &dev, KVF_EINVAL, "kv_indptr decreases at index 2");
    make_problem(&p, 8, 8, 128, 16, 2, t);
    p.last[0] = 17;
    expect_refusal(&p, &dev, KVF_EINVAL, "kv_last_page_len[0] is 17");
    make_problem(&p, 8, 8, 128, 16, 2, t);
    p.pr.kv_indptr = NULL;
    expect_refusal(&p, &dev, KVF_EINVAL, "must be given");
    int64_t huge[1] = {((int64_t)1 << 30) + 1};
    make_problem(&p, 8, 8, 128, 256, 1, huge);
    expect_refusal(&p, &dev, KVF_EUNSUPPORTED, "above the CUDA kernels' maximum of 2^30");
    make_problem(&p, 8, 8, 128, 16, 2, t);
    dev.num_sms = 0;
    expect_refusal(&p, &dev, KVF_EINVAL, "at least one SM");
    /* The problem check alone agrees with the build on the same input. */
    kvf_error err = {0, {0}};
    make_problem(&p, 8, 8, 128, 16, 2, t);
    CHECK_OK(kvf__cuda_check_problem(&p.pr, &err), &err);
    p.last[1] = 0;
    CHECK_INT_EQ(kvf__cuda_check_problem(&p.pr, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "kv_last_page_len[1] is 0");
}

static void test_scale_and_group(void) {
    const float scales[] = {0.088388f, 1.0f, 0.125f, 3.0e-3f};
    for (int i = 0; i < 4; i++)
        CHECK_DBL_EQ(kvf__cuda_scale_log2(scales[i]),
                     (float)((double)scales[i] * 1.4426950408889634));
    problem p;
    make_problem(&p, 48, 4, 128, 16, 0, NULL);
    CHECK_INT_EQ(kvf__cuda_split_group(&p.pr), 12);
}

static const check_test tests[] = {
    {"schedules_cover_every_token", test_schedules_cover_every_token},
    {"heuristic_fills_one_wave", test_heuristic_fills_one_wave},
    {"longest_first_beyond_one_wave", test_longest_first_beyond_one_wave},
    {"forced_chunk_is_clamped_to_the_longest", test_forced_chunk_is_clamped_to_the_longest},
    {"empty_batch_and_empty_sequences", test_empty_batch_and_empty_sequences},
    {"refuses_what_the_kernels_do_not_take", test_refuses_what_the_kernels_do_not_take},
    {"scale_and_group", test_scale_and_group},
    {NULL, NULL},
};

CHECK_MAIN(tests)
