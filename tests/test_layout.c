/* Buffer layouts (kvfuzz/layout.h; docs/case-format.md, "Layout section"): the .kvfz section
 * round-trips and is refused out of its domain; the CPU buffer host lays every layout out so
 * that correct kernels give the dense layout's bits; the mutant page-stride-ignored is right on
 * dense pools and wrong on padded page records; supports() sees the strides and can decline; a
 * kernel that writes into the padding of o is an out-of-bounds write. */
#include <stdint.h>

#include "check.h"
#include "kernel_outputs.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/kernel_host.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

static int run(const kvf_kernel *k, const kvf_case *c, outputs *out, kvf_error *err) {
    outputs_alloc(out, c);
    return kvf_kernel_run_once(k, c, out->o, out->lse, err);
}

static int same_bits(const kvf_case *c, const outputs *a, const outputs *b) {
    return memcmp(a->o, b->o, (size_t)kvf_case_o_elems(c) * sizeof *a->o) == 0 &&
           memcmp(a->lse, b->lse, (size_t)kvf_case_lse_elems(c) * sizeof *a->lse) == 0;
}

/* A random small spec with a layout drawn for it (never the dense one). */
static int layout_spec(uint64_t seed, kvf_spec *s) {
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = 1 << 16;
    ro.allow_high_ids = 0;
    kvf_error err = {0};
    if (kvf_spec_random(s, seed, &ro, &err)) return -1;
    kvf_prng r;
    kvf_prng_seed_stream(&r, seed, 99);
    kvf_recipe_draw_layout(&s->layout, &s->recipe, &r);
    return 0;
}

static void test_section_round_trip_and_domain(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s, d;
    kvf_error err = {0};
    CHECK_INT_EQ(layout_spec(5, &s), 0);
    s.layout.q_head_pad = 8, s.layout.kv_page_pad = 1000, s.layout.kv_order = KVF_LAYOUT_HND;
    uint8_t *bytes = NULL;
    size_t n = 0;
    CHECK_OK(kvf_spec_encode(&s, &bytes, &n, &err), &err);
    CHECK(bytes[5] & 0x08); /* the layout section's bit */
    CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
    CHECK(kvf_spec_equal(&s, &d));
    CHECK_INT_EQ(d.layout.kv_page_pad, 1000);
    CHECK_INT_EQ(d.layout.kv_order, KVF_LAYOUT_HND);
    kvf_spec_free(&d);
    /* A padding past its maximum is refused by name. */
    const uint32_t big = KVF_LAYOUT_MAX_PAD + 1;
    memcpy(bytes + n - 36, &big, 4); /* the first padding: q's head stride */
    CHECK_INT_EQ(kvf_spec_decode(&d, bytes, n, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "q head padding");
    /* A section holding the dense layout is refused: the dense case has one encoding, without
     * the section. */
    memset(bytes + n - 40, 0, 40);
    CHECK_INT_EQ(kvf_spec_decode(&d, bytes, n, &lim, &err), KVF_EFORMAT);
    CHECK_STR_CONTAINS(err.msg, "holds the dense layout, which is written as no section");
    free(bytes);
    /* The dense layout writes no section: the file is the one before layouts existed. */
    memset(&s.layout, 0, sizeof s.layout);
    CHECK_OK(kvf_spec_encode(&s, &bytes, &n, &err), &err);
    CHECK(!(bytes[5] & 0x08));
    free(bytes);
    kvf_spec_free(&s);
}

/* cpu-ref and cpu-splitkv read every layout through the host and give the dense bits. */
static void test_correct_kernels_give_dense_bits(void) {
    const char *names[2] = {"cpu-ref", "cpu-splitkv"};
    kvf_limits lim;
    kvf_limits_default(&lim);
    int hnd = 0, padded_pages = 0, cases = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        kvf_spec s;
        kvf_case laid, dense;
        kvf_error err = {0};
        if (layout_spec(seed, &s)) continue;
        if (kvf_case_build(&laid, &s, &lim, &err)) {
            CHECK_FAIL_AT("seed %llu does not build: %s", (unsigned long long)seed, err.msg);
            kvf_spec_free(&s);
            continue;
        }
        memset(&s.layout, 0, sizeof s.layout);
        CHECK_OK(kvf_case_build(&dense, &s, &lim, &err), &err);
        cases++;
        hnd += laid.layout.kv_order == KVF_LAYOUT_HND;
        padded_pages += laid.layout.kv_page_pad > 64;
        for (int k = 0; k < 2; k++) {
            outputs a, b;
            const kvf_kernel *kern = kvf_kernel_find(names[k]);
            CHECK_OK(run(kern, &laid, &a, &err), &err);
            CHECK_OK(run(kern, &dense, &b, &err), &err);
            if (!same_bits(&dense, &a, &b))
                CHECK_FAIL_AT("%s: seed %llu gives other bits in its layout", names[k],
                              (unsigned long long)seed);
            outputs_free(&a);
            outputs_free(&b);
        }
        kvf_case_free(&laid);
        kvf_case_free(&dense);
        kvf_spec_free(&s);
    }
    printf("  %d cases, %d HND, %d with padded page records\n", cases, hnd, padded_pages);
    CHECK(cases >= 50 && hnd > 5 && padded_pages > 2);
}

/* The mutant agrees with cpu-splitkv on dense pools and not on padded page records. */
static void test_page_stride_mutant(void) {
    const kvf_kernel *mut = kvf_kernel_find("cpu-splitkv/mut=page-stride-ignored");
    const kvf_kernel *ref = kvf_kernel_find("cpu-splitkv");
    CHECK(mut != NULL && ref != NULL);
    if (!mut || !ref) return;
    kvf_limits lim;
    kvf_limits_default(&lim);
    int differ = 0, padded = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        kvf_spec s;
        kvf_case c;
        kvf_error err = {0};
        if (layout_spec(seed, &s)) continue;
        s.layout.kv_page_pad = 64; /* every page padded */
        for (int dense = 0; dense < 2; dense++) {
            if (dense) memset(&s.layout, 0, sizeof s.layout);
            if (kvf_case_build(&c, &s, &lim, &err)) continue;
            outputs a, b;
            CHECK_OK(run(mut, &c, &a, &err), &err);
            CHECK_OK(run(ref, &c, &b, &err), &err);
            const int same = same_bits(&c, &a, &b);
            if (dense && !same)
                CHECK_FAIL_AT("seed %llu: the mutant differs on a dense pool",
                              (unsigned long long)seed);
            if (!dense && kvf_case_total_tokens(&c) > 0) {
                padded++;
                differ += !same;
            }
            outputs_free(&a);
            outputs_free(&b);
            kvf_case_free(&c);
        }
        kvf_spec_free(&s);
    }
    printf("  page-stride-ignored differs on %d of %d padded cases\n", differ, padded);
    CHECK(differ > 0);
}

/* Test descriptors: one that takes dense buffers only and says so in supports(), one that
 * writes o's padding. */
static int dense_only(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why,
                      size_t n) {
    (void)self;
    const int dense = s->q_stride_head == s->head_dim && s->o_stride_head == s->head_dim &&
                      s->kv_stride_head == s->head_dim &&
                      s->kv_stride_slot == (int64_t)s->num_kv_heads * s->head_dim;
    if (!dense) snprintf(why, n, "dense rows only");
    return dense;
}

/* Writes every output with zeros, and the element after each o row (padding when the head
 * stride is padded). */
static int write_padding(void *state, const kvf_plugin_args *a, char *msg, size_t n) {
    (void)state, (void)msg, (void)n;
    const kvf_plugin_shape *s = a->shape;
    for (int64_t b = 0; b < s->batch_size; b++)
        for (int64_t h = 0; h < s->num_qo_heads; h++) {
            uint16_t *row = a->o + b * a->o_stride_batch + h * a->o_stride_head;
            memset(row, 0, (size_t)s->head_dim * 2);
            if (a->o_stride_head > s->head_dim) row[s->head_dim] = 0;
            a->lse[b * a->lse_stride_batch + h] = 0.f;
        }
    return KVF_PLUGIN_OK;
}

static void test_supports_and_padding(void) {
    kvf_plugin_kernel d = {.struct_size = sizeof d,
                           .name = "test-layout",
                           .description = "test",
                           .device = KVF_PLUGIN_DEVICE_CPU,
                           .supports = dense_only,
                           .run = write_padding};
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s;
    kvf_case c;
    kvf_error err = {0};
    CHECK_INT_EQ(layout_spec(3, &s), 0);
    memset(&s.layout, 0, sizeof s.layout);
    s.layout.o_head_pad = 8;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    kvf_host *h = NULL;
    CHECK_OK(kvf_host_create(&d, &h, &err), &err);
    outputs out;
    outputs_alloc(&out, &c);
    CHECK_INT_EQ(kvf_host_run(h, &c, out.o, out.lse, &err), KVF_EUNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "dense rows only");
    kvf_host_destroy(h);
    d.supports = all_shapes;
    CHECK_OK(kvf_host_create(&d, &h, &err), &err);
    if (c.batch_size > 0) {
        CHECK_INT_EQ(kvf_host_run(h, &c, out.o, out.lse, &err), KVF_EOOBWRITE);
        CHECK_STR_CONTAINS(err.msg, "o's padding");
    }
    kvf_host_destroy(h);
    outputs_free(&out);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

static const check_test tests[] = {
    {"section_round_trip_and_domain", test_section_round_trip_and_domain},
    {"correct_kernels_give_dense_bits", test_correct_kernels_give_dense_bits},
    {"page_stride_mutant", test_page_stride_mutant},
    {"supports_and_padding", test_supports_and_padding},
    {NULL, NULL},
};

CHECK_MAIN(tests)
