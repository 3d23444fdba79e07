/* Quantized caches through the CPU buffer host (kernels/host_cpu.c, builtin.c; docs/plugins.md,
 * "FP8 caches"): a kernel that does not declare FP8 caches never gets them; the bytes and
 * scales a declaring kernel reads are the case's, under every layout (cpu-ref through the host
 * gives the bits of cpu-ref on the case itself); a write into an FP8 page, its padding or the
 * scales is an input-modified or out-of-bounds-write finding naming the byte. */
#include <stdint.h>

#include "check.h"
#include "kernel_outputs.h"
#include "kvfuzz/builtin_kernel.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/kernel_host.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* A small random spec with FP8 caches at `gran` and, when `laid_out`, a layout. */
static int quant_spec(uint64_t seed, int gran, int laid_out, kvf_spec *s) {
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = 1 << 15;
    ro.allow_high_ids = 0;
    ro.layouts = 0;
    kvf_error err = {0};
    if (kvf_spec_random(s, seed, &ro, &err)) return -1;
    kvf_prng r;
    kvf_prng_seed_stream(&r, seed, 77);
    do
        kvf_recipe_draw_quant(&s->quant, &s->recipe, &r);
    while (s->quant.kv.granularity == KVF_SCALE_NONE);
    s->quant.kv.granularity = (uint8_t)gran;
    if (gran == KVF_SCALE_TENSOR) s->quant.spread = s->quant.fine = 0;
    if (laid_out) kvf_recipe_draw_layout(&s->layout, &s->recipe, &r);
    return 0;
}

/* cpu-ref through the buffer host against cpu-ref on the case: the same bits, so the bytes, the
 * scales and (for per-slot scales) their pages reached the kernel as the case holds them. */
static void host_gives_the_case(void) {
    const kvf_kernel *ref = kvf_kernel_find("cpu-ref");
    CHECK(ref && kvf_kernel_takes_quant(ref));
    kvf_limits lim;
    kvf_limits_default(&lim);
    int ran = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        kvf_spec s;
        if (quant_spec(seed, KVF_SCALE_TENSOR + (int)(seed % 3), seed % 2 == 0, &s)) continue;
        kvf_case c;
        kvf_error err = {0};
        if (kvf_case_build(&c, &s, &lim, &err)) {
            CHECK_FAIL_AT("seed %llu: %s", (unsigned long long)seed, err.msg);
            kvf_spec_free(&s);
            continue;
        }
        outputs a, b;
        outputs_alloc(&a, &c);
        outputs_alloc(&b, &c);
        CHECK_OK(kvf_kernel_run_once(ref, &c, a.o, a.lse, &err), &err);
        CHECK_OK(kvf__cpu_ref_compute(&c, b.o, b.lse, &err), &err);
        if (memcmp(a.o, b.o, (size_t)kvf_case_o_elems(&c) * 2) ||
            memcmp(a.lse, b.lse, (size_t)kvf_case_lse_elems(&c) * 4))
            CHECK_FAIL_AT("seed %llu (%s caches): the host's run differs from the case's",
                          (unsigned long long)seed,
                          kvf_scale_granularity_name(c.quant.granularity));
        ran += c.batch_size > 0;
        outputs_free(&a);
        outputs_free(&b);
        kvf_case_free(&c);
        kvf_spec_free(&s);
    }
    CHECK(ran >= 12);
}

/* What the misbehaving kernel below does. */
static int misdeed;

static int misbehave(void *state, const kvf_plugin_args *a, char *msg, size_t n) {
    (void)state, (void)msg, (void)n;
    const kvf_plugin_shape *s = a->shape;
    for (int64_t b = 0; b < s->batch_size; b++)
        for (int64_t h = 0; h < s->num_qo_heads; h++) {
            for (int64_t d = 0; d < s->head_dim; d++)
                a->o[b * a->o_stride_batch + h * a->o_stride_head + d] = 0;
            a->lse[b * a->lse_stride_batch + h] = 0;
        }
    uint8_t *k8 = (uint8_t *)(uintptr_t)a->k_cache;
    const int64_t page = a->kv_indices[0];
    if (misdeed == 1) k8[page * a->kv_stride_page] ^= 1;               /* slot 0, head 0, d 0 */
    if (misdeed == 2) k8[page * a->kv_stride_page + s->head_dim] ^= 1; /* the row's padding */
    if (misdeed == 3) ((float *)(uintptr_t)a->v_scale)[0] *= 2;
    return KVF_PLUGIN_OK;
}

static void writes_are_findings(void) {
    kvf_plugin_kernel d = {.struct_size = sizeof d,
                           .name = "test-quant",
                           .description = "test",
                           .device = KVF_PLUGIN_DEVICE_CPU,
                           .supports = all_shapes,
                           .run = misbehave};
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s;
    kvf_case c;
    kvf_error err = {0};
    uint64_t seed = 1;
    do {
        CHECK_INT_EQ(quant_spec(seed++, KVF_SCALE_HEAD, 0, &s), 0);
        s.layout.kv_row_pad = 8; /* padding after each row of every page */
        CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
        if (c.batch_size > 0 && c.kv_indptr[1] > 0) break;
        kvf_case_free(&c);
        kvf_spec_free(&s);
    } while (seed < 50);
    outputs out;
    outputs_alloc(&out, &c);
    kvf_host *h = NULL;
    /* Without the masks: bf16 only, supports() never asked. */
    CHECK_OK(kvf_host_create(&d, &h, &err), &err);
    CHECK_INT_EQ(kvf_host_run(h, &c, out.o, out.lse, &err), KVF_EUNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "takes only bf16 caches");
    kvf_host_destroy(h);
    d.kv_dtypes = KVF_PLUGIN_KV_E4M3 | KVF_PLUGIN_KV_E5M2;
    d.scale_granularities = KVF_PLUGIN_SCALE_TENSOR;
    CHECK_OK(kvf_host_create(&d, &h, &err), &err);
    CHECK_INT_EQ(kvf_host_run(h, &c, out.o, out.lse, &err), KVF_EUNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "head scales");
    kvf_host_destroy(h);
    d.scale_granularities |= KVF_PLUGIN_SCALE_HEAD;
    CHECK_OK(kvf_host_create(&d, &h, &err), &err);
    static const struct {
        int code;
        const char *words;
    } want[] = {{0, ""},
                {KVF_EINPUTMOD, "k_cache at page"},
                {KVF_EOOBWRITE, "padding of k_cache"},
                {KVF_EINPUTMOD, "input v_scale"}};
    for (misdeed = 0; misdeed < 4; misdeed++) {
        int rc = kvf_host_run(h, &c, out.o, out.lse, &err);
        CHECK_INT_EQ(rc, want[misdeed].code);
        if (rc) CHECK_STR_CONTAINS(err.msg, want[misdeed].words);
        if (misdeed == 1) CHECK_STR_CONTAINS(err.msg, "byte 0x");
    }
    kvf_host_destroy(h);
    outputs_free(&out);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

static const check_test tests[] = {
    {"host_gives_the_case", host_gives_the_case},
    {"writes_are_findings", writes_are_findings},
    {NULL, NULL},
};

CHECK_MAIN(tests)
