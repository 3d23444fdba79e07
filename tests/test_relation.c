/* Unit tests for the invariance relations (kvfuzz/relation.h): the derived cases are valid and
 * deterministic in their seed; cpu-ref and cpu-splitkv hold placement, head permutation and
 * v-scaling bit for bit on generated cases, and cpu-ref holds batch invariance; the int32
 * page-offset mutant breaks placement once pages move past the int32 edge; compare maps heads,
 * sequences and the v scale back, and counts a planted difference. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernel_outputs.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/relation.h"
#include "kvfuzz/spec.h"

#define GENERATED_CASES 150

static int run(const kvf_kernel *k, const kvf_case *c, outputs *out) {
    kvf_error err = {0};
    out->o = malloc((size_t)(kvf_case_o_elems(c) + 1) * sizeof *out->o);
    out->lse = malloc((size_t)(kvf_case_lse_elems(c) + 1) * sizeof *out->lse);
    CHECK(out->o && out->lse);
    int rc = kvf_kernel_run_once(k, c, out->o, out->lse, &err);
    if (rc && rc != KVF_EUNSUPPORTED) CHECK_FAIL_AT("%s failed: %s", k->name, err.msg);
    return rc;
}

static int build_random(uint64_t seed, kvf_case *c) {
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = 1 << 18;
    kvf_spec s;
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err = {0};
    CHECK_OK(kvf_spec_random(&s, seed, &ro, &err), &err);
    int rc = kvf_case_build(c, &s, &lim, &err);
    kvf_spec_free(&s);
    return rc;
}

/* Runs k on c and on each derivation; counts pairs checked and broken per relation. */
static void relate(const kvf_kernel *k, const kvf_case *c, uint64_t seed, int64_t *checked,
                   int64_t *broken) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    outputs base;
    if (run(k, c, &base)) {
        outputs_free(&base);
        return;
    }
    for (int r = 0; r < KVF_RELATION_COUNT; r++) {
        kvf_relation_pair p;
        kvf_error err = {0};
        if (kvf_relation_is_replay((kvf_relation)r)) continue; /* CUDA only: test_gpu_graph */
        int rc = kvf_relation_derive(&p, (kvf_relation)r, c, seed, &lim, &err);
        if (rc == KVF_EUNSUPPORTED) continue;
        CHECK_OK(rc, &err);
        outputs other;
        if (run(k, &p.derived, &other) == 0) {
            kvf_relation_diff first;
            checked[r]++;
            if (kvf_relation_compare(&p, c, base.o, base.lse, other.o, other.lse, &first)) {
                broken[r]++;
                if (broken[r] == 1)
                    printf("  %s broke %s (%s): seed %llu, %s b=%d h=%d d=%d %#x vs %#x\n", k->name,
                           kvf_relation_name((kvf_relation)r), p.what, (unsigned long long)seed,
                           first.lse ? "lse" : "o", first.b, first.h, first.d, first.bits,
                           first.derived_bits);
            }
        }
        outputs_free(&other);
        kvf_relation_pair_free(&p);
    }
    outputs_free(&base);
}

/* A random spec from seed (at most max_work) with quantized caches of the given scale
 * granularity: one scale a cache without spread below per-head, 1 without scales. */
static void quantized_spec(kvf_spec *s, uint64_t seed, int64_t max_work, uint8_t granularity) {
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = max_work;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_random(s, seed, &ro, &err), &err);
    kvf_prng r;
    kvf_prng_seed_stream(&r, seed, 21);
    kvf_recipe_draw_quant(&s->quant, &s->recipe, &r);
    s->quant.kv.granularity = granularity;
    if (granularity <= KVF_SCALE_TENSOR) s->quant.spread = s->quant.fine = 0;
    if (granularity == KVF_SCALE_NONE) s->quant.k_scale = s->quant.v_scale = 1.0f;
}

/* Quantized caches: placement, head permutation and the batch relation move the scales with
 * their pages and heads, v-scaling scales the value scales, and the correct kernels hold them
 * bit for bit (cpu-ref, whose sequences are computed alone, the batch relation too); v-scaling
 * declines FP8 values without scales. */
static void quantized_cases_hold_the_relations(void) {
    const char *names[2] = {"cpu-ref", "cpu-splitkv"};
    kvf_limits lim;
    kvf_limits_default(&lim);
    for (int i = 0; i < 2; i++) {
        const kvf_kernel *k = kvf_kernel_find(names[i]);
        CHECK(k != NULL);
        int64_t checked[KVF_RELATION_COUNT] = {0}, broken[KVF_RELATION_COUNT] = {0};
        int per_gran[KVF_SCALE_GRANULARITY_COUNT] = {0};
        for (uint64_t seed = 1; seed <= 60; seed++) {
            kvf_spec s;
            kvf_error err = {0};
            quantized_spec(&s, seed, 1 << 16, (uint8_t)(seed % 4));
            kvf_case c;
            if (kvf_case_build(&c, &s, &lim, &err) == 0) {
                per_gran[c.quant.granularity]++;
                relate(k, &c, seed, checked, broken);
                if (c.quant.granularity == KVF_SCALE_NONE) { /* FP8 v without scales */
                    kvf_relation_pair p;
                    CHECK_INT_EQ(
                        kvf_relation_derive(&p, KVF_RELATION_V_SCALING, &c, seed, &lim, &err),
                        KVF_EUNSUPPORTED);
                    kvf_relation_pair_free(&p);
                }
                kvf_case_free(&c);
            }
            kvf_spec_free(&s);
        }
        const kvf_relation held[4] = {KVF_RELATION_PLACEMENT, KVF_RELATION_HEAD_PERMUTATION,
                                      KVF_RELATION_BATCH, KVF_RELATION_V_SCALING};
        for (int j = 0; j < 4; j++) {
            const kvf_relation r = held[j];
            printf("  %s on quantized cases, %s: %lld pair(s), %lld broken\n", names[i],
                   kvf_relation_name(r), (long long)checked[r], (long long)broken[r]);
            CHECK(checked[r] >= 10);
            if (r != KVF_RELATION_BATCH || i == 0) CHECK_INT_EQ(broken[r], 0);
        }
        for (int g = KVF_SCALE_TENSOR; g < KVF_SCALE_GRANULARITY_COUNT; g++)
            CHECK(per_gran[g] >= 5);
    }
}

/* A tensor or per-head value scale is read for every row, an empty sequence's too: v-scaling
 * never scales one past f32's range, even when no token is in the batch (the derived case
 * would hold an infinite scale, and a correct kernel's 0 x inf there is NaN). */
static void v_scaling_keeps_every_value_scale_finite(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    int derived = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        kvf_spec s;
        kvf_error err = {0};
        quantized_spec(&s, seed, 1 << 14, seed % 2 ? KVF_SCALE_TENSOR : KVF_SCALE_HEAD);
        for (uint32_t b = 0; b < s.recipe.batch_size; b++)
            kvf_recipe_set_seq_len(&s.recipe, b, 0);
        kvf_case c;
        if (kvf_case_build(&c, &s, &lim, &err) == 0 && c.batch_size > 0) {
            for (int64_t i = 0; i < kvf_case_scale_count(&c); i++)
                c.v_scale[i] = 0x1.8p126f; /* 2^1 x this is past f32's top */
            kvf_relation_pair p;
            const int rc = kvf_relation_derive(&p, KVF_RELATION_V_SCALING, &c, seed, &lim, &err);
            if (rc == 0) {
                derived++;
                CHECK(p.shift < 0);
                for (int64_t i = 0; i < kvf_case_scale_count(&p.derived); i++)
                    CHECK(isfinite(p.derived.v_scale[i]));
            } else {
                CHECK_INT_EQ(rc, KVF_EUNSUPPORTED);
            }
            kvf_relation_pair_free(&p);
            kvf_case_free(&c);
        }
        kvf_spec_free(&s);
    }
    printf("  v-scaling of empty batches with value scales near f32's top: %d derived\n", derived);
    CHECK(derived >= 10);
}

static void correct_kernels_hold_the_default_relations(void) {
    const char *names[2] = {"cpu-ref", "cpu-splitkv"};
    for (int i = 0; i < 2; i++) {
        const kvf_kernel *k = kvf_kernel_find(names[i]);
        CHECK(k != NULL);
        int64_t checked[KVF_RELATION_COUNT] = {0}, broken[KVF_RELATION_COUNT] = {0};
        for (uint64_t seed = 1; seed <= GENERATED_CASES; seed++) {
            kvf_case c;
            if (build_random(seed, &c) == 0) relate(k, &c, seed, checked, broken);
            kvf_case_free(&c);
        }
        for (int r = 0; r < KVF_RELATION_COUNT; r++) {
            printf("  %s %s: %lld pair(s), %lld broken\n", names[i],
                   kvf_relation_name((kvf_relation)r), (long long)checked[r], (long long)broken[r]);
            if (kvf_relation_is_replay((kvf_relation)r)) continue;
            CHECK(checked[r] >= GENERATED_CASES / 4); /* the relations apply to most cases */
            if (kvf_relation_default_promises() & KVF_RELATION_BIT(r)) CHECK_INT_EQ(broken[r], 0);
        }
        /* cpu-ref computes each sequence on its own: batch-invariant by construction */
        if (i == 0) CHECK_INT_EQ(broken[KVF_RELATION_BATCH], 0);
    }
}

static void derivation_is_deterministic_and_valid(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_case c;
    CHECK_INT_EQ(build_random(7, &c), 0);
    for (int r = 0; r < KVF_RELATION_COUNT; r++) {
        kvf_relation_pair a, b;
        kvf_error err = {0};
        int ra = kvf_relation_derive(&a, (kvf_relation)r, &c, 99, &lim, &err);
        int rb = kvf_relation_derive(&b, (kvf_relation)r, &c, 99, &lim, &err);
        CHECK_INT_EQ(ra, rb);
        if (ra == 0) {
            CHECK_OK(kvf_case_validate(&a.derived, &lim, &err), &err);
            CHECK_INT_EQ(a.derived.num_pages, b.derived.num_pages);
            CHECK_INT_EQ(a.derived.batch_size, b.derived.batch_size);
            int64_t entries = a.derived.kv_indptr[a.derived.batch_size];
            CHECK(memcmp(a.derived.kv_indices, b.derived.kv_indices,
                         (size_t)entries * sizeof(int32_t)) == 0);
            CHECK(memcmp(a.derived.q, b.derived.q,
                         (size_t)kvf_case_q_elems(&a.derived) * sizeof(kvf_bf16)) == 0);
            CHECK(strlen(a.what) > 0);
        }
        kvf_relation_pair_free(&a);
        kvf_relation_pair_free(&b);
    }
    kvf_case_free(&c);
    CHECK_INT_EQ(kvf_relation_parse("placement"), KVF_RELATION_PLACEMENT);
    CHECK_INT_EQ(kvf_relation_parse("batch-invariance"), KVF_RELATION_BATCH);
    CHECK_INT_EQ(kvf_relation_parse("nonsense"), -1);
    CHECK(!(kvf_relation_default_promises() & KVF_RELATION_BIT(KVF_RELATION_BATCH)));
}

/* The seed shape moved past page id 65,536: the int32-offset mutant reads the wrong page. */
static void int32_offset_mutant_breaks_placement(void) {
    const kvf_kernel *mut = kvf_kernel_find("cpu-splitkv/mut=int32-offset");
    CHECK(mut != NULL);
    int64_t checked[KVF_RELATION_COUNT] = {0}, broken[KVF_RELATION_COUNT] = {0};
    kvf_case c;
    CHECK_INT_EQ(build_random(3, &c), 0);
    for (uint64_t seed = 1; seed <= 12; seed++)
        relate(mut, &c, seed, checked, broken);
    kvf_case_free(&c);
    CHECK(checked[KVF_RELATION_PLACEMENT] > 0);
    CHECK(broken[KVF_RELATION_PLACEMENT] > 0);
}

/* compare: heads and sequences map back; a planted difference is found where it was put. */
static void compare_maps_back_and_counts(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_case c;
    CHECK_INT_EQ(build_random(11, &c), 0);
    const kvf_kernel *k = kvf_kernel_find("cpu-ref");
    for (int r = 0; r < KVF_RELATION_COUNT; r++) {
        kvf_relation_pair p;
        kvf_error err = {0};
        if (kvf_relation_is_replay((kvf_relation)r) ||
            kvf_relation_derive(&p, (kvf_relation)r, &c, 5, &lim, &err))
            continue;
        outputs a, b;
        CHECK_INT_EQ(run(k, &c, &a), 0);
        CHECK_INT_EQ(run(k, &p.derived, &b), 0);
        kvf_relation_diff f;
        CHECK_INT_EQ(kvf_relation_compare(&p, &c, a.o, a.lse, b.o, b.lse, &f), 0);
        CHECK(f.compared > 0);
        /* plant: the lse of the first compared row */
        for (int32_t bb = 0; bb < c.batch_size; bb++) {
            int32_t b2 = p.seq_of[bb];
            if (b2 < 0) continue;
            int64_t row2 = (int64_t)b2 * c.num_qo_heads + p.head_of[0];
            b.lse[row2] = b.lse[row2] == 1.5f ? 2.5f : 1.5f; /* any other value */
            CHECK_INT_EQ(kvf_relation_compare(&p, &c, a.o, a.lse, b.o, b.lse, &f), 1);
            CHECK_INT_EQ(f.lse, 1);
            CHECK_INT_EQ(f.b, bb);
            CHECK_INT_EQ(f.h, 0);
            break;
        }
        outputs_free(&a);
        outputs_free(&b);
        kvf_relation_pair_free(&p);
    }
    kvf_case_free(&c);
}

/* graph-replay's capture case: the same batch, shape, pool and queries, every sequence a
 * strictly shorter prefix of its own (its first pages, the same ids), so that the capture's
 * longest sequence is shorter than the case's. */
static void graph_capture_case_is_a_shorter_prefix(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    for (uint64_t seed = 1; seed <= 40; seed++) {
        kvf_case c;
        if (build_random(seed, &c)) continue;
        kvf_relation_pair p;
        kvf_error err = {0};
        const int rc = kvf_relation_derive(&p, KVF_RELATION_GRAPH_REPLAY, &c, seed, &lim, &err);
        if (rc == KVF_EUNSUPPORTED) {
            CHECK_INT_EQ(kvf_case_max_seq_len(&c), 0); /* only a batch without tokens */
        } else {
            CHECK_OK(rc, &err);
            const kvf_case *d = &p.derived;
            CHECK_INT_EQ(d->batch_size, c.batch_size);
            CHECK_INT_EQ(d->num_pages, c.num_pages);
            CHECK_INT_EQ(d->num_qo_heads, c.num_qo_heads);
            CHECK(kvf_case_max_seq_len(d) < kvf_case_max_seq_len(&c));
            CHECK(memcmp(d->q, c.q, (size_t)kvf_case_q_elems(&c) * sizeof *c.q) == 0);
            for (int32_t b = 0; b < c.batch_size; b++) {
                const int64_t n = kvf_case_seq_len(&c, b), m = kvf_case_seq_len(d, b);
                CHECK(n == 0 ? m == 0 : m < n);
                const int32_t pages = d->kv_indptr[b + 1] - d->kv_indptr[b];
                CHECK(memcmp(d->kv_indices + d->kv_indptr[b], c.kv_indices + c.kv_indptr[b],
                             (size_t)pages * sizeof(int32_t)) == 0);
                CHECK_INT_EQ(p.seq_of[b], b);
            }
            CHECK(kvf_relation_is_replay(p.relation));
        }
        kvf_relation_pair_free(&p);
        kvf_case_free(&c);
    }
}

/* docs/invariance.md's table names every relation of relations.def, with its default promise,
 * and no other. */
static void docs_table_matches_def(void) {
    const char *src = getenv("KVF_SOURCE_DIR");
    char path[4096], line[1024];
    snprintf(path, sizeof path, "%s/docs/invariance.md", src ? src : ".");
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    int seen[KVF_RELATION_COUNT] = {0}, rows = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64], promised[16];
        if (sscanf(line, "| `%63[^`]` | %15[a-z] |", name, promised) != 2 ||
            (strcmp(promised, "yes") != 0 && strcmp(promised, "no") != 0))
            continue; /* not a row of the relations' table */
        rows++;
        const int r = kvf_relation_parse(name);
        if (r < 0) {
            CHECK_FAIL_AT("docs/invariance.md lists \"%s\", which relations.def does not", name);
            continue;
        }
        seen[r]++;
        const int dflt = (kvf_relation_default_promises() & KVF_RELATION_BIT(r)) != 0;
        if (strcmp(promised, dflt ? "yes" : "no") != 0)
            CHECK_FAIL_AT("docs/invariance.md says %s is promised by default: %s", name, promised);
    }
    fclose(f);
    for (int r = 0; r < KVF_RELATION_COUNT; r++)
        if (seen[r] != 1)
            CHECK_FAIL_AT("docs/invariance.md lists %s %d times",
                          kvf_relation_name((kvf_relation)r), seen[r]);
    CHECK_INT_EQ(rows, KVF_RELATION_COUNT);
}

static const check_test tests[] = {
    {"quantized_cases_hold_the_relations", quantized_cases_hold_the_relations},
    {"v_scaling_keeps_every_value_scale_finite", v_scaling_keeps_every_value_scale_finite},
    {"docs_table_matches_def", docs_table_matches_def},
    {"correct_kernels_hold_the_default_relations", correct_kernels_hold_the_default_relations},
    {"derivation_is_deterministic_and_valid", derivation_is_deterministic_and_valid},
    {"int32_offset_mutant_breaks_placement", int32_offset_mutant_breaks_placement},
    {"compare_maps_back_and_counts", compare_maps_back_and_counts},
    {"graph_capture_case_is_a_shorter_prefix", graph_capture_case_is_a_shorter_prefix},
    {NULL, NULL},
};

CHECK_MAIN(tests)
