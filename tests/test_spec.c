/* The case model: .kvfz round trips, rejection of malformed files with one sentence each,
 * generator determinism and coverage of every strategy, validation of hand-made cases. The
 * tests of the generator's behaviour (not its bits: tests/test_gen_hash.c pins those) run
 * under both expansions, and the laws of every distribution, poison kind and filler are
 * checked statistically under both. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* The expansion the behavioural tests below use (each runs once per expansion). */
static int g_expansion = KVF_EXPANSION_1;

static kvf_limits limits(void) {
    kvf_limits l;
    kvf_limits_default(&l);
    return l;
}

/* Small random recipes: the properties tested here do not depend on size, and the suite also
 * runs under AddressSanitizer. */
static kvf_random_opts small_random_opts(void) {
    kvf_random_opts o;
    kvf_random_opts_default(&o);
    o.max_work = 1 << 16;
    o.max_pages = 4;
    o.expansion = g_expansion;
    return o;
}

static void encode_or_fail(const kvf_spec *s, uint8_t **data, size_t *size) {
    kvf_error err = {0};
    CHECK_OK(kvf_spec_encode(s, data, size, &err), &err);
}

static int cases_equal(const kvf_case *a, const kvf_case *b) {
    if (a->num_qo_heads != b->num_qo_heads || a->num_kv_heads != b->num_kv_heads ||
        a->head_dim != b->head_dim || a->page_size != b->page_size ||
        a->batch_size != b->batch_size || a->num_pages != b->num_pages ||
        kvf_f32_bits(a->sm_scale) != kvf_f32_bits(b->sm_scale) ||
        a->num_resident_pages != b->num_resident_pages)
        return 0;
    if (memcmp(a->kv_indptr, b->kv_indptr, ((size_t)a->batch_size + 1) * 4) ||
        memcmp(a->kv_last_page_len, b->kv_last_page_len, (size_t)a->batch_size * 4) ||
        memcmp(a->kv_indices, b->kv_indices, (size_t)a->kv_indptr[a->batch_size] * 4) ||
        memcmp(a->q, b->q, (size_t)kvf_case_q_elems(a) * 2))
        return 0;
    int64_t pe = kvf_case_page_elems(a);
    for (int64_t i = 0; i < a->num_resident_pages; i++) {
        int64_t p = a->resident_pages[i];
        if (p != b->resident_pages[i] ||
            memcmp(a->k_cache + p * pe, b->k_cache + p * pe, (size_t)pe * 2) ||
            memcmp(a->v_cache + p * pe, b->v_cache + p * pe, (size_t)pe * 2))
            return 0;
    }
    return 1;
}

static void test_preset_round_trip(void) {
    kvf_limits lim = limits();
    for (size_t i = 0; i < kvf_preset_count(); i++) {
        kvf_spec s, d;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, kvf_preset_name(i), 7, &err), &err);
        s.recipe.expansion = (uint8_t)g_expansion;
        CHECK_INT_EQ(s.recipe.expansion, g_expansion);
        uint8_t *bytes, *again;
        size_t n, n2;
        encode_or_fail(&s, &bytes, &n);
        CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
        CHECK(kvf_spec_equal(&s, &d));
        encode_or_fail(&d, &again, &n2);
        CHECK(n == n2 && memcmp(bytes, again, n) == 0);
        kvf_case c1, c2;
        CHECK_OK(kvf_case_build(&c1, &s, &lim, &err), &err);
        CHECK_OK(kvf_case_build(&c2, &d, &lim, &err), &err);
        if (!cases_equal(&c1, &c2))
            CHECK_FAIL_AT("preset %s: rebuilt case differs", kvf_preset_name(i));
        kvf_case_free(&c1);
        kvf_case_free(&c2);
        free(bytes);
        free(again);
        kvf_spec_free(&s);
        kvf_spec_free(&d);
    }
}

static void test_random_round_trip_and_coverage(void) {
    kvf_limits lim = limits();
    kvf_random_opts o = small_random_opts();
    int tables[KVF_TABLE_COUNT] = {0}, logits[KVF_LOGITS_COUNT] = {0}, dists[KVF_DIST_COUNT] = {0};
    int groups[17] = {0}, poison_bits[4] = {0}, empty = 0;
    for (uint64_t seed = 0; seed < 400; seed++) {
        kvf_spec s, d;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_random(&s, seed, &o, &err), &err);
        uint8_t *bytes;
        size_t n;
        encode_or_fail(&s, &bytes, &n);
        CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
        CHECK(kvf_spec_equal(&s, &d));
        kvf_case c1, c2;
        int rc = kvf_case_build(&c1, &s, &lim, &err);
        if (rc) {
            CHECK_FAIL_AT("seed %llu does not build: %s", (unsigned long long)seed, err.msg);
        } else {
            CHECK_OK(kvf_case_build(&c2, &d, &lim, &err), &err);
            CHECK(cases_equal(&c1, &c2));
            for (int32_t b = 0; b < c1.batch_size; b++)
                empty += kvf_case_seq_len(&c1, b) == 0;
            kvf_case_free(&c1);
            kvf_case_free(&c2);
        }
        tables[s.recipe.table]++;
        logits[s.recipe.logits]++;
        dists[s.recipe.q.kind]++;
        dists[s.recipe.v.kind]++;
        groups[s.recipe.num_qo_heads / s.recipe.num_kv_heads]++;
        for (int b = 0; b < 4; b++)
            poison_bits[b] += (s.recipe.poison >> b) & 1;
        free(bytes);
        kvf_spec_free(&s);
        kvf_spec_free(&d);
    }
    for (int i = 0; i < KVF_TABLE_COUNT; i++)
        if (!tables[i]) CHECK_FAIL_AT("table %s never drawn", kvf_table_name(i));
    for (int i = 0; i < KVF_LOGITS_COUNT; i++)
        if (!logits[i]) CHECK_FAIL_AT("logit pattern %s never drawn", kvf_logits_name(i));
    for (int i = 0; i < KVF_DIST_COUNT; i++)
        if (!dists[i]) CHECK_FAIL_AT("distribution %s never drawn", kvf_dist_name(i));
    for (int g = 1; g <= 16; g++)
        if (!groups[g]) CHECK_FAIL_AT("GQA group %d never drawn", g);
    for (int b = 0; b < 4; b++)
        CHECK(poison_bits[b] > 0);
    CHECK(empty > 0);
}

/* Same spec, same bits: a fixed hash of the seed workload's expansion pins the generator, so
 * a change that would silently alter every stored corpus file fails here. */
static void test_generator_is_deterministic(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    kvf_case a, b;
    CHECK_OK(kvf_case_build(&a, &s, &lim, &err), &err);
    CHECK_OK(kvf_case_build(&b, &s, &lim, &err), &err);
    CHECK(cases_equal(&a, &b));
    CHECK_INT_EQ(a.batch_size, 1);
    CHECK_INT_EQ(a.kv_indptr[1], 51);
    CHECK_INT_EQ(a.num_pages, 52);
    CHECK_INT_EQ(a.num_qo_heads, 20);
    CHECK_INT_EQ(a.num_kv_heads, 4);
    CHECK_INT_EQ(a.head_dim, 128);
    CHECK_INT_EQ(a.page_size, 64);
    CHECK_INT_EQ(a.kv_last_page_len[0], 2); /* 1 + seed % 64 */
    CHECK_DBL_EQ(a.sm_scale, (float)(1.0 / sqrt(128.0)));
    /* Shuffled: not the identity. */
    int identity = 1;
    for (int i = 0; i < 51; i++)
        identity &= a.kv_indices[i] == i;
    CHECK(!identity);
    kvf_case_free(&a);
    kvf_case_free(&b);
    kvf_spec_free(&s);
}

static void test_poison_reaches_tails_and_unreferenced_pages(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "tail-nan", 3, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    int64_t len = kvf_case_seq_len(&c, 0);
    CHECK_INT_EQ(len, 3 * 64 + 5);
    /* Slot 5 of the last page: NaN in both caches. Used slots: finite. */
    int64_t last_page = c.kv_indices[3];
    int64_t pe = kvf_case_page_elems(&c), se = (int64_t)c.num_kv_heads * c.head_dim;
    CHECK(kvf_bf16_is_nan(c.k_cache[last_page * pe + 5 * se]));
    CHECK(kvf_bf16_is_nan(c.v_cache[last_page * pe + 63 * se + se - 1]));
    CHECK(kvf_bf16_is_finite(c.k_cache[last_page * pe + 4 * se]));
    /* Every unreferenced page of this small pool is resident and NaN. */
    CHECK_INT_EQ(c.num_resident_pages, c.num_pages);
    for (int64_t p = 0; p < c.num_pages; p++) {
        int referenced = 0;
        for (int i = 0; i < 4; i++)
            referenced |= c.kv_indices[i] == p;
        if (!referenced) CHECK(kvf_bf16_is_nan(c.v_cache[p * pe]));
    }
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

static void test_high_ids_cross_32bit_offsets(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "high-page-ids", 1, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    int32_t max_id = 0;
    for (int i = 0; i < c.kv_indptr[1]; i++)
        if (c.kv_indices[i] > max_id) max_id = c.kv_indices[i];
    CHECK(max_id >= 65536);
    CHECK((int64_t)max_id * kvf_case_page_elems(&c) > INT32_MAX);
    /* Sparse: only referenced pages and their neighbours hold data. */
    CHECK(c.num_resident_pages < 64);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* ---- malformed inputs ---------------------------------------------------------------------- */

typedef void (*mutate_fn)(uint8_t *buf, size_t *size);

static void set16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void set32(uint8_t *p, uint32_t v) {
    set16(p, (uint16_t)v);
    set16(p + 2, (uint16_t)(v >> 16));
}

/* Offsets in the v1 header (docs/case-format.md). */
enum {
    OFF_VERSION = 4,
    OFF_SECTIONS = 5,
    OFF_RESERVED = 6,
    OFF_HQ = 8,
    OFF_HK = 9,
    OFF_D = 10,
    OFF_S = 12,
    OFF_B = 14,
    OFF_TABLE = 16,
    OFF_LOGITS = 17,
    OFF_POISON = 18,
    OFF_RES2 = 19,
    OFF_BASE = 20,
    OFF_SPARE = 24,
    OFF_RES3 = 26,
    OFF_SCALE = 28,
    OFF_QDIST = 32,
    OFF_KDIST = 35,
    OFF_VDIST = 38,
    OFF_RES4 = 41,
    OFF_SEED = 44,
    OFF_SEQS = 52
};

static void m_magic(uint8_t *b, size_t *n) {
    b[0] = 'X';
}
static void m_version0(uint8_t *b, size_t *n) {
    b[OFF_VERSION] = 0;
}
static void m_version3(uint8_t *b, size_t *n) {
    b[OFF_VERSION] = 3;
}
static void m_sections(uint8_t *b, size_t *n) {
    b[OFF_SECTIONS] = 0x80;
}
static void m_reserved(uint8_t *b, size_t *n) {
    b[OFF_RESERVED] = 1;
}
static void m_hq0(uint8_t *b, size_t *n) {
    b[OFF_HQ] = 0;
}
static void m_hk0(uint8_t *b, size_t *n) {
    b[OFF_HK] = 0;
}
static void m_group(uint8_t *b, size_t *n) {
    b[OFF_HK] = 3;
} /* 20 % 3 != 0 */
static void m_d0(uint8_t *b, size_t *n) {
    set16(b + OFF_D, 0);
}
static void m_dbig(uint8_t *b, size_t *n) {
    set16(b + OFF_D, 60000);
}
static void m_s0(uint8_t *b, size_t *n) {
    set16(b + OFF_S, 0);
}
static void m_sbig(uint8_t *b, size_t *n) {
    set16(b + OFF_S, 5000);
}
static void m_batch_more(uint8_t *b, size_t *n) {
    set16(b + OFF_B, 2);
} /* truncates the list */
static void m_batch_huge(uint8_t *b, size_t *n) {
    set16(b + OFF_B, 65535);
}
static void m_table(uint8_t *b, size_t *n) {
    b[OFF_TABLE] = KVF_TABLE_COUNT;
}
static void m_logits(uint8_t *b, size_t *n) {
    b[OFF_LOGITS] = 200;
}
static void m_poison(uint8_t *b, size_t *n) {
    b[OFF_POISON] = 0x10;
}
static void m_res2(uint8_t *b, size_t *n) {
    b[OFF_RES2] = 9;
}
static void m_base(uint8_t *b, size_t *n) {
    set32(b + OFF_BASE, 5);
} /* table is shuffled */
static void m_res3(uint8_t *b, size_t *n) {
    b[OFF_RES3 + 1] = 1;
}
static void m_scale_nan(uint8_t *b, size_t *n) {
    set32(b + OFF_SCALE, 0x7FC00000u);
}
static void m_scale_inf(uint8_t *b, size_t *n) {
    set32(b + OFF_SCALE, 0xFF800000u);
}
static void m_qdist(uint8_t *b, size_t *n) {
    b[OFF_QDIST] = KVF_DIST_COUNT;
}
static void m_vdist(uint8_t *b, size_t *n) {
    b[OFF_VDIST] = 99;
}
static void m_kscale(uint8_t *b, size_t *n) {
    b[OFF_KDIST + 1] = (uint8_t)-127;
}
static void m_res4(uint8_t *b, size_t *n) {
    b[OFF_RES4 + 2] = 1;
}
static void m_last0(uint8_t *b, size_t *n) {
    set16(b + OFF_SEQS + 2, 0);
}
static void m_last_big(uint8_t *b, size_t *n) {
    set16(b + OFF_SEQS + 2, 65);
}
static void m_empty_with_last(uint8_t *b, size_t *n) {
    set16(b + OFF_SEQS, 0);
    set16(b + OFF_SEQS + 2, 3);
}
static void m_trailing(uint8_t *b, size_t *n) {
    b[(*n)++] = 0;
}
static void m_truncated_header(uint8_t *b, size_t *n) {
    *n = 30;
}
static void m_truncated_seqs(uint8_t *b, size_t *n) {
    *n = OFF_SEQS + 2;
}
static void m_empty_file(uint8_t *b, size_t *n) {
    *n = 0;
}
static void m_overrides_flag(uint8_t *b, size_t *n) {
    b[OFF_SECTIONS] = 1;
} /* no count follows */
static void m_overrides_zero(uint8_t *b, size_t *n) {
    b[OFF_SECTIONS] = 1;
    set32(b + *n, 0);
    *n += 4;
}
static void m_override_target(uint8_t *b, size_t *n) {
    b[OFF_SECTIONS] = 1;
    set32(b + *n, 1);
    *n += 4;
    b[(*n)++] = 9;
    memset(b + *n, 0, 12);
    *n += 12;
}
static void m_override_wide(uint8_t *b, size_t *n) {
    b[OFF_SECTIONS] = 1;
    set32(b + *n, 1);
    *n += 4;
    b[(*n)++] = KVF_OVERRIDE_Q;
    memset(b + *n, 0, 8);
    *n += 8;
    set32(b + *n, 0x10000);
    *n += 4;
}
static void m_override_short(uint8_t *b, size_t *n) {
    b[OFF_SECTIONS] = 1;
    set32(b + *n, 2);
    *n += 4;
    b[(*n)++] = 1;
    memset(b + *n, 0, 12);
    *n += 12;
}
static void m_explicit_missing(uint8_t *b, size_t *n) {
    b[OFF_SECTIONS] = 2;
    set32(b + *n, 52);
    *n += 4;
}

static const struct {
    const char *name;
    mutate_fn fn;
    const char *word; /* a word the error sentence must contain */
} malformed[] = {
    {"bad magic", m_magic, "magic"},
    {"version 0", m_version0, "version"},
    {"version 3", m_version3, "version"},
    {"unknown section bits", m_sections, "section"},
    {"reserved header byte", m_reserved, "reserved"},
    {"zero q heads", m_hq0, "num_qo_heads"},
    {"zero kv heads", m_hk0, "num_kv_heads"},
    {"group not integral", m_group, "multiple"},
    {"head_dim 0", m_d0, "head_dim"},
    {"head_dim past limit", m_dbig, "head_dim"},
    {"page_size 0", m_s0, "page_size"},
    {"page_size past limit", m_sbig, "page_size"},
    {"batch larger than the list", m_batch_more, "page counts"},
    {"batch past limit", m_batch_huge, "batch_size"},
    {"unknown table", m_table, "page-table"},
    {"unknown logit pattern", m_logits, "logit"},
    {"undefined poison bit", m_poison, "poison"},
    {"reserved recipe byte", m_res2, "reserved"},
    {"page_id_base without high ids", m_base, "page_id_base"},
    {"reserved recipe bytes", m_res3, "reserved"},
    {"NaN sm_scale", m_scale_nan, "sm_scale"},
    {"infinite sm_scale", m_scale_inf, "sm_scale"},
    {"unknown q distribution", m_qdist, "q distribution"},
    {"unknown v distribution", m_vdist, "v distribution"},
    {"k scale below -126", m_kscale, "k scale"},
    {"reserved distribution byte", m_res4, "reserved"},
    {"last page length 0", m_last0, "last_page_len"},
    {"last page length past S", m_last_big, "last_page_len"},
    {"empty sequence with a length", m_empty_with_last, "no pages"},
    {"trailing byte", m_trailing, "unexpected bytes"},
    {"truncated header", m_truncated_header, "ends inside"},
    {"truncated sequence list", m_truncated_seqs, "ends inside"},
    {"empty file", m_empty_file, "magic"},
    {"overrides flag without count", m_overrides_flag, "override count"},
    {"zero overrides", m_overrides_zero, "no overrides"},
    {"unknown override target", m_override_target, "target"},
    {"override bf16 wider than 16 bits", m_override_wide, "16 bits"},
    {"override list truncated", m_override_short, "ends inside"},
    {"explicit tensors missing", m_explicit_missing, "ends inside"},
};

static void test_malformed_inputs_rejected(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    uint8_t *good;
    size_t good_n;
    encode_or_fail(&s, &good, &good_n);
    kvf_spec_free(&s);
    size_t count = sizeof malformed / sizeof malformed[0];
    CHECK(count >= 30);
    for (size_t i = 0; i < count; i++) {
        uint8_t buf[512];
        size_t n = good_n;
        memcpy(buf, good, good_n);
        malformed[i].fn(buf, &n);
        kvf_spec d;
        kvf_error e = {0};
        int rc = kvf_spec_decode(&d, buf, n, &lim, &e);
        if (rc == 0) {
            CHECK_FAIL_AT("malformed input \"%s\" was accepted", malformed[i].name);
            kvf_spec_free(&d);
            continue;
        }
        CHECK(rc == KVF_EFORMAT || rc == KVF_EINVAL || rc == KVF_ELIMIT);
        if (!strstr(e.msg, malformed[i].word))
            CHECK_FAIL_AT("\"%s\": message \"%s\" does not name \"%s\"", malformed[i].name, e.msg,
                          malformed[i].word);
        CHECK(strchr(e.msg, '\n') == NULL);
    }
    free(good);
}

/* Overrides that decode but make an invalid case are rejected by the build, naming the field. */
static void test_invalid_overrides_rejected_by_build(void) {
    kvf_limits lim = limits();
    struct {
        kvf_override o;
        const char *word;
    } bad[] = {
        {{KVF_OVERRIDE_TABLE_ENTRY, 3, 52}, "kv_indices[3] = 52"},
        {{KVF_OVERRIDE_TABLE_ENTRY, 3, 0xFFFFFFFFu}, "kv_indices[3] = -1"},
        {{KVF_OVERRIDE_TABLE_ENTRY, 51, 0}, "table has 51 entries"},
        {{KVF_OVERRIDE_LAST_LEN, 0, 65}, "kv_last_page_len[0] = 65"},
        {{KVF_OVERRIDE_LAST_LEN, 0, 0}, "kv_last_page_len[0] = 0"},
        {{KVF_OVERRIDE_LAST_LEN, 1, 3}, "batch has 1"},
        {{KVF_OVERRIDE_Q, 20 * 128, 0}, "q has 2560"},
        {{KVF_OVERRIDE_V, 52ull * 32768, 0}, "pool has"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
        s.overrides = malloc(sizeof(kvf_override));
        s.overrides[0] = bad[i].o;
        s.num_overrides = 1;
        uint8_t *bytes;
        size_t n;
        encode_or_fail(&s, &bytes, &n);
        kvf_spec d;
        CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
        kvf_case c;
        int rc = kvf_case_build(&c, &d, &lim, &err);
        CHECK_INT_EQ(rc, KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, bad[i].word);
        free(bytes);
        kvf_spec_free(&s);
        kvf_spec_free(&d);
    }
}

static void test_explicit_tensors_round_trip(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "page1", 4, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    kvf_case gen;
    CHECK_OK(kvf_case_build(&gen, &s, &lim, &err), &err);
    /* Import the generated tensors as explicit ones, as a captured workload would arrive. */
    s.has_explicit = 1;
    s.explicit_tensors.num_pages = gen.num_pages;
    int64_t entries = gen.kv_indptr[gen.batch_size];
    s.explicit_tensors.kv_indices = malloc((size_t)entries * 4);
    memcpy(s.explicit_tensors.kv_indices, gen.kv_indices, (size_t)entries * 4);
    s.explicit_tensors.q = malloc((size_t)kvf_case_q_elems(&gen) * 2);
    memcpy(s.explicit_tensors.q, gen.q, (size_t)kvf_case_q_elems(&gen) * 2);
    s.explicit_tensors.k_cache = malloc(gen.pool_bytes);
    s.explicit_tensors.v_cache = malloc(gen.pool_bytes);
    memcpy(s.explicit_tensors.k_cache, gen.k_cache, gen.pool_bytes);
    memcpy(s.explicit_tensors.v_cache, gen.v_cache, gen.pool_bytes);
    uint8_t *bytes;
    size_t n;
    encode_or_fail(&s, &bytes, &n);
    kvf_spec d;
    CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
    CHECK(kvf_spec_equal(&s, &d));
    /* The explicit pool counts against the memory budget (twice: spec and case). */
    kvf_case_cost cost;
    kvf_recipe_cost(&s.recipe, &cost);
    int64_t pool_bytes = (int64_t)gen.pool_bytes * 2 * 2;
    kvf_limits tight = lim;
    tight.max_memory_bytes = cost.memory_bytes + pool_bytes - 1;
    kvf_spec t;
    CHECK_INT_EQ(kvf_spec_decode(&t, bytes, n, &tight, &err), KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "explicit pool");
    tight.max_memory_bytes = cost.memory_bytes + pool_bytes;
    CHECK_OK(kvf_spec_decode(&t, bytes, n, &tight, &err), &err);
    kvf_spec_free(&t);
    kvf_case imp;
    CHECK_OK(kvf_case_build(&imp, &d, &lim, &err), &err);
    CHECK(memcmp(imp.q, gen.q, (size_t)kvf_case_q_elems(&gen) * 2) == 0);
    CHECK(memcmp(imp.v_cache, gen.v_cache, gen.pool_bytes) == 0);
    CHECK(memcmp(imp.kv_indices, gen.kv_indices, (size_t)entries * 4) == 0);
    kvf_case_free(&imp);
    kvf_case_free(&gen);
    free(bytes);
    kvf_spec_free(&s);
    kvf_spec_free(&d);
}

/* Random bytes, and random single-byte corruptions of valid files, never crash the decoder and
 * either decode to a spec that re-encodes to the same bytes or are rejected with a message. */
static void test_arbitrary_bytes(void) {
    kvf_limits lim = limits();
    lim.max_tokens = 1 << 16; /* corrupted page counts would otherwise expand into huge cases */
    lim.max_resident_bytes = 64 << 20;
    kvf_prng rng;
    kvf_prng_seed(&rng, 99);
    kvf_random_opts o = small_random_opts();
    int accepted = 0;
    for (int iter = 0; iter < 1000; iter++) {
        kvf_spec s;
        kvf_error err = {0};
        kvf_spec_random(&s, (uint64_t)iter, &o, &err);
        uint8_t *bytes;
        size_t n;
        encode_or_fail(&s, &bytes, &n);
        kvf_spec_free(&s);
        int flips = 1 + (int)kvf_prng_below(&rng, 3);
        for (int f = 0; f < flips; f++)
            bytes[kvf_prng_below(&rng, n)] ^= (uint8_t)(1u << kvf_prng_below(&rng, 8));
        if (kvf_prng_below(&rng, 4) == 0) n = (size_t)kvf_prng_below(&rng, n + 1);
        kvf_spec d;
        kvf_error e = {0};
        if (kvf_spec_decode(&d, bytes, n, &lim, &e) == 0) {
            accepted++;
            uint8_t *again;
            size_t n2;
            encode_or_fail(&d, &again, &n2);
            CHECK(n2 == n && memcmp(again, bytes, n) == 0);
            free(again);
            kvf_case c;
            if (kvf_case_build(&c, &d, &lim, &e) == 0)
                kvf_case_free(&c);
            else
                CHECK(e.msg[0] != '\0');
            kvf_spec_free(&d);
        } else {
            CHECK(e.msg[0] != '\0');
        }
        free(bytes);
    }
    CHECK(accepted > 0);
}

static void test_validate_hand_made(void) {
    kvf_limits lim = limits();
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(kvf_case_alloc(&c, 4, 2, 8, 4, 2, 3, 5, &lim, &err), &err);
    c.kv_indptr[1] = 2;
    c.kv_indptr[2] = 3;
    c.kv_indices[0] = 4;
    c.kv_indices[1] = 0;
    c.kv_indices[2] = 0; /* shared page */
    c.kv_last_page_len[0] = 4;
    c.kv_last_page_len[1] = 1;
    CHECK_OK(kvf_case_validate(&c, &lim, &err), &err);
    CHECK_INT_EQ(kvf_case_seq_len(&c, 0), 8);
    CHECK_INT_EQ(kvf_case_seq_len(&c, 1), 1);
    c.kv_indptr[1] = 4;
    CHECK_INT_EQ(kvf_case_validate(&c, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "kv_indptr decreases");
    c.kv_indptr[1] = 2;
    c.kv_indices[2] = 5;
    CHECK_INT_EQ(kvf_case_validate(&c, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "kv_indices[2] = 5");
    c.kv_indices[2] = 0;
    c.sm_scale = INFINITY;
    CHECK_INT_EQ(kvf_case_validate(&c, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "sm_scale");
    kvf_case_free(&c);
    lim.max_pool_bytes = 1024;
    CHECK_INT_EQ(kvf_case_alloc(&c, 4, 2, 8, 4, 2, 3, 1000, &lim, &err), KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "limit");
    kvf_case_free(&c);
}

/* The ascending pattern: for the first q head of each group, every token's exact logit is
 * strictly above every earlier one (so an online softmax rescales at every token), on the
 * preset and on a random recipe that draws the pattern. Dot products in double are exact here
 * (products of bf16 values have 16 significant bits and the sums stay far from 53). */
static void check_ascending(const kvf_case *c, const char *what) {
    const int32_t D = c->head_dim, G = c->num_qo_heads / c->num_kv_heads;
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int32_t h = 0; h < c->num_qo_heads; h += G) {
            const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
            double prev = -INFINITY;
            int nonzero_q = 0;
            for (int32_t d = 0; d < D; d++)
                nonzero_q |= kvf_bf16_to_f32(q[d]) != 0.0f;
            if (!nonzero_q) continue; /* no coordinate to step: every logit is 0 */
            for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++) {
                const kvf_bf16 *k = c->k_cache + kvf_case_kv_offset(c, b, t, h / G, 0);
                double dot = 0;
                for (int32_t d = 0; d < D; d++)
                    dot += (double)kvf_bf16_to_f32(q[d]) * kvf_bf16_to_f32(k[d]);
                if (!(dot > prev)) {
                    CHECK_FAIL_AT("%s: sequence %d head %d token %lld: logit %.17g after %.17g",
                                  what, (int)b, (int)h, (long long)t, dot, prev);
                    return;
                }
                prev = dot;
            }
        }
}

static void test_ascending_logits(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    kvf_case c;
    CHECK_OK(kvf_spec_preset(&s, "ascending-logits", 4, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    CHECK_INT_EQ(s.recipe.logits, KVF_LOGITS_ASCENDING);
    CHECK_STR_CONTAINS(kvf_logits_name(KVF_LOGITS_ASCENDING), "ascending");
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    CHECK(kvf_case_seq_len(&c, 0) > 8000);
    check_ascending(&c, "preset ascending-logits");
    kvf_case_free(&c);
    kvf_spec_free(&s);
    /* The random generator draws it (last, from natural-logit recipes). */
    kvf_random_opts ro = small_random_opts();
    int found = 0;
    for (uint64_t seed = 0; seed < 400 && found < 3; seed++) {
        CHECK_OK(kvf_spec_random(&s, seed, &ro, &err), &err);
        if (s.recipe.logits == KVF_LOGITS_ASCENDING && s.recipe.k.kind == KVF_DIST_NORMAL &&
            s.recipe.q.kind == KVF_DIST_NORMAL) {
            CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
            char what[64];
            snprintf(what, sizeof what, "random seed %llu", (unsigned long long)seed);
            check_ascending(&c, what);
            kvf_case_free(&c);
            found++;
        }
        kvf_spec_free(&s);
    }
    CHECK(found == 3);
}

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
    CHECK_STR_CONTAINS(err.msg, "past the memory budget of 0.25 GiB");
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

/* ---- expansions ---------------------------------------------------------------------------- */

/* The version byte names the expansion: version 1 and version 2 files of one recipe differ in
 * that byte only, both round-trip canonically, expand to different values from the same
 * recipe, and version 3 is refused with one sentence. */
static void test_versions_round_trip(void) {
    kvf_limits lim = limits();
    kvf_error err = {0};
    kvf_spec s;
    CHECK_OK(kvf_spec_preset(&s, "mixed-lengths", 5, &err), &err);
    CHECK_INT_EQ(s.recipe.expansion, KVF_EXPANSION_DEFAULT);
    uint8_t *b[3] = {NULL, NULL, NULL};
    size_t n[3] = {0, 0, 0};
    kvf_case c[3];
    for (int e = 1; e <= 2; e++) {
        s.recipe.expansion = (uint8_t)e;
        encode_or_fail(&s, &b[e], &n[e]);
        CHECK_INT_EQ(b[e][OFF_VERSION], e);
        kvf_spec d;
        CHECK_OK(kvf_spec_decode(&d, b[e], n[e], &lim, &err), &err);
        CHECK_INT_EQ(d.recipe.expansion, e);
        CHECK(kvf_spec_equal(&s, &d));
        uint8_t *again;
        size_t n2;
        encode_or_fail(&d, &again, &n2);
        CHECK(n2 == n[e] && memcmp(again, b[e], n2) == 0);
        free(again);
        CHECK_OK(kvf_case_build(&c[e], &d, &lim, &err), &err);
        kvf_spec_free(&d);
    }
    CHECK(n[1] == n[2] && memcmp(b[1], b[2], OFF_VERSION) == 0 &&
          memcmp(b[1] + OFF_VERSION + 1, b[2] + OFF_VERSION + 1, n[1] - OFF_VERSION - 1) == 0);
    /* Same shape and table layout strategy, other values. */
    CHECK_INT_EQ(c[1].num_pages, c[2].num_pages);
    CHECK(memcmp(c[1].q, c[2].q, (size_t)kvf_case_q_elems(&c[1]) * 2) != 0);
    CHECK(!cases_equal(&c[1], &c[2]));
    /* A recipe filled in by hand (expansion 0) is a version 1 recipe. */
    s.recipe.expansion = 0;
    uint8_t *zero;
    size_t nz;
    encode_or_fail(&s, &zero, &nz);
    CHECK(nz == n[1] && memcmp(zero, b[1], nz) == 0);
    kvf_case c0;
    CHECK_OK(kvf_case_build(&c0, &s, &lim, &err), &err);
    CHECK(cases_equal(&c0, &c[1]));
    kvf_case_free(&c0);
    free(zero);
    /* An unknown expansion in a recipe is refused by name, and version 3 by the decoder. */
    s.recipe.expansion = 3;
    CHECK_INT_EQ(kvf_case_build(&c0, &s, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "expansion 3");
    b[2][OFF_VERSION] = 3;
    kvf_spec d;
    kvf_error e3 = {0};
    CHECK_INT_EQ(kvf_spec_decode(&d, b[2], n[2], &lim, &e3), KVF_EFORMAT);
    CHECK_STR_CONTAINS(e3.msg, "format version 3 is not supported");
    CHECK(strchr(e3.msg, '\n') == NULL);
    /* Random recipes: expansion 2 unless asked otherwise; the other fields do not depend on it. */
    kvf_random_opts o;
    kvf_random_opts_default(&o);
    kvf_spec r1, r2;
    CHECK_OK(kvf_spec_random(&r1, 42, &o, &err), &err);
    CHECK_INT_EQ(r1.recipe.expansion, KVF_EXPANSION_2);
    o.expansion = KVF_EXPANSION_1;
    CHECK_OK(kvf_spec_random(&r2, 42, &o, &err), &err);
    CHECK_INT_EQ(r2.recipe.expansion, KVF_EXPANSION_1);
    r2.recipe.expansion = KVF_EXPANSION_2;
    CHECK(kvf_spec_equal(&r1, &r2));
    kvf_spec_free(&r1);
    kvf_spec_free(&r2);
    for (int e = 1; e <= 2; e++) {
        kvf_case_free(&c[e]);
        free(b[e]);
    }
    kvf_spec_free(&s);
}

/* One long sequence of one kv head, contiguous, full pages: k_cache[0, n) holds n values of the
 * k distribution in order; q is drawn from `q`. */
static int law_case(kvf_case *c, kvf_dist k, kvf_dist q, uint64_t seed, int64_t tokens) {
    kvf_limits lim = limits();
    kvf_spec s;
    memset(&s, 0, sizeof s);
    kvf_recipe *rp = &s.recipe;
    rp->expansion = (uint8_t)g_expansion;
    rp->num_qo_heads = rp->num_kv_heads = 1;
    rp->head_dim = 128;
    rp->page_size = 128;
    rp->sm_scale = 1.0f;
    rp->k = k;
    rp->q = q;
    rp->v = k;
    rp->seed = seed;
    kvf_spec_set_batch(&s, 1, NULL);
    kvf_recipe_set_seq_len(rp, 0, tokens);
    kvf_error err = {0};
    int rc = kvf_case_build(c, &s, &lim, &err);
    if (rc) CHECK_FAIL_AT("law case does not build: %s", err.msg);
    kvf_spec_free(&s);
    return rc;
}

/* |observed - expected| within 6 standard errors (a binomial count or a sample mean): the
 * seeds are fixed, so this is a sanity bound on the law, never a flaky one. */
static void check_near(const char *what, double observed, double expected, double std_error) {
    if (!(fabs(observed - expected) <= 6 * std_error + 1e-12))
        CHECK_FAIL_AT("expansion %d, %s: %.6g, expected %.6g (6 standard errors: %.3g)",
                      g_expansion, what, observed, expected, 6 * std_error);
}

static void check_count(const char *what, int64_t count, int64_t n, double p) {
    check_near(what, (double)count / (double)n, p, sqrt(p * (1 - p) / (double)n));
}

/* Moments and ranges of the continuous kinds, on 2^20 values each. */
static void test_distribution_laws(void) {
    const int64_t tokens = 8192, n = tokens * 128;
    for (int scale = -3; scale <= 5; scale += 8) {
        const double sd = ldexp(1.0, scale);
        kvf_case c;
        /* normal: mean 0, variance 2^(2 scale), |x| <= 2 sqrt(3) 2^scale (Irwin-Hall of 4). */
        if (law_case(&c, (kvf_dist){KVF_DIST_NORMAL, (int8_t)scale, 0},
                     (kvf_dist){KVF_DIST_UNIFORM, (int8_t)scale, 0}, 11, tokens))
            return;
        double sum = 0, sum2 = 0, sum4 = 0, maxabs = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = kvf_bf16_to_f32(c.k_cache[i]) / sd;
            sum += x, sum2 += x * x, sum4 += x * x * x * x;
            if (fabs(x) > maxabs) maxabs = fabs(x);
        }
        check_near("normal mean", sum / n, 0, 1 / sqrt((double)n));
        /* The Irwin-Hall sum of four uniforms has kurtosis 3 - 6/(5 * 4) = 2.7, so
         * Var(x^2) = 2.7 - 1. */
        check_near("normal variance", sum2 / n, 1, sqrt(1.7 / n));
        check_near("normal fourth moment", sum4 / n, 2.7, 0.01);
        CHECK(maxabs <= 2 * sqrt(3.0) * (1 + 1.0 / 128));
        CHECK(maxabs > 3.0); /* the tails reach past 3 sigma at this sample size */
        /* uniform (q): mean 0, variance 2^(2 scale) / 3, inside [-2^scale, 2^scale]. */
        int64_t nq = kvf_case_q_elems(&c);
        CHECK_INT_EQ(nq, 128);
        kvf_case_free(&c);
        kvf_dist u = {KVF_DIST_UNIFORM, (int8_t)scale, 0};
        if (law_case(&c, u, u, 12, tokens)) return;
        sum = sum2 = maxabs = 0;
        int64_t neg = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = kvf_bf16_to_f32(c.k_cache[i]) / sd;
            sum += x, sum2 += x * x;
            neg += x < 0;
            if (fabs(x) > maxabs) maxabs = fabs(x);
        }
        check_near("uniform mean", sum / n, 0, sqrt(1.0 / 3 / n));
        check_near("uniform variance", sum2 / n, 1.0 / 3, sqrt((1.0 / 5 - 1.0 / 9) / n));
        check_count("uniform negative share", neg, n, 0.5);
        CHECK(maxabs <= 1.0 && maxabs > 0.999);
        kvf_case_free(&c);
    }
    /* log-uniform, span 6, scale -2: floor(log2 |x|) + 2 uniform on [-6, 6] (13 values), the
     * significand uniform in [1, 2) (mean of log2 of it: 2 - 1 / ln 2), signs even. */
    kvf_case c;
    if (law_case(&c, (kvf_dist){KVF_DIST_LOG_UNIFORM, -2, 6}, (kvf_dist){KVF_DIST_NORMAL, 0, 0}, 13,
                 tokens))
        return;
    int64_t bins[13] = {0}, neg = 0, outside = 0;
    double frac = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)kvf_bf16_to_f32(c.k_cache[i]));
        neg += kvf_bf16_to_f32(c.k_cache[i]) < 0;
        int e;
        double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
        int bin = e - 1 + 2 + 6;
        if (bin == 13 && m == 0.5) bin = 12; /* 2 - 2^-9 and above round up to the next power */
        if (x == 0 || bin < 0 || bin > 12) {
            outside++;
            continue;
        }
        bins[bin]++;
        frac += log2(2 * m);
    }
    CHECK_INT_EQ(outside, 0);
    for (int b = 0; b < 13; b++)
        check_count("log-uniform exponent bin", bins[b], n, 1.0 / 13);
    check_count("log-uniform negative share", neg, n, 0.5);
    /* log2 of a bf16 significand: the rounding to 8 bits moves the mean by less than 2^-9. */
    check_near("log-uniform significand", frac / n, 2 - 1 / log(2.0),
               0.3 / sqrt((double)n) + 0.002);
    kvf_case_free(&c);
}

/* The discrete kinds: one-hot spikes, subnormals, signed zeros, extremes, constants. */
static void test_discrete_laws(void) {
    const int64_t tokens = 4096, n = tokens * 128;
    kvf_case c;
    /* one-hot, param 32: one spike at a uniform position per row of 128, each other value a
     * spike with probability 32/256. */
    if (law_case(&c, (kvf_dist){KVF_DIST_ONE_HOT, 1, 32}, (kvf_dist){KVF_DIST_ONE_HOT, 1, 0}, 21,
                 tokens))
        return;
    int64_t spikes = 0, others = 0, first_half = 0;
    for (int64_t r = 0; r < tokens; r++) {
        int64_t row = 0;
        for (int i = 0; i < 128; i++) {
            kvf_bf16 x = c.k_cache[r * 128 + i];
            if (x == 0x4000) /* 2^1 */
                row++;
            else if (x != 0)
                others++;
        }
        CHECK(row >= 1);
        spikes += row;
    }
    CHECK_INT_EQ(others, 0);
    check_count("one-hot extra spikes", spikes - tokens, n - tokens, 32.0 / 256);
    /* q, param 0: exactly one spike per row, at a uniform position. */
    int64_t q_spikes = 0;
    for (int i = 0; i < 128; i++)
        q_spikes += c.q[i] == 0x4000;
    CHECK_INT_EQ(q_spikes, 1);
    kvf_case_free(&c);
    if (law_case(&c, (kvf_dist){KVF_DIST_NORMAL, 0, 0}, (kvf_dist){KVF_DIST_ONE_HOT, 0, 0}, 22, 1))
        return;
    kvf_case_free(&c);
    /* Spike positions over many one-row cases (q of one head): uniform over the row. */
    for (uint64_t seed = 0; seed < 512; seed++) {
        if (law_case(&c, (kvf_dist){KVF_DIST_CONSTANT, 0, 0}, (kvf_dist){KVF_DIST_ONE_HOT, 0, 0},
                     1000 + seed, 1))
            return;
        for (int i = 0; i < 128; i++)
            if (c.q[i]) first_half += i < 64;
        kvf_case_free(&c);
    }
    check_count("one-hot spike position in the first half", first_half, 512, 0.5);
    /* subnormal: bits 1..255 (either sign), each equally likely. */
    if (law_case(&c, (kvf_dist){KVF_DIST_SUBNORMAL, 0, 0}, (kvf_dist){KVF_DIST_CONSTANT, 3, 0}, 23,
                 tokens))
        return;
    static int64_t bits[256];
    memset(bits, 0, sizeof bits);
    int64_t neg = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        kvf_bf16 x = c.k_cache[i];
        neg += x >> 15;
        if ((x & 0x7FFF) < 1 || (x & 0x7FFF) > 255)
            bad++;
        else
            bits[x & 0xFF]++;
    }
    CHECK_INT_EQ(bad, 0);
    check_count("subnormal negative share", neg, n, 0.5);
    check_count("subnormal value 1", bits[1], n, 1.0 / 255);
    check_count("subnormal value 0x7F", bits[0x7F], n, 1.0 / 255);
    check_count("subnormal value 0xFF", bits[0xFF], n, 1.0 / 255);
    int64_t subnormal = 0;
    for (int b = 1; b < 128; b++)
        subnormal += bits[b];
    check_count("subnormal share of true subnormals", subnormal, n, 127.0 / 255);
    for (int i = 0; i < 128; i++)
        CHECK_HEX_EQ(c.q[i], 0x4100); /* constant 2^3 */
    kvf_case_free(&c);
    /* signed zero: +0 3/8, -0 3/8, N(0, 2^scale) 1/4. */
    if (law_case(&c, (kvf_dist){KVF_DIST_SIGNED_ZERO, 2, 0}, (kvf_dist){KVF_DIST_NORMAL, 0, 0}, 24,
                 tokens))
        return;
    int64_t pz = 0, nz = 0, other = 0;
    double sum2 = 0;
    for (int64_t i = 0; i < n; i++) {
        kvf_bf16 x = c.k_cache[i];
        if (x == 0x0000)
            pz++;
        else if (x == 0x8000)
            nz++;
        else {
            double v = kvf_bf16_to_f32(x) / 4;
            other++;
            sum2 += v * v;
        }
    }
    check_count("signed-zero +0", pz, n, 3.0 / 8);
    check_count("signed-zero -0", nz, n, 3.0 / 8);
    check_near("signed-zero normal variance", sum2 / (double)other, 1, sqrt(1.7 / (double)other));
    kvf_case_free(&c);
    /* special: each of the seven extremes 1/64, else N(0, 2^scale). */
    if (law_case(&c, (kvf_dist){KVF_DIST_SPECIAL, 0, 0}, (kvf_dist){KVF_DIST_NORMAL, 0, 0}, 25,
                 tokens))
        return;
    static const kvf_bf16 extremes[] = {0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x0000, 0x8000, 0x0001};
    int64_t hits[7] = {0};
    for (int64_t i = 0; i < n; i++)
        for (int e = 0; e < 7; e++)
            hits[e] += c.k_cache[i] == extremes[e];
    for (int e = 0; e < 7; e++)
        check_count("special extreme", hits[e], n, 1.0 / 64);
    kvf_case_free(&c);
}

/* Poison and filler: NaN payloads uniform on 1..127 with even signs, infinities of even signs,
 * filler finite and nonzero in +-[0.5, 1) with its 7 significand bits uniform. */
static void test_poison_and_filler_laws(void) {
    kvf_limits lim = limits();
    static const uint8_t kinds[] = {KVF_POISON_TAIL_NAN | KVF_POISON_UNREF_NAN,
                                    KVF_POISON_TAIL_INF | KVF_POISON_UNREF_INF, 0};
    for (int k = 0; k < 3; k++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, "tail-nan", 9, &err), &err);
        s.recipe.expansion = (uint8_t)g_expansion;
        s.recipe.poison = kinds[k];
        s.recipe.spare_pages = 16;
        kvf_case c;
        CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
        kvf_spec_free(&s);
        const int64_t pe = kvf_case_page_elems(&c), se = (int64_t)c.num_kv_heads * c.head_dim;
        const int64_t last = c.kv_indices[c.kv_indptr[1] - 1];
        int64_t n = 0, neg = 0, bad = 0, low = 0, top = 0;
        for (int64_t i = 0; i < c.num_resident_pages; i++) {
            int64_t p = c.resident_pages[i];
            int referenced = 0;
            for (int32_t j = 0; j < c.kv_indptr[1]; j++)
                referenced |= c.kv_indices[j] == p;
            if (referenced && p != last) continue;
            int64_t from = p == last ? c.kv_last_page_len[0] * se : 0;
            for (int cache = 0; cache < 2; cache++)
                for (int64_t e = from; e < pe; e++) {
                    kvf_bf16 x = (cache ? c.v_cache : c.k_cache)[p * pe + e];
                    n++;
                    neg += x >> 15;
                    if (k == 0) {
                        bad += !kvf_bf16_is_nan(x);
                        low += (x & 0x7F) == 1;
                        top += (x & 0x7F) == 0x7F;
                    } else if (k == 1) {
                        bad += !kvf_bf16_is_inf(x);
                    } else {
                        float v = fabsf(kvf_bf16_to_f32(x));
                        bad += !(v >= 0.5f && v < 1.0f);
                        low += (x & 0x7F) == 0;
                        top += (x & 0x7F) == 0x7F;
                    }
                }
        }
        CHECK(n > 100000);
        CHECK_INT_EQ(bad, 0);
        check_count("poison/filler negative share", neg, n, 0.5);
        if (k == 0) {
            check_count("NaN payload 1", low, n, 1.0 / 127);
            check_count("NaN payload 0x7F", top, n, 1.0 / 127);
        } else if (k == 2) {
            check_count("filler significand 0", low, n, 1.0 / 128);
            check_count("filler significand 0x7F", top, n, 1.0 / 128);
        }
        kvf_case_free(&c);
    }
}

/* Each behavioural test once per expansion. */
#define BOTH_EXPANSIONS(name)                                                                      \
    static void name##_e1(void) {                                                                  \
        g_expansion = KVF_EXPANSION_1;                                                             \
        name();                                                                                    \
    }                                                                                              \
    static void name##_e2(void) {                                                                  \
        g_expansion = KVF_EXPANSION_2;                                                             \
        name();                                                                                    \
        g_expansion = KVF_EXPANSION_1;                                                             \
    }
BOTH_EXPANSIONS(test_preset_round_trip)
BOTH_EXPANSIONS(test_ascending_logits)
BOTH_EXPANSIONS(test_random_round_trip_and_coverage)
BOTH_EXPANSIONS(test_generator_is_deterministic)
BOTH_EXPANSIONS(test_poison_reaches_tails_and_unreferenced_pages)
BOTH_EXPANSIONS(test_high_ids_cross_32bit_offsets)
BOTH_EXPANSIONS(test_malformed_inputs_rejected)
BOTH_EXPANSIONS(test_explicit_tensors_round_trip)
BOTH_EXPANSIONS(test_arbitrary_bytes)
BOTH_EXPANSIONS(test_distribution_laws)
BOTH_EXPANSIONS(test_discrete_laws)
BOTH_EXPANSIONS(test_poison_and_filler_laws)

static const check_test tests[] = {
    {"budgets_refuse_costly_cases", test_budgets_refuse_costly_cases},
    {"versions_round_trip", test_versions_round_trip},
    {"preset_round_trip", test_preset_round_trip_e1},
    {"preset_round_trip_expansion2", test_preset_round_trip_e2},
    {"ascending_logits", test_ascending_logits_e1},
    {"ascending_logits_expansion2", test_ascending_logits_e2},
    {"random_round_trip_and_coverage", test_random_round_trip_and_coverage_e1},
    {"random_round_trip_and_coverage_expansion2", test_random_round_trip_and_coverage_e2},
    {"generator_is_deterministic", test_generator_is_deterministic_e1},
    {"generator_is_deterministic_expansion2", test_generator_is_deterministic_e2},
    {"poison_reaches_tails_and_unreferenced_pages",
     test_poison_reaches_tails_and_unreferenced_pages_e1},
    {"poison_reaches_tails_and_unreferenced_pages_expansion2",
     test_poison_reaches_tails_and_unreferenced_pages_e2},
    {"high_ids_cross_32bit_offsets", test_high_ids_cross_32bit_offsets_e1},
    {"high_ids_cross_32bit_offsets_expansion2", test_high_ids_cross_32bit_offsets_e2},
    {"malformed_inputs_rejected", test_malformed_inputs_rejected_e1},
    {"malformed_inputs_rejected_expansion2", test_malformed_inputs_rejected_e2},
    {"invalid_overrides_rejected_by_build", test_invalid_overrides_rejected_by_build},
    {"explicit_tensors_round_trip", test_explicit_tensors_round_trip_e1},
    {"explicit_tensors_round_trip_expansion2", test_explicit_tensors_round_trip_e2},
    {"arbitrary_bytes", test_arbitrary_bytes_e1},
    {"arbitrary_bytes_expansion2", test_arbitrary_bytes_e2},
    {"validate_hand_made", test_validate_hand_made},
    {"distribution_laws", test_distribution_laws_e1},
    {"distribution_laws_expansion2", test_distribution_laws_e2},
    {"discrete_laws", test_discrete_laws_e1},
    {"discrete_laws_expansion2", test_discrete_laws_e2},
    {"poison_and_filler_laws", test_poison_and_filler_laws_e1},
    {"poison_and_filler_laws_expansion2", test_poison_and_filler_laws_e2},
    {NULL, NULL},
};

CHECK_MAIN(tests)
