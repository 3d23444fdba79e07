/* A FlashInfer-Bench dataset's workloads into case files (kvfuzz/fib.h's importer): a dataset
 * written by kvf_fib_export read back bit for bit, other families skipped, a definition without
 * workloads told, a repeated uuid and a bad line refused, and the root of a workloads file given
 * alone. */
#include <stdio.h>
#include <sys/stat.h>

#include "check.h"
#include "kvfuzz/fib.h"
#include "kvfuzz/file.h"

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *check_x_ = (a), *check_y_ = (b);                                               \
        if (!check_x_ || strcmp(check_x_, check_y_) != 0)                                          \
            CHECK_FAIL_AT("%s == \"%s\": \"%s\"", #a, check_y_, check_x_ ? check_x_ : "(null)");   \
    } while (0)

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
    char *def = kvf_fib_definition_json(20, 4, 128, 64),
         *other = kvf_fib_definition_json(8, 8, 64, 1);
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
    char *text = kvf_fib_definition_json(20, 4, 128, 64);
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

static const check_test tests[] = {
    {"dataset_round_trip", test_dataset_round_trip},
    {"bad_line", test_bad_line},
    {"guess_root", test_guess_root},
    {NULL, NULL},
};

CHECK_MAIN(tests)
