/* kvfuzz_corpus_gen: writes the committed seed corpora (corpus/fuzz_decode_cpu,
 * corpus/fuzz_decode_cuda, corpus/fuzz_case). Each case is small enough for hundreds of
 * executions a second and probes one thing, named in its file name: every page-table strategy,
 * logit pattern, value distribution and poison bit, the lengths 0, 1, S-1, S, S+1 and the
 * 32-token tile edges, GQA groups 1 to 16 with 5 and 7, page sizes 1 to 256, odd sm_scale values,
 * single-entry and single-value overrides, explicit tensors; the decoder corpus adds malformed
 * files. Regenerate with `kvfuzz_corpus_gen decode|cuda|case DIR` (deterministic); `seeds DIR`
 * writes the two large cases of corpus/seeds.
 *
 * Usage errors exit 2; a case that does not build exits 1 (the generator and this list
 * disagree). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/mutate.h"
#include "kvfuzz/spec.h"

typedef struct seq_list {
    int n;
    int len[4];
} seq_list;

static const char *out_dir;
static int written, failures, want_cuda;
static kvf_limits limits;
static kvf_mutate_limits mlim;

static void set_len(kvf_recipe *rp, int b, int len) {
    if (len == 0) {
        rp->num_pages[b] = rp->last_page_len[b] = 0;
        return;
    }
    int n = (len + rp->page_size - 1) / rp->page_size;
    rp->num_pages[b] = (uint16_t)n;
    rp->last_page_len[b] = (uint16_t)(len - (n - 1) * rp->page_size);
}

static kvf_spec base(int hq, int hk, int d, int s, seq_list lens) {
    kvf_spec sp;
    memset(&sp, 0, sizeof sp);
    kvf_recipe *rp = &sp.recipe;
    rp->num_qo_heads = (uint8_t)hq;
    rp->num_kv_heads = (uint8_t)hk;
    rp->head_dim = (uint16_t)d;
    rp->page_size = (uint16_t)s;
    rp->table = KVF_TABLE_SHUFFLED;
    rp->spare_pages = 1;
    rp->sm_scale = (float)(1.0 / sqrt((double)d));
    rp->seed = (uint64_t)written + 1;
    if (kvf_spec_set_batch(&sp, (uint16_t)lens.n, NULL)) exit(1);
    for (int b = 0; b < lens.n; b++)
        set_len(rp, b, lens.len[b]);
    return sp;
}

/* The seed workload's shape (Qwen3-14B at TP=2: Hq 20, Hk 4, D 128) with small pages. */
static kvf_spec seedlike(seq_list lens) {
    return base(20, 4, 128, 16, lens);
}

static seq_list L1(int a) {
    return (seq_list){1, {a}};
}
static seq_list L2(int a, int b) {
    return (seq_list){2, {a, b}};
}
static seq_list L3(int a, int b, int c) {
    return (seq_list){3, {a, b, c}};
}
static seq_list L4(int a, int b, int c, int d) {
    return (seq_list){4, {a, b, c, d}};
}

static void write_bytes(const char *name, const uint8_t *data, size_t size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%02d-%s.kvfz", out_dir, written, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "kvfuzz_corpus_gen: cannot write %s\n", path);
        exit(1);
    }
    written++;
}

/* Writes a valid case (checking that it builds and fits the fuzzers' budget). */
static void emit(const char *name, kvf_spec *sp) {
    if (want_cuda &&
        (sp->recipe.head_dim != 64 && sp->recipe.head_dim != 128 && sp->recipe.head_dim != 256)) {
        kvf_spec_free(sp);
        return; /* the CUDA kernels take D in {64, 128, 256} only */
    }
    kvf_case c;
    kvf_error err = {0};
    if (kvf_case_build(&c, sp, &limits, &err)) {
        fprintf(stderr, "kvfuzz_corpus_gen: %s does not build: %s\n", name, err.msg);
        failures++;
    } else {
        kvf_case_free(&c);
        if (kvf_spec_work(sp) > 4 * mlim.max_work ||
            kvf_spec_pool_elems(sp) > 4 * mlim.max_pool_elems) {
            fprintf(stderr, "kvfuzz_corpus_gen: %s is beyond the fuzzing budget\n", name);
            failures++;
        }
    }
    uint8_t *bytes;
    size_t size;
    if (kvf_spec_encode(sp, &bytes, &size, &err)) {
        fprintf(stderr, "kvfuzz_corpus_gen: %s does not encode: %s\n", name, err.msg);
        exit(1);
    }
    write_bytes(name, bytes, size);
    free(bytes);
    kvf_spec_free(sp);
}

static void add_override(kvf_spec *sp, uint8_t target, uint64_t index, uint32_t value) {
    sp->overrides = realloc(sp->overrides, (sp->num_overrides + 1) * sizeof *sp->overrides);
    if (!sp->overrides) exit(1);
    sp->overrides[sp->num_overrides++] = (kvf_override){target, index, value};
}

/* Shapes around the seed case's: lengths, empty sequences, tile edges. */
static void decode_shapes(void) {
    kvf_spec s;
    s = seedlike(L1(49));
    emit("seed-shape-49-tokens", &s);
    s = seedlike(L4(0, 1, 17, 33));
    emit("mixed-lengths-0-1-17-33", &s);
    s = seedlike((seq_list){0, {0}});
    emit("empty-batch", &s);
    s = seedlike(L2(0, 0));
    emit("all-sequences-empty", &s);
    s = seedlike(L1(1));
    emit("one-token", &s);
    s = seedlike(L3(15, 16, 17));
    emit("lengths-15-16-17-page-16", &s);
    s = base(4, 1, 64, 16, L3(31, 32, 33));
    emit("tile-edges-31-32-33", &s);
    s = base(8, 2, 64, 16, L2(65, 97));
    emit("several-chunks-65-97", &s);
}

/* Each page-table layout, high page ids and scattered pages with spares. */
static void decode_tables(void) {
    kvf_spec s;
    static const char *const tables[] = {"contiguous", "shuffled", "reversed", "shared-prefix"};
    for (int t = 0; t < 4; t++) {
        char name[64];
        snprintf(name, sizeof name, "table-%s", tables[t]);
        s = base(8, 2, 64, 16, L3(48, 40, 33));
        s.recipe.table = (uint8_t)t;
        emit(name, &s);
    }
    /* High ids: page * page_elems crosses 2^31 elements (page_elems = 16 * 2 * 128 = 4096),
     * and ids past 65535. */
    s = base(8, 2, 128, 16, L2(40, 17));
    s.recipe.table = KVF_TABLE_HIGH_IDS;
    s.recipe.page_id_base = (1u << 31) / 4096 - 2;
    emit("table-high-ids-past-2p31-elements", &s);
    s = base(8, 2, 128, 16, L2(40, 17));
    s.recipe.table = KVF_TABLE_HIGH_IDS;
    s.recipe.page_id_base = 65534;
    emit("table-high-ids-past-65535", &s);
    s = base(8, 2, 64, 16, L3(48, 20, 5));
    s.recipe.table = KVF_TABLE_SCATTERED;
    s.recipe.spare_pages = 8;
    emit("table-scattered-spares", &s);
}

/* Logit patterns, value distributions and poisoned unused slots. */
static void decode_values(void) {
    kvf_spec s;
    static const char *const logits[] = {"equal",         "near-tie", "spike",
                                         "very-negative", "huge",     "beyond-f32"};
    for (int l = 0; l < 6; l++) {
        char name[64];
        snprintf(name, sizeof name, "logits-%s", logits[l]);
        s = base(10, 2, 64, 16, L2(40, 9));
        s.recipe.logits = (uint8_t)(l + 1);
        emit(name, &s);
    }
    for (int k = 0; k < KVF_DIST_COUNT; k++) {
        char name[64];
        snprintf(name, sizeof name, "values-%s", kvf_dist_name(k));
        s = base(8, 2, 64, 16, L2(37, 12));
        /* bf16 extremes in q or k put logits past f32 (the overflow class): v only there. */
        int qk = k == KVF_DIST_SPECIAL ? KVF_DIST_LOG_UNIFORM : k;
        s.recipe.q = (kvf_dist){(uint8_t)qk, 0, 6};
        s.recipe.k = (kvf_dist){(uint8_t)qk, -1, 6};
        s.recipe.v = (kvf_dist){(uint8_t)k, 2, 3};
        emit(name, &s);
    }
    s = base(8, 2, 64, 16, L2(37, 12));
    s.recipe.v = (kvf_dist){KVF_DIST_LOG_UNIFORM, 0, 60};
    emit("values-v-log-uniform-wide", &s);
    static const char *const poisons[] = {"tail-nan", "tail-inf", "unref-nan", "unref-inf"};
    for (int p = 0; p < 4; p++) {
        char name[64];
        snprintf(name, sizeof name, "poison-%s", poisons[p]);
        s = base(8, 2, 64, 16, L3(21, 7, 0));
        s.recipe.poison = (uint8_t)(1u << p);
        s.recipe.spare_pages = 3;
        emit(name, &s);
    }
    s = base(8, 2, 64, 16, L3(21, 7, 1));
    s.recipe.poison = KVF_POISON_ALL;
    s.recipe.table = KVF_TABLE_SCATTERED;
    emit("poison-all-scattered", &s);
}

/* GQA group sizes and page sizes. */
static void decode_groups_pages(void) {
    kvf_spec s;
    s = base(10, 2, 128, 16, L2(30, 19));
    emit("gqa-group-5", &s);
    s = base(7, 1, 128, 16, L2(30, 19));
    emit("gqa-group-7", &s);
    s = base(16, 1, 256, 16, L1(25));
    emit("gqa-group-16-d256", &s);
    s = base(8, 8, 64, 16, L2(9, 16));
    emit("gqa-group-1-eight-kv-heads", &s);
    s = base(4, 2, 64, 1, L3(5, 1, 0));
    emit("page-size-1", &s);
    s = base(4, 2, 64, 3, L3(7, 3, 2));
    emit("page-size-3", &s);
    s = base(4, 1, 64, 64, L3(63, 64, 65));
    emit("page-size-64-edges", &s);
    s = base(2, 1, 64, 256, L2(255, 257));
    emit("page-size-256", &s);
}

/* Softmax scales: 1, 0, negative, tiny and huge. */
static void decode_scales(void) {
    kvf_spec s;
    s = base(8, 2, 64, 16, L2(33, 5));
    s.recipe.sm_scale = 1.0f;
    emit("sm-scale-1", &s);
    s = base(8, 2, 64, 16, L2(33, 5));
    s.recipe.sm_scale = 0.0f;
    emit("sm-scale-0", &s);
    s = base(8, 2, 64, 16, L2(33, 5));
    s.recipe.sm_scale = -0.125f;
    emit("sm-scale-negative", &s);
    s = base(8, 2, 64, 16, L2(33, 5));
    s.recipe.sm_scale = (float)ldexp(1.0, -100);
    emit("sm-scale-tiny", &s);
    s = base(8, 2, 64, 16, L2(33, 5));
    s.recipe.sm_scale = (float)ldexp(1.0, 12);
    emit("sm-scale-huge", &s);
}

static void decode_overrides(void) {
    kvf_spec s;
    /* Overrides. Table of L3(40, 20, 9) at S 16: entries [0..2] seq 0, [3..4] seq 1, [5] seq 2. */
    s = base(8, 2, 64, 16, L3(40, 20, 9));
    s.recipe.table = KVF_TABLE_CONTIGUOUS;
    add_override(&s, KVF_OVERRIDE_TABLE_ENTRY, 4, 0); /* seq 1's last page aliases seq 0's first */
    emit("override-aliased-page", &s);
    s = base(8, 2, 64, 16, L3(40, 20, 9));
    s.recipe.table = KVF_TABLE_CONTIGUOUS;
    s.recipe.spare_pages = 4;
    add_override(&s, KVF_OVERRIDE_TABLE_ENTRY, 0, 9); /* the pool's last (spare) page */
    emit("override-highest-page", &s);
    /* Referenced values stay finite (the default input domain, docs/design.md §4). */
    s = base(8, 2, 64, 16, L2(40, 20));
    add_override(&s, KVF_OVERRIDE_Q, 70, 0x0001);
    emit("override-q-min-subnormal", &s);
    s = base(8, 2, 64, 16, L2(40, 20));
    s.recipe.table = KVF_TABLE_CONTIGUOUS;
    add_override(&s, KVF_OVERRIDE_K, 5 * 128 + 3, 0x4780); /* page 0, slot 5, head 0: 65536 */
    emit("override-k-65536-used-slot", &s);
    s = base(8, 2, 64, 16, L2(40, 20));
    s.recipe.table = KVF_TABLE_CONTIGUOUS;
    add_override(&s, KVF_OVERRIDE_V, (2 * 16 + 12) * 128 + 7,
                 0xFFC1); /* page 2, slot 12 > 8 used */
    emit("override-v-nan-tail-slot", &s);
    s = base(8, 2, 64, 16, L2(40, 20));
    s.recipe.table = KVF_TABLE_CONTIGUOUS;
    add_override(&s, KVF_OVERRIDE_V, 7 * 128 + 64 + 1, 0x7F7F);
    emit("override-v-bf16-max", &s);
    s = base(8, 2, 64, 16, L2(40, 20));
    add_override(&s, KVF_OVERRIDE_LAST_LEN, 1, 16);
    emit("override-last-page-len", &s);
}

static void decode_explicit(void) {
    kvf_spec s;
    /* Explicit tensors: two sequences of 3 and 1 tokens, S 2, Hq 2, Hk 1, D 4, pool of 3. */
    s = base(2, 1, 4, 2, L2(3, 1));
    s.has_explicit = 1;
    kvf_explicit *ex = &s.explicit_tensors;
    ex->num_pages = 3;
    ex->kv_indices = malloc(3 * sizeof *ex->kv_indices);
    ex->q = malloc(16 * sizeof *ex->q);
    ex->k_cache = malloc(24 * sizeof *ex->k_cache);
    ex->v_cache = malloc(24 * sizeof *ex->v_cache);
    if (!ex->kv_indices || !ex->q || !ex->k_cache || !ex->v_cache) exit(1);
    ex->kv_indices[0] = 2, ex->kv_indices[1] = 0, ex->kv_indices[2] = 2;
    for (int i = 0; i < 16; i++)
        ex->q[i] = kvf_f32_to_bf16_rne((float)(i % 5) - 2.0f);
    for (int i = 0; i < 24; i++) {
        ex->k_cache[i] = kvf_f32_to_bf16_rne(0.25f * (float)((i * 7) % 9) - 1.0f);
        ex->v_cache[i] = kvf_f32_to_bf16_rne((float)((i * 5) % 11) - 5.0f);
    }
    emit("explicit-tensors-shared-page", &s);
}

/* Head dims 1 and 96, the most pages a sequence has, full last pages. */
static void decode_edges(void) {
    kvf_spec s;
    s = base(2, 1, 1, 16, L2(20, 3));
    emit("head-dim-1", &s);
    s = base(4, 2, 96, 16, L2(20, 3));
    emit("head-dim-96", &s);
    s = base(4, 1, 64, 16, L4(128, 127, 1, 0));
    emit("batch-4-max-pages", &s);
    /* Every last page full: a kernel that reads past the last used slot gets it right here
     * (tests start from this case to show the fuzzers move off it). */
    s = base(8, 2, 64, 16, L2(32, 48));
    emit("full-last-pages", &s);
}

/* The decode corpus, which the case corpus starts from. */
static void decode_corpus(void) {
    decode_shapes();
    decode_tables();
    decode_values();
    decode_groups_pages();
    decode_scales();
    decode_overrides();
    decode_explicit();
    decode_edges();
}

static void case_corpus(void) {
    decode_corpus();
    /* NaN and inf at referenced positions: outside the default input domain, but the decoder
     * and the case build must take them. */
    kvf_spec n1 = base(8, 2, 64, 16, L2(40, 20));
    add_override(&n1, KVF_OVERRIDE_Q, 70, 0x7FC0);
    emit("override-q-nan", &n1);
    n1 = base(8, 2, 64, 16, L2(40, 20));
    n1.recipe.table = KVF_TABLE_CONTIGUOUS;
    add_override(&n1, KVF_OVERRIDE_K, 5 * 128 + 3, 0x7F80);
    emit("override-k-inf-used-slot", &n1);
    /* Malformed files: each rejected with a sentence naming its field. */
    kvf_spec s = seedlike(L2(17, 3));
    uint8_t *good;
    size_t n;
    if (kvf_spec_encode(&s, &good, &n, NULL)) exit(1);
    kvf_spec_free(&s);
    uint8_t bad[256];
    memcpy(bad, good, n);
    write_bytes("bad-truncated", good, 30);
    write_bytes("bad-empty", good, 0);
    memcpy(bad, good, n), bad[0] = 'X';
    write_bytes("bad-magic", bad, n);
    memcpy(bad, good, n), bad[4] = 3; /* versions 1 and 2 are known */
    write_bytes("bad-version", bad, n);
    memcpy(bad, good, n), bad[19] = 1;
    write_bytes("bad-reserved-byte", bad, n);
    memcpy(bad, good, n), bad[9] = 3; /* Hk 3 does not divide Hq 20 */
    write_bytes("bad-heads-not-divisible", bad, n);
    memcpy(bad, good, n), bad[54] = 17, bad[55] = 0; /* last_page_len 17 > S 16 */
    write_bytes("bad-last-page-len", bad, n);
    memcpy(bad, good, n), bad[16] = 9;
    write_bytes("bad-table-kind", bad, n);
    memcpy(bad, good, n), memcpy(bad + 28, "\x00\x00\xc0\x7f", 4); /* sm_scale NaN */
    write_bytes("bad-sm-scale-nan", bad, n);
    memcpy(bad, good, n), bad[n] = 0;
    write_bytes("bad-trailing-byte", bad, n + 1);
    memcpy(bad, good, n), bad[5] = 1; /* overrides flagged, none follow */
    write_bytes("bad-missing-overrides", bad, n);
    s = seedlike(L2(17, 3));
    add_override(&s, KVF_OVERRIDE_TABLE_ENTRY, 1, 1000);
    uint8_t *b2;
    size_t n2;
    if (kvf_spec_encode(&s, &b2, &n2, NULL)) exit(1);
    write_bytes("bad-override-page-outside-pool", b2, n2);
    free(b2);
    kvf_spec_free(&s);
    free(good);
}

/* The large seeds of corpus/seeds (docs/fuzzing.md, "Reach"), beside the presets there: one
 * sequence of 32,768 tokens, and a batch of 64 sequences of mixed lengths (1 to 1,000 tokens
 * around the page and 32-token tile edges, 12,564 in all; none empty, so each judges as a
 * plain in-model case under every rule). Few heads (Hq 4, Hk 1, D 128) keep the oracle's work
 * near that of a few seed workloads. Written under their corpus/seeds names; beyond the fuzzers'
 * budget on purpose (a campaign fits what it mutates). */
static void write_named(const char *name, kvf_spec *sp) {
    kvf_case c;
    kvf_error err = {0};
    if (kvf_case_build(&c, sp, &limits, &err)) {
        fprintf(stderr, "kvfuzz_corpus_gen: %s does not build: %s\n", name, err.msg);
        exit(1);
    }
    kvf_case_free(&c);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.kvfz", out_dir, name);
    if (kvf_spec_save(sp, path, &err)) {
        fprintf(stderr, "kvfuzz_corpus_gen: %s\n", err.msg);
        exit(1);
    }
    kvf_spec_free(sp);
    written++;
}

static void seeds_corpus(void) {
    kvf_spec sp = base(4, 1, 128, 64, L1(32768));
    sp.recipe.seed = 32768;
    write_named("18-long-32k", &sp);
    static const int pattern[16] = {1,   31,  32,  33,  63,  64,  65,  127,
                                    128, 129, 200, 255, 256, 257, 500, 1000};
    kvf_spec wide = base(4, 1, 128, 16, L1(1));
    wide.recipe.seed = 64;
    if (kvf_spec_set_batch(&wide, 64, NULL)) exit(1);
    for (int b = 0; b < 64; b++) /* the pattern in four rotations, so neighbours differ */
        set_len(&wide.recipe, b, pattern[(b + b / 16) % 16]);
    write_named("19-batch64-mixed", &wide);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "decode") && strcmp(argv[1], "cuda") &&
                      strcmp(argv[1], "case") && strcmp(argv[1], "seeds"))) {
        fprintf(stderr, "usage: kvfuzz_corpus_gen decode|cuda|case|seeds DIR\n");
        return 2;
    }
    out_dir = argv[2];
    kvf_limits_default(&limits);
    kvf_mutate_limits_default(&mlim);
    /* The shipped corpora keep the bits they were generated with: dense layouts; the fuzzers'
     * mutations add layouts where the target's kernel takes them. */
    mlim.allow_layouts = 0;
    want_cuda = strcmp(argv[1], "cuda") == 0;
    if (strcmp(argv[1], "case") == 0)
        case_corpus();
    else if (strcmp(argv[1], "seeds") == 0)
        seeds_corpus();
    else
        decode_corpus();
    printf("kvfuzz_corpus_gen: wrote %d case(s) to %s\n", written, out_dir);
    return failures ? 1 : 0;
}
