/* The generator's output, pinned bit for bit: hashes of the expanded tensors of every preset
 * and of sets of random recipes, under each expansion. Expansion 1's values were recorded from
 * the generator before any change to its speed, expansion 2's when it was introduced. Stored
 * corpus files and seeds (version 1 files) mean their bits only as long as these hold
 * (docs/case-format.md, "Expansion" and "Expansion 2"). The hash is computed here (FNV-1a over
 * every field the generator writes, resident pages by id), independent of the library's own
 * helpers.
 *
 * KVF_GEN_HASH_PRINT=1 (or 2) prints the tables of expansion 1 (or 2) instead of checking. */
#include <dirent.h>
#include <stdint.h>

#include "check.h"

#include "kvfuzz/fp8.h"
#include "kvfuzz/spec.h"

typedef struct fnv {
    uint64_t h;
} fnv;

static void fnv_bytes(fnv *f, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        f->h ^= p[i];
        f->h *= 0x100000001B3ull;
    }
}

static void fnv_i64(fnv *f, int64_t v) {
    fnv_bytes(f, &v, sizeof v);
}

static uint64_t case_hash(const kvf_case *c) {
    fnv f = {0xCBF29CE484222325ull};
    fnv_i64(&f, c->num_qo_heads);
    fnv_i64(&f, c->num_kv_heads);
    fnv_i64(&f, c->head_dim);
    fnv_i64(&f, c->page_size);
    fnv_i64(&f, c->batch_size);
    fnv_i64(&f, c->num_pages);
    fnv_i64(&f, kvf_f32_bits(c->sm_scale));
    fnv_bytes(&f, c->kv_indptr, ((size_t)c->batch_size + 1) * 4);
    fnv_bytes(&f, c->kv_last_page_len, (size_t)c->batch_size * 4);
    fnv_bytes(&f, c->kv_indices, (size_t)c->kv_indptr[c->batch_size] * 4);
    fnv_bytes(&f, c->q, (size_t)kvf_case_q_elems(c) * 2);
    fnv_i64(&f, c->num_resident_pages);
    int64_t pe = kvf_case_page_elems(c);
    for (int64_t i = 0; i < c->num_resident_pages; i++) {
        int64_t p = c->resident_pages[i];
        fnv_i64(&f, p);
        fnv_bytes(&f, c->k_cache + p * pe, (size_t)pe * 2);
        fnv_bytes(&f, c->v_cache + p * pe, (size_t)pe * 2);
    }
    /* FP8 caches: the dtypes and every scale (bf16 cases hash as they always have). */
    if (!kvf_kv_quant_is_plain(&c->quant)) {
        fnv_i64(&f, c->quant.k_dtype);
        fnv_i64(&f, c->quant.v_dtype);
        fnv_i64(&f, c->quant.granularity);
        int64_t ns = kvf_case_scale_count(c);
        for (int64_t i = 0; i < ns; i++) {
            fnv_i64(&f, kvf_f32_bits(c->k_scale[i]));
            fnv_i64(&f, kvf_f32_bits(c->v_scale[i]));
        }
    }
    return f.h;
}

/* 0, or the expansion whose tables are printed. */
static int print_mode(void) {
    const char *e = getenv("KVF_GEN_HASH_PRINT");
    return e && strcmp(e, "1") == 0 ? 1 : e && strcmp(e, "2") == 0 ? 2 : 0;
}

/* Hash of one built spec; 0 with a failed check if it does not build. */
static uint64_t build_hash(const kvf_spec *s, const char *what) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_case c;
    kvf_error err = {0};
    if (kvf_case_build(&c, s, &lim, &err)) {
        CHECK_FAIL_AT("%s does not build: %s", what, err.msg);
        return 0;
    }
    uint64_t h = case_hash(&c);
    kvf_case_free(&c);
    return h;
}

typedef struct preset_hash {
    const char *name;
    uint64_t seed, hash;
} preset_hash;

/* Expansion 1: recorded with the generator as it was before its speed-up (commit
 * "test_gen_hash: pin the generator's output"). Presets at seeds 1 and 77. */
static const preset_hash preset_hashes[] = {
#include "gen_hashes_presets.inc"
};

/* Expansion 2: recorded when it was introduced. */
static const preset_hash preset_hashes2[] = {
#include "gen_hashes2_presets.inc"
};

/* Digests (FNV-1a of the per-case hashes in order) of random recipe sets. */
typedef struct random_set {
    const char *name;
    int32_t max_batch, max_pages, max_tokens;
    int64_t max_work;
    int count;
    uint64_t first_seed;
    uint64_t digest;
} random_set;

static const random_set random_sets[] = {
#include "gen_hashes_random.inc"
};

static const random_set random_sets2[] = {
#include "gen_hashes2_random.inc"
};

static void check_presets(int expansion, const preset_hash *recorded, size_t nrecorded) {
    static const uint64_t seeds[] = {1, 77};
    size_t k = 0;
    if (print_mode() && print_mode() != expansion) return;
    for (size_t i = 0; i < kvf_preset_count(); i++)
        for (size_t j = 0; j < sizeof seeds / sizeof seeds[0]; j++, k++) {
            kvf_spec s;
            kvf_error err = {0};
            CHECK_OK(kvf_spec_preset(&s, kvf_preset_name(i), seeds[j], &err), &err);
            s.recipe.expansion = (uint8_t)expansion;
            uint64_t h = build_hash(&s, kvf_preset_name(i));
            kvf_spec_free(&s);
            if (print_mode()) {
                printf("    {\"%s\", %llu, 0x%016llxull},\n", kvf_preset_name(i),
                       (unsigned long long)seeds[j], (unsigned long long)h);
                continue;
            }
            if (k >= nrecorded) {
                CHECK_FAIL_AT("preset %s has no recorded hash (expansion %d)", kvf_preset_name(i),
                              expansion);
                continue;
            }
            CHECK(strcmp(recorded[k].name, kvf_preset_name(i)) == 0);
            CHECK_INT_EQ(recorded[k].seed, seeds[j]);
            if (h != recorded[k].hash)
                CHECK_FAIL_AT("preset %s seed %llu expands to 0x%016llx under expansion %d, "
                              "recorded 0x%016llx",
                              kvf_preset_name(i), (unsigned long long)seeds[j],
                              (unsigned long long)h, expansion,
                              (unsigned long long)recorded[k].hash);
        }
}

static void test_presets_expand_to_recorded_bits(void) {
    check_presets(KVF_EXPANSION_1, preset_hashes, sizeof preset_hashes / sizeof preset_hashes[0]);
}

static void test_presets_expand_to_recorded_bits_expansion2(void) {
    check_presets(KVF_EXPANSION_2, preset_hashes2,
                  sizeof preset_hashes2 / sizeof preset_hashes2[0]);
}

/* Every table kind, distribution, logit pattern and poison bit comes out of these sets
 * (test_spec checks the coverage of kvf_spec_random); the large set reaches long sequences
 * and wide batches. */
static const random_set random_shapes[] = {
    {"campaign-small", 4, 8, 2048, (int64_t)1 << 17, 400, 1, 0},
    {"default", 4, 8, 2048, (int64_t)1 << 21, 200, 100001, 0},
    {"large", 64, 64, 1 << 16, (int64_t)1 << 24, 10, 200001, 0},
};

/* A layout is drawn from a stream of its own after everything else: the same seed with and
 * without layouts gives the same recipe fields and the same tensors, bit for bit, and some of
 * the recipes do get a layout. */
static void test_layouts_change_no_value(void) {
    kvf_random_opts with, without;
    kvf_random_opts_default(&with);
    kvf_random_opts_default(&without);
    without.layouts = 0;
    int laid_out = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        kvf_spec a, b;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_random(&a, seed, &with, &err), &err);
        CHECK_OK(kvf_spec_random(&b, seed, &without, &err), &err);
        CHECK(kvf_layout_is_dense(&b.layout));
        laid_out += !kvf_layout_is_dense(&a.layout);
        const uint64_t ha = build_hash(&a, "a random recipe with its layout");
        const uint64_t hb = build_hash(&b, "the same recipe without");
        if (ha != hb)
            CHECK_FAIL_AT("seed %llu: the layout changed the tensors", (unsigned long long)seed);
        memset(&a.layout, 0, sizeof a.layout);
        CHECK(kvf_spec_equal(&a, &b));
        kvf_spec_free(&a);
        kvf_spec_free(&b);
    }
    CHECK(laid_out >= 20 && laid_out <= 90); /* one in four */
}

/* Quantized caches likewise come from a stream of their own: the same seed with and without
 * quantization gives the same recipe fields but the quantization and the k and v distributions'
 * scales, and with those scales the plain recipe's q and sequences bit for bit, its k and v
 * rounded to their FP8 dtypes, and positive finite scales on every slot a sequence reads. */
static void test_quantization_rounds_the_plain_values(void) {
    kvf_random_opts with, without;
    kvf_random_opts_default(&with);
    kvf_random_opts_default(&without);
    with.quant = 1;
    with.layouts = without.layouts = 0;
    kvf_limits lim;
    kvf_limits_default(&lim);
    int quantized = 0, per_gran[KVF_SCALE_GRANULARITY_COUNT] = {0};
    for (uint64_t seed = 1; seed <= 200; seed++) {
        kvf_spec a, b;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_random(&a, seed, &with, &err), &err);
        CHECK_OK(kvf_spec_random(&b, seed, &without, &err), &err);
        CHECK(kvf_quant_recipe_is_plain(&b.quant));
        if (kvf_quant_recipe_is_plain(&a.quant)) {
            CHECK(kvf_spec_equal(&a, &b));
        } else {
            quantized++;
            per_gran[a.quant.kv.granularity]++;
            b.recipe.k = a.recipe.k;
            b.recipe.v = a.recipe.v;
            kvf_case ca, cb;
            CHECK_OK(kvf_case_build(&ca, &a, &lim, &err), &err);
            CHECK_OK(kvf_case_build(&cb, &b, &lim, &err), &err);
            CHECK(memcmp(ca.q, cb.q, (size_t)kvf_case_q_elems(&ca) * 2) == 0);
            CHECK(memcmp(ca.kv_indices, cb.kv_indices,
                         (size_t)ca.kv_indptr[ca.batch_size] * sizeof *ca.kv_indices) == 0);
            int bad = 0;
            for (int32_t bb = 0; bb < ca.batch_size && !bad; bb++)
                for (int64_t t = 0; t < kvf_case_seq_len(&ca, bb) && !bad; t++)
                    for (int32_t g = 0; g < ca.num_kv_heads && !bad; g++) {
                        const int64_t off = kvf_case_kv_offset(&ca, bb, t, g, 0);
                        for (int32_t d = 0; d < ca.head_dim && !bad; d++)
                            for (int w = 0; w < 2; w++) {
                                const int dt = w ? ca.quant.v_dtype : ca.quant.k_dtype;
                                const kvf_bf16 x = (w ? cb.v_cache : cb.k_cache)[off + d];
                                const kvf_bf16 want =
                                    kvf_fp8_to_bf16(kvf_fp8_from_f32(kvf_bf16_to_f32(x), dt), dt);
                                if ((w ? ca.v_cache : ca.k_cache)[off + d] != want) bad = 1;
                            }
                        if (ca.quant.granularity && !(kvf_case_k_scale(&ca, bb, t, g) > 0 &&
                                                      isfinite(kvf_case_k_scale(&ca, bb, t, g)) &&
                                                      kvf_case_v_scale(&ca, bb, t, g) > 0 &&
                                                      isfinite(kvf_case_v_scale(&ca, bb, t, g))))
                            bad = 2;
                    }
            if (bad)
                CHECK_FAIL_AT("seed %llu: %s", (unsigned long long)seed,
                              bad == 1 ? "a value is not the plain value rounded"
                                       : "a scale read is not finite and positive");
            kvf_case_free(&ca);
            kvf_case_free(&cb);
            memset(&a.quant, 0, sizeof a.quant);
            CHECK(kvf_spec_equal(&a, &b));
        }
        kvf_spec_free(&a);
        kvf_spec_free(&b);
    }
    CHECK(quantized >= 20 && quantized <= 90); /* one in four */
    for (int gr = 0; gr < KVF_SCALE_GRANULARITY_COUNT; gr++)
        if (!per_gran[gr])
            CHECK_FAIL_AT("no quantized recipe with %s scales", kvf_scale_granularity_name(gr));
}

static void check_random(int expansion, const random_set *recorded, size_t nrecorded) {
    if (print_mode() && print_mode() != expansion) return;
    for (size_t i = 0; i < sizeof random_shapes / sizeof random_shapes[0]; i++) {
        const random_set *rs = &random_shapes[i];
        kvf_random_opts o;
        kvf_random_opts_default(&o);
        o.layouts = 0; /* the recipes as pinned; layouts_change_no_value checks the rest */
        o.expansion = expansion;
        o.max_batch = rs->max_batch;
        o.max_pages = rs->max_pages;
        o.max_tokens = rs->max_tokens;
        o.max_work = rs->max_work;
        fnv digest = {0xCBF29CE484222325ull};
        for (int n = 0; n < rs->count; n++) {
            kvf_spec s;
            kvf_error err = {0};
            CHECK_OK(kvf_spec_random(&s, rs->first_seed + (uint64_t)n, &o, &err), &err);
            uint8_t *bytes = NULL;
            size_t size = 0;
            CHECK_OK(kvf_spec_encode(&s, &bytes, &size, &err), &err);
            fnv_bytes(&digest, bytes, size); /* the recipe drawn */
            free(bytes);
            uint64_t h = build_hash(&s, rs->name);
            fnv_bytes(&digest, &h, sizeof h);
            kvf_spec_free(&s);
        }
        if (print_mode()) {
            printf("    {\"%s\", %d, %d, %d, %lld, %d, %llu, 0x%016llxull},\n", rs->name,
                   rs->max_batch, rs->max_pages, rs->max_tokens, (long long)rs->max_work, rs->count,
                   (unsigned long long)rs->first_seed, (unsigned long long)digest.h);
            continue;
        }
        CHECK(i < nrecorded);
        if (i >= nrecorded) continue;
        CHECK(strcmp(recorded[i].name, rs->name) == 0);
        if (digest.h != recorded[i].digest)
            CHECK_FAIL_AT("random set %s digests to 0x%016llx under expansion %d, recorded "
                          "0x%016llx",
                          rs->name, (unsigned long long)digest.h, expansion,
                          (unsigned long long)recorded[i].digest);
    }
}

/* The recipes drawn are the same under both expansions but for the version byte, so each
 * digest covers the recipe (its encoding) and the tensors. */
static void test_random_recipes_expand_to_recorded_bits(void) {
    check_random(KVF_EXPANSION_1, random_sets, sizeof random_sets / sizeof random_sets[0]);
}

static void test_random_recipes_expand_to_recorded_bits_expansion2(void) {
    check_random(KVF_EXPANSION_2, random_sets2, sizeof random_sets2 / sizeof random_sets2[0]);
}

/* The digest of each shipped corpus file's expanded case, recorded from the generator before
 * its speed-up. Files added to the corpus later have no such record and are only counted. */
static const struct {
    const char *file; /* relative to the source tree */
    uint64_t digest;
} corpus_digests[] = {
#include "gen_hashes_corpus.inc"
};

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_corpus_files_expand_to_recorded_bits(void) {
    const char *src = getenv("KVF_SOURCE_DIR");
    if (!src) CHECK_SKIP("KVF_SOURCE_DIR is not set");
    static const char *const dirs[] = {"corpus/seeds", "corpus/fuzz_case", "corpus/fuzz_decode_cpu",
                                       "corpus/fuzz_decode_cuda"};
    const size_t nrecorded = sizeof corpus_digests / sizeof corpus_digests[0];
    size_t matched = 0, unrecorded = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", src, dirs[i]);
        DIR *dir = opendir(path);
        CHECK(dir != NULL);
        if (!dir) continue;
        char *names[1024];
        int n = 0;
        struct dirent *de;
        while ((de = readdir(dir)) && n < 1024) {
            size_t len = strlen(de->d_name);
            if (len > 5 && strcmp(de->d_name + len - 5, ".kvfz") == 0)
                names[n++] = strdup(de->d_name);
        }
        closedir(dir);
        qsort(names, (size_t)n, sizeof names[0], cmp_names);
        kvf_limits lim;
        kvf_limits_default(&lim);
        for (int k = 0; k < n; k++) {
            char file[8192], rel[8192];
            snprintf(file, sizeof file, "%s/%s", path, names[k]);
            snprintf(rel, sizeof rel, "%s/%s", dirs[i], names[k]);
            kvf_case c;
            kvf_error err = {0};
            uint64_t h = 0;
            /* A corpus file the limits reject (fuzz_case holds a few on purpose) records its
             * error code instead. */
            kvf_spec spec;
            int rc = kvf_case_load(file, &spec, &c, &lim, &err);
            if (rc == 0) {
                /* Shipped files are version 1 files: expansion 1 is what they mean. */
                if (spec.recipe.expansion != KVF_EXPANSION_1)
                    CHECK_FAIL_AT("%s is a version %u file, not version 1", rel,
                                  spec.recipe.expansion);
                kvf_spec_free(&spec);
                h = case_hash(&c);
                kvf_case_free(&c);
            } else {
                h = (uint64_t)rc;
            }
            free(names[k]);
            if (print_mode() == 1) {
                printf("    {\"%s\", 0x%016llxull},\n", rel, (unsigned long long)h);
                continue;
            }
            size_t r = 0;
            while (r < nrecorded && strcmp(corpus_digests[r].file, rel) != 0)
                r++;
            if (r == nrecorded) {
                unrecorded++;
                continue;
            }
            matched++;
            if (h != corpus_digests[r].digest)
                CHECK_FAIL_AT("%s expands to digest 0x%016llx, recorded 0x%016llx", rel,
                              (unsigned long long)h, (unsigned long long)corpus_digests[r].digest);
        }
    }
    if (print_mode()) return;
    /* Every recorded file is still shipped (a removed one would shrink what is compared). */
    CHECK_INT_EQ((long long)matched, (long long)nrecorded);
    printf("%zu corpus file(s) compared with their recorded bits, %zu added later\n", matched,
           unrecorded);
}

static const check_test tests[] = {
    {"layouts_change_no_value", test_layouts_change_no_value},
    {"quantization_rounds_the_plain_values", test_quantization_rounds_the_plain_values},
    {"corpus_files_expand_to_recorded_bits", test_corpus_files_expand_to_recorded_bits},
    {"presets_expand_to_recorded_bits", test_presets_expand_to_recorded_bits},
    {"random_recipes_expand_to_recorded_bits", test_random_recipes_expand_to_recorded_bits},
    {"presets_expand_to_recorded_bits_expansion2", test_presets_expand_to_recorded_bits_expansion2},
    {"random_recipes_expand_to_recorded_bits_expansion2",
     test_random_recipes_expand_to_recorded_bits_expansion2},
    {NULL, NULL},
};

CHECK_MAIN(tests)
