/* A FlashInfer-Bench dataset's workloads into case files (kvfuzz/fib.h's importer): a dataset
 * written by kvf_fib_export read back bit for bit, other families skipped, a definition without
 * workloads told, a repeated uuid and a bad line refused, and the root of a workloads file given
 * alone; FP8 findings exported as FP8 bytes and scales and imported back into the same case, and
 * malformed FP8 workloads refused. */
#include <stdio.h>
#include <sys/stat.h>

#include "check.h"
#include "kvfuzz/fib.h"
#include "kvfuzz/file.h"
#include "kvfuzz/safetensors.h"

#define DEF "gqa_paged_decode_h20_kv4_d128_ps64"

static void write_file(const char *dir, const char *rel, const char *text) {
    char path[1024], sub[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(sub, sizeof sub, "%s", path);
    *strrchr(sub, '/') = 0;
    kvf_error err = {0};
    CHECK_OK(kvf_mkdirs(sub, &err), &err);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

typedef struct told {
    int cases, warnings;
    char last_path[1024], warning[512];
} told;

static void on_case(void *ctx, const kvf_fib_imported *x) {
    told *t = ctx;
    t->cases++;
    CHECK_STR_EQ(x->def->name, DEF);
    CHECK(x->c->batch_size == 1 && x->spec->has_origin);
    snprintf(t->last_path, sizeof t->last_path, "%s", x->path);
}

static void on_warn(void *ctx, const char *message) {
    told *t = ctx;
    t->warnings++;
    snprintf(t->warning, sizeof t->warning, "%s", message);
}

/* A dataset of one exported case (and a definition of another family, and one without
 * workloads); *line gets the workload line. */
static void make_dataset(const char *root, const kvf_spec *s, const kvf_case *c, char **line) {
    kvf_error err = {0};
    CHECK_OK(kvf_fib_export(root, DEF, "w1", s, c, line, &err), &err);
    char *def = kvf_fib_definition_json(20, 4, 128, 64, KVF_KV_BF16),
         *other = kvf_fib_definition_json(8, 8, 64, 1, KVF_KV_BF16);
    write_file(root, "definitions/gqa_paged/" DEF ".json", def);
    write_file(root, "definitions/gqa_paged/gqa_paged_decode_h8_kv8_d64_ps1.json", other);
    write_file(root, "definitions/gemm/gemm_n128.json", "{}");
    char text[65536];
    snprintf(text, sizeof text, "\n%s\n  \n", *line);
    write_file(root, "workloads/gqa_paged/" DEF ".jsonl", text);
    free(def);
    free(other);
}

static void test_dataset_round_trip(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s, back;
    kvf_case c, cb;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    char root[] = "/tmp/kvfuzz-test-fib-wl-XXXXXX", out[128];
    CHECK(mkdtemp(root) != NULL);
    snprintf(out, sizeof out, "%s/cases", root);
    CHECK(mkdir(out, 0777) == 0);
    char *line = NULL;
    make_dataset(root, &s, &c, &line);
    /* A value for a const axis, and an axis the definition does not have: ignored, as FIB's
     * get_input_shapes ignores them (docs/fib.md); the case keeps the definition's shape. */
    const char *axes = strstr(line, "\"axes\":{");
    CHECK(axes != NULL);
    if (axes) {
        const int at = (int)(axes - line) + (int)strlen("\"axes\":{");
        char text[65536];
        snprintf(text, sizeof text, "\n%.*s\"num_qo_heads\":8,\"no_such_axis\":3,%s\n  \n", at,
                 line, line + at);
        write_file(root, "workloads/gqa_paged/" DEF ".jsonl", text);
    }
    told t = {0};
    kvf_fib_importer im = {.out_dir = out, .on_case = on_case, .warn = on_warn, .ctx = &t};
    im.opts.root = root;
    im.opts.limits = lim;
    CHECK_OK(kvf_fib_import_dataset(&im, root, NULL, &err), &err);
    CHECK_INT_EQ(im.written, 1);
    CHECK_INT_EQ(t.cases, 1);
    CHECK_INT_EQ(im.skipped, 1); /* gemm */
    CHECK_INT_EQ(t.warnings, 1); /* h8_kv8 has no workloads file */
    CHECK_STR_CONTAINS(t.warning, "gqa_paged_decode_h8_kv8_d64_ps1 has no workloads file under ");
    char want[256];
    snprintf(want, sizeof want, "%s/" DEF "_w1.kvfz", out);
    CHECK_STR_EQ(t.last_path, want);
    CHECK_OK(kvf_case_load(want, &back, &cb, &lim, &err), &err);
    CHECK(cb.batch_size == c.batch_size && cb.num_pages == c.num_pages);
    CHECK(cb.num_qo_heads == 20 && cb.num_kv_heads == 4);
    CHECK(memcmp(cb.q, c.q, (size_t)kvf_case_q_elems(&c) * 2) == 0);
    CHECK(memcmp(cb.kv_indices, c.kv_indices, (size_t)c.kv_indptr[c.batch_size] * 4) == 0);
    CHECK_STR_EQ(back.origin.workload_uuid, "w1");
    /* The same workload again in this import: refused by its uuid. */
    CHECK_INT_EQ(kvf_fib_import_dataset(&im, root, DEF, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "line 2: workload uuid w1 appears twice for " DEF);
    CHECK_INT_EQ(kvf_fib_import_dataset(&im, root, "nothing_here", &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "has no definition nothing_here under definitions/");
    kvf_fib_importer_free(&im);
    CHECK(im.names == NULL && im.nnames == 0);
    kvf_case_free(&cb);
    kvf_spec_free(&back);
    free(line);
    CHECK_INT_EQ(kvf_remove_tree(root), 0);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* A line kvf_fib_import refuses: the sentence names the file and line once. */
static void test_bad_line(void) {
    char root[] = "/tmp/kvfuzz-test-fib-wl-XXXXXX", path[128];
    CHECK(mkdtemp(root) != NULL);
    write_file(root, "w.jsonl", "\n{\"uuid\": 3}\n");
    snprintf(path, sizeof path, "%s/w.jsonl", root);
    kvf_fib_definition def;
    char *text = kvf_fib_definition_json(20, 4, 128, 64, KVF_KV_BF16);
    kvf_error err = {0};
    CHECK_OK(kvf_fib_definition_parse(&def, text, strlen(text), "generated", &err), &err);
    free(text);
    kvf_fib_importer im = {.out_dir = root};
    im.opts.root = root;
    kvf_limits_default(&im.opts.limits);
    CHECK(kvf_fib_import_workloads(&im, &def, path, &err) < 0);
    char where[160];
    snprintf(where, sizeof where, "%s line 2", path);
    CHECK(strncmp(err.msg, where, strlen(where)) == 0);
    CHECK(strstr(err.msg + 1, where) == NULL);
    CHECK_INT_EQ(im.written, 0);
    kvf_fib_importer_free(&im);
    CHECK_INT_EQ(kvf_remove_tree(root), 0);
}

static void test_guess_root(void) {
    char r[256];
    kvf_fib_guess_root("data/set/workloads/gqa_paged/x.jsonl", r, sizeof r);
    CHECK_STR_EQ(r, "data/set");
    kvf_fib_guess_root("/workloads/gqa_paged/x.jsonl", r, sizeof r);
    CHECK_STR_EQ(r, "/");
    kvf_fib_guess_root("workloads/gqa_paged/x.jsonl", r, sizeof r);
    CHECK_STR_EQ(r, ".");
    kvf_fib_guess_root("some/dir/x.jsonl", r, sizeof r);
    CHECK_STR_EQ(r, "some/dir");
    kvf_fib_guess_root("/x.jsonl", r, sizeof r);
    CHECK_STR_EQ(r, "/");
    kvf_fib_guess_root("x.jsonl", r, sizeof r);
    CHECK_STR_EQ(r, ".");
}

/* Two cases hold the same problem bit for bit: shape, table, q, both caches, the quantization
 * and the scales (resident pages aside: every page of an imported pool holds data). */
static void check_same_case(const kvf_case *a, const kvf_case *b) {
    CHECK(a->num_qo_heads == b->num_qo_heads && a->num_kv_heads == b->num_kv_heads &&
          a->head_dim == b->head_dim && a->page_size == b->page_size &&
          a->batch_size == b->batch_size && a->num_pages == b->num_pages);
    if (a->batch_size != b->batch_size || a->num_pages != b->num_pages) return;
    CHECK_HEX_EQ(kvf_f32_bits(a->sm_scale), kvf_f32_bits(b->sm_scale));
    const int32_t B = a->batch_size;
    CHECK(memcmp(a->kv_indptr, b->kv_indptr, (size_t)(B + 1) * 4) == 0);
    CHECK(memcmp(a->kv_indices, b->kv_indices, (size_t)a->kv_indptr[B] * 4) == 0);
    for (int32_t i = 0; i < B; i++) /* an empty sequence's length is not stored */
        CHECK(a->kv_indptr[i] == a->kv_indptr[i + 1] ||
              a->kv_last_page_len[i] == b->kv_last_page_len[i]);
    CHECK(memcmp(a->q, b->q, (size_t)kvf_case_q_elems(a) * 2) == 0);
    CHECK(memcmp(a->k_cache, b->k_cache, a->pool_bytes) == 0);
    CHECK(memcmp(a->v_cache, b->v_cache, a->pool_bytes) == 0);
    CHECK(memcmp(&a->quant, &b->quant, sizeof a->quant) == 0);
    CHECK_INT_EQ(kvf_case_scale_count(a), kvf_case_scale_count(b));
    if (kvf_case_scale_count(a) && kvf_case_scale_count(a) == kvf_case_scale_count(b)) {
        CHECK(memcmp(a->k_scale, b->k_scale, a->scale_bytes) == 0);
        CHECK(memcmp(a->v_scale, b->v_scale, a->scale_bytes) == 0);
    }
}

/* The blob of an FP8 export: the caches as the bytes whose images the case holds, F8_E4M3 or
 * F8_E5M2, and the two scales as F32 [1]. */
static void check_fp8_blob(const char *root, const char *def, const kvf_case *c, int dtype) {
    char path[1024];
    snprintf(path, sizeof path, "%s/blob/workloads/gqa_paged/%s/%s_w1.safetensors", root, def, def);
    kvf_st_file f;
    kvf_error err = {0};
    CHECK_OK(kvf_st_load(&f, path, (size_t)1 << 30, &err), &err);
    const kvf_bf16 *images[2] = {c->k_cache, c->v_cache};
    const float *scales[2] = {c->k_scale, c->v_scale};
    static const char *const caches[2] = {"k_cache", "v_cache"}, *names[2] = {"k_scale", "v_scale"};
    for (int w = 0; w < 2; w++) {
        const kvf_st_tensor *t = kvf_st_find(&f, caches[w]);
        CHECK(t && t->dtype == (dtype == KVF_KV_E4M3 ? KVF_ST_F8_E4M3 : KVF_ST_F8_E5M2));
        CHECK(t && t->rank == 4 && t->shape[0] == c->num_pages && t->nbytes * 2 == c->pool_bytes);
        int64_t bad = -1;
        for (int64_t i = 0; t && i < t->elems && bad < 0; i++)
            if (kvf_fp8_to_bf16(t->data[i], dtype) != images[w][i]) bad = i;
        CHECK_INT_EQ(bad, -1);
        const kvf_st_tensor *sc = kvf_st_find(&f, names[w]);
        CHECK(sc && sc->dtype == KVF_ST_F32 && sc->rank == 1 && sc->shape[0] == 1);
        CHECK(sc && memcmp(sc->data, scales[w], 4) == 0);
    }
    kvf_st_free(&f);
}

/* An FP8 finding with one scale per cache goes out as kvfuzz's FP8 definition of its shape (FP8
 * bytes, F32 scales) and comes back as the same case, NaN and inf bytes of the poisoned slots
 * and pages included, in memory and through its case file; a page-size-1 shape has no
 * kv_last_page_len there either. */
static void test_fp8_round_trip(void) {
    static const struct {
        const char *preset;
        int dtype;
        float k_scale, v_scale;
        uint8_t poison;
    } rows[] = {
        {"tail-nan", KVF_KV_E4M3, 0.375f, 3.0f, KVF_POISON_TAIL_NAN | KVF_POISON_UNREF_NAN},
        {"tail-nan", KVF_KV_E5M2, 0x1.8p-20f, 0x1.fffffep+100f,
         KVF_POISON_TAIL_INF | KVF_POISON_UNREF_NAN},
        {"page1", KVF_KV_E5M2, 1.0f, 0x1p-149f, 0},
        {"gqa7", KVF_KV_E4M3, 0x1.234568p-3f, 7.5f, KVF_POISON_TAIL_NAN},
    };
    kvf_limits lim;
    kvf_limits_default(&lim);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        kvf_spec s, back;
        kvf_case c, cb;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, rows[r].preset, 3, &err), &err);
        s.recipe.poison = rows[r].poison;
        s.quant =
            (kvf_quant_recipe){{(uint8_t)rows[r].dtype, (uint8_t)rows[r].dtype, KVF_SCALE_TENSOR},
                               rows[r].k_scale,
                               rows[r].v_scale,
                               0,
                               0};
        CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
        char root[] = "/tmp/kvfuzz-test-fib-fp8-XXXXXX", def_name[160];
        CHECK(mkdtemp(root) != NULL);
        kvf_fib_definition_name(def_name, sizeof def_name, c.num_qo_heads, c.num_kv_heads,
                                c.head_dim, c.page_size, rows[r].dtype);
        char *line = NULL;
        CHECK_OK(kvf_fib_export(root, def_name, "w1", &s, &c, &line, &err), &err);
        check_fp8_blob(root, def_name, &c, rows[r].dtype);
        CHECK_STR_CONTAINS(line, "\"k_scale\":{\"type\":\"safetensors\"");
        CHECK((strstr(line, "kv_last_page_len") != NULL) == (c.page_size != 1));
        char *text = kvf_fib_definition_json(c.num_qo_heads, c.num_kv_heads, c.head_dim,
                                             c.page_size, rows[r].dtype);
        kvf_fib_definition def;
        CHECK_OK(kvf_fib_definition_parse(&def, text, strlen(text), "generated", &err), &err);
        CHECK(strcmp(def.name, def_name) == 0 && def.kv_dtype == rows[r].dtype);
        kvf_fib_import_opts opts = {.root = root, .seed = 0, .limits = lim};
        CHECK_OK(kvf_fib_import(&back, &def, line, strlen(line), "the line", &opts, &err), &err);
        CHECK(back.has_explicit && back.quant.kv.granularity == KVF_SCALE_TENSOR);
        CHECK_HEX_EQ(kvf_f32_bits(back.quant.k_scale), kvf_f32_bits(rows[r].k_scale));
        CHECK_HEX_EQ(kvf_f32_bits(back.quant.v_scale), kvf_f32_bits(rows[r].v_scale));
        CHECK_OK(kvf_case_build(&cb, &back, &lim, &err), &err);
        check_same_case(&c, &cb);
        /* Through the importer: the case file holds the same case. */
        char defs[1100], wl[8192 * 4];
        snprintf(defs, sizeof defs, "definitions/gqa_paged/%s.json", def_name);
        write_file(root, defs, text);
        snprintf(defs, sizeof defs, "workloads/gqa_paged/%s.jsonl", def_name);
        snprintf(wl, sizeof wl, "%s\n", line);
        write_file(root, defs, wl);
        char out[128], path_of_case[512];
        snprintf(out, sizeof out, "%s/cases", root);
        kvf_fib_importer im = {.out_dir = out};
        im.opts = opts;
        CHECK(mkdir(out, 0777) == 0);
        CHECK_OK(kvf_fib_import_dataset(&im, root, NULL, &err), &err);
        CHECK_INT_EQ(im.written, 1);
        kvf_fib_importer_free(&im);
        kvf_spec filed;
        kvf_case cf;
        snprintf(path_of_case, sizeof path_of_case, "%s/%s_w1.kvfz", out, def_name);
        CHECK_OK(kvf_case_load(path_of_case, &filed, &cf, &lim, &err), &err);
        CHECK(kvf_spec_equal(&filed, &back));
        check_same_case(&c, &cf);
        kvf_case_free(&cf);
        kvf_spec_free(&filed);
        kvf_case_free(&cb);
        kvf_spec_free(&back);
        free(text);
        free(line);
        CHECK_INT_EQ(kvf_remove_tree(root), 0);
        kvf_case_free(&c);
        kvf_spec_free(&s);
    }
}

/* A small FP8 workload of gqa_paged_decode_h4_kv2_d8_ps4_fp8_e4m3 (one sequence of 3 tokens in
 * a pool of 2 pages), with one thing changed by `edit`, imported: 0 or the refusal in err. */
typedef struct fp8_blob {
    int k_dtype;            /* of the stored k_cache */
    int scale_rank;         /* of the stored k_scale */
    int64_t scale_len;      /* its elements when rank 1 */
    float k_scale, v_scale; /* the values stored */
    const char *k_scale_in; /* the workload's k_scale input, JSON; NULL: stored */
    int64_t v_cache_pages;  /* of the stored v_cache */
} fp8_blob;

static int import_fp8(const fp8_blob *b, kvf_spec *out, kvf_error *err) {
    char root[] = "/tmp/kvfuzz-test-fib-fp8b-XXXXXX", path[256];
    CHECK(mkdtemp(root) != NULL);
    uint16_t q[1 * 4 * 8];
    uint8_t k8[2 * 4 * 2 * 8 * 2], v8[8 * 4 * 2 * 8];
    for (size_t i = 0; i < sizeof q / 2; i++)
        q[i] = 0x3f80;
    for (size_t i = 0; i < sizeof k8; i++)
        k8[i] = (uint8_t)(i * 37 + 11);
    memset(v8, 0x38, sizeof v8); /* 1.0 in e4m3 */
    int32_t indptr[2] = {0, 1}, indices[1] = {1}, last[1] = {3};
    float scales[4] = {b->k_scale, b->k_scale, b->k_scale, b->k_scale};
    kvf_st_out t[8] = {
        {"q", KVF_ST_BF16, 3, {1, 4, 8}, q},
        {"k_cache", b->k_dtype, 4, {2, 4, 2, 8}, k8},
        {"v_cache", KVF_ST_F8_E4M3, 4, {b->v_cache_pages, 4, 2, 8}, v8},
        {"kv_indptr", KVF_ST_I32, 1, {2}, indptr},
        {"kv_indices", KVF_ST_I32, 1, {1}, indices},
        {"kv_last_page_len", KVF_ST_I32, 1, {1}, last},
        {"k_scale", KVF_ST_F32, b->scale_rank, {b->scale_len}, scales},
        {"v_scale", KVF_ST_F32, 1, {1}, &b->v_scale},
    };
    snprintf(path, sizeof path, "%s/blob.safetensors", root);
    kvf_error werr = {0};
    CHECK_OK(kvf_st_write(path, t, 8, NULL, NULL, 0, &werr), &werr);
    char line[2048], ins[1600] = "";
    size_t at = 0;
    for (int i = 0; i < 8; i++) {
        if (i == 6 && b->k_scale_in) {
            at += (size_t)snprintf(ins + at, sizeof ins - at, "\"k_scale\": %s, ", b->k_scale_in);
            continue;
        }
        at += (size_t)snprintf(ins + at, sizeof ins - at,
                               "\"%s\": {\"type\": \"safetensors\", \"path\": "
                               "\"blob.safetensors\", \"tensor_key\": \"%s\"}, ",
                               t[i].name, t[i].name);
    }
    snprintf(line, sizeof line,
             "{\"uuid\": \"f1\", \"axes\": {\"batch_size\": 1, \"num_pages\": 2, "
             "\"len_indptr\": 2, \"num_kv_indices\": 1}, \"inputs\": {%s\"sm_scale\": "
             "{\"type\": \"scalar\", \"value\": 0.25}}}",
             ins);
    char *text = kvf_fib_definition_json(4, 2, 8, 4, KVF_KV_E4M3);
    kvf_fib_definition def;
    CHECK_OK(kvf_fib_definition_parse(&def, text, strlen(text), "generated", &werr), &werr);
    free(text);
    kvf_fib_import_opts opts = {.root = root};
    kvf_limits_default(&opts.limits);
    int rc = kvf_fib_import(out, &def, line, strlen(line), "the line", &opts, err);
    CHECK_INT_EQ(kvf_remove_tree(root), 0);
    return rc;
}

/* Malformed FP8 workloads: each refused with one sentence, and the good one imported (its bytes
 * as their images, the scales into the quantization). */
static void test_fp8_malformed(void) {
    const fp8_blob good = {KVF_ST_F8_E4M3, 1, 1, 0.5f, 2.0f, NULL, 2};
    kvf_spec s;
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(import_fp8(&good, &s, &err), &err);
    CHECK(s.quant.kv.k_dtype == KVF_KV_E4M3 && s.quant.kv.v_dtype == KVF_KV_E4M3);
    CHECK(s.quant.k_scale == 0.5f && s.quant.v_scale == 2.0f);
    CHECK_HEX_EQ(s.explicit_tensors.k_cache[1], kvf_fp8_to_bf16(11 + 37, KVF_KV_E4M3));
    CHECK_HEX_EQ(s.explicit_tensors.v_cache[0], 0x3f80);
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    CHECK(c.quant.granularity == KVF_SCALE_TENSOR && c.k_scale[0] == 0.5f && c.v_scale[0] == 2.0f);
    kvf_case_free(&c);
    kvf_spec_free(&s);
    /* "./" and a name with dots in it stay inside the root. */
    const fp8_blob dotted = {KVF_ST_F8_E4M3,
                             1,
                             1,
                             0.5f,
                             2.0f,
                             "{\"type\": \"safetensors\", \"path\": \"./blob.safetensors\", "
                             "\"tensor_key\": \"k_scale\"}",
                             2};
    CHECK_OK(import_fp8(&dotted, &s, &err), &err);
    CHECK(s.quant.k_scale == 0.5f);
    kvf_spec_free(&s);
    static const struct {
        fp8_blob b;
        const char *refusal;
    } bad[] = {
        {{KVF_ST_BF16, 1, 1, 0.5f, 2.0f, NULL, 2},
         "workload f1's k_cache is BF16 [2, 4, 2, 8] in blob.safetensors, but the definition says "
         "float8_e4m3fn [2, 4, 2, 8]"},
        {{KVF_ST_F8_E5M2, 1, 1, 0.5f, 2.0f, NULL, 2},
         "k_cache is F8_E5M2 [2, 4, 2, 8] in blob.safetensors, but the definition says "
         "float8_e4m3fn"},
        {{KVF_ST_F8_E4M3, 1, 1, 0.5f, 2.0f, NULL, 8},
         "v_cache is F8_E4M3 [8, 4, 2, 8] in blob.safetensors, but the definition says "
         "float8_e4m3fn [2, 4, 2, 8]"},
        {{KVF_ST_F8_E4M3, 1, 4, 0.5f, 2.0f, NULL, 2},
         "k_scale is F32 [4] in blob.safetensors, but the definition says float32 [1]"},
        {{KVF_ST_F8_E4M3, 0, 0, 0.5f, 2.0f, NULL, 2},
         "k_scale is F32 [] in blob.safetensors, but the definition says float32 [1]"},
        {{KVF_ST_F8_E4M3, 1, 1, NAN, 2.0f, NULL, 2},
         "workload f1's k_scale is nan; kvfuzz takes a finite, positive scale (the keys are "
         "k_scale * k_cache)"},
        {{KVF_ST_F8_E4M3, 1, 1, 0.5f, -2.0f, NULL, 2},
         "workload f1's v_scale is -2; kvfuzz takes a finite, positive scale (the values are "
         "v_scale * v_cache)"},
        {{KVF_ST_F8_E4M3, 1, 1, 0.0f, 2.0f, NULL, 2}, "workload f1's k_scale is 0; kvfuzz takes"},
        {{KVF_ST_F8_E4M3, 1, 1, -0.0f, 2.0f, NULL, 2}, "workload f1's k_scale is -0; kvfuzz takes"},
        {{KVF_ST_F8_E4M3, 1, 1, INFINITY, 2.0f, NULL, 2},
         "workload f1's k_scale is inf; kvfuzz takes"},
        {{KVF_ST_F8_E4M3, 1, 1, 0.5f, 2.0f, "{\"type\": \"random\"}", 2},
         "workload f1 leaves k_scale random: FIB would draw it with randn, which can be zero or "
         "negative"},
        {{KVF_ST_F8_E4M3, 1, 1, 0.5f, 2.0f, "{}", 2}, "workload f1 leaves k_scale random"},
        /* Blob paths that leave the dataset root: a trace must not read files the user never
         * pointed kvfuzz at. */
        {{KVF_ST_F8_E4M3, 1, 1, 0.5f, 2.0f,
          "{\"type\": \"safetensors\", \"path\": \"/tmp/blob.safetensors\", \"tensor_key\": "
          "\"k_scale\"}",
          2},
         "workload f1's blob path /tmp/blob.safetensors leaves the dataset root (an absolute path "
         "or a \"..\" component); FIB blob paths are relative to it"},
        {{KVF_ST_F8_E4M3, 1, 1, 0.5f, 2.0f,
          "{\"type\": \"safetensors\", \"path\": \"x/../../blob.safetensors\", \"tensor_key\": "
          "\"k_scale\"}",
          2},
         "workload f1's blob path x/../../blob.safetensors leaves the dataset root"},
        {{KVF_ST_F8_E4M3, 1, 1, 0.5f, 2.0f,
          "{\"type\": \"safetensors\", \"path\": \"..\", \"tensor_key\": \"k_scale\"}", 2},
         "workload f1's blob path .. leaves the dataset root"},
        {{KVF_ST_F8_E4M3, 1, 1, 0.5f, 2.0f, "{\"type\": \"scalar\", \"value\": 0.5}", 2},
         "workload f1's k_scale is scalar, which kvfuzz cannot take for it (give a float32 tensor "
         "of shape [1] in a blob)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        CHECK_INT_EQ(import_fp8(&bad[i].b, &s, &err), KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, bad[i].refusal);
        CHECK(strchr(err.msg, '\n') == NULL);
    }
}

static const check_test tests[] = {
    {"dataset_round_trip", test_dataset_round_trip},
    {"bad_line", test_bad_line},
    {"guess_root", test_guess_root},
    {"fp8_round_trip", test_fp8_round_trip},
    {"fp8_malformed", test_fp8_malformed},
    {NULL, NULL},
};

CHECK_MAIN(tests)
