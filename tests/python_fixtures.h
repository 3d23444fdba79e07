/* Shared helpers for the Python kernel tests (test_python_*.c): the interpreter kernels run
 * under and whether it imports torch (NEED_TORCH), any python3 for the stand-in torch
 * (NEED_PYTHON, use_stub_torch), kernel specs under the source tree, running and judging a case
 * on the CPU buffer host (kernel_host.h), load errors of one sentence, and FlashInfer-Bench
 * solutions whose source is the torch reference. */
#ifndef KVFUZZ_TESTS_PYTHON_FIXTURES_H
#define KVFUZZ_TESTS_PYTHON_FIXTURES_H

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/kernel_host.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"
#include "python_kernel.h"

static inline const char *source_dir(void) {
    const char *s = getenv("KVF_SOURCE_DIR");
    return s ? s : ".";
}

/* The interpreter kernels run under (KVF_PYTHON, else kvfuzz's choice), into py[n]; 0 when
 * there is none. */
static inline int kernel_python(char *py, size_t n) {
    char *chosen = NULL;
    if (kvf__python_choose(&chosen, NULL, NULL)) return 0;
    snprintf(py, n, "%s", chosen);
    free(chosen);
    return 1;
}

/* The interpreter the kernel would use, asked whether it has torch. */
static inline int torch_missing(void) {
    char py[1024], cmd[1200];
    if (!kernel_python(py, sizeof py)) return 1;
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", py);
    return system(cmd) != 0;
}

#define NEED_TORCH()                                                                               \
    do {                                                                                           \
        if (torch_missing()) CHECK_SKIP("python3 cannot import torch (Debian: python3-torch)");    \
    } while (0)

static inline void spec_for(char *buf, size_t n, const char *file, const char *fn) {
    snprintf(buf, n, "python:%s/%s:%s", source_dir(), file, fn);
}

/* ---- running on the CPU buffer host ---------------------------------------------------- */

typedef struct host_run {
    int rc;
    kvf_error err;
    kvf_bf16 *o;
    float *lse;
} host_run;

static inline void host_run_free(host_run *r) {
    free(r->o);
    free(r->lse);
}

static inline void run_case(kvf_host *h, const kvf_case *c, host_run *r) {
    memset(r, 0, sizeof *r);
    r->o = malloc((size_t)(kvf_case_o_elems(c) + 1) * sizeof *r->o);
    r->lse = malloc((size_t)(kvf_case_lse_elems(c) + 1) * sizeof *r->lse);
    r->rc = kvf_host_run(h, c, r->o, r->lse, &r->err);
}

static inline int load_case(const char *path, kvf_case *c) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec spec;
    kvf_error err = {0};
    int rc = kvf_case_load(path, &spec, c, &lim, &err);
    if (rc) {
        CHECK_FAIL_AT("%s does not load: %s", path, err.msg);
        return rc;
    }
    kvf_spec_free(&spec);
    return 0;
}

static inline int seed_case(kvf_case *c) {
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus/seeds/01-mixed-lengths.kvfz", source_dir());
    return load_case(path, c);
}

static inline kvf_kernel *make(const char *spec) {
    kvf_kernel *k = NULL;
    kvf_error err = {0};
    CHECK_OK(kvf__python_kernel_make(spec, &k, &err), &err);
    return k;
}

static inline kvf_host *create(const kvf_kernel *k) {
    kvf_host *h = NULL;
    kvf_error err = {0};
    CHECK_OK(kvf_host_create(k->desc, &h, &err), &err);
    return h;
}

/* Runs one case and judges it: 1 when it passes strict (violations on overflow rows aside, as
 * replay counts them) with every element written and no guard touched. */
static inline int judge_one(const kvf_kernel *k, kvf_host *h, kvf_case *c, const char *what) {
    kvf_rule strict;
    kvf_rule_parse(&strict, "strict", NULL);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_oracle_result orc;
    kvf_error err = {0};
    if (kvf_oracle_run(&orc, c, &oo, &err)) {
        CHECK_FAIL_AT("%s: the oracle failed: %s", what, err.msg);
        return 0;
    }
    int before = check_failures;
    host_run r;
    run_case(h, c, &r);
    if (r.rc) {
        CHECK_FAIL_AT("%s: %s failed: %s", what, k->name, r.err.msg);
    } else {
        kvf_verdict v;
        CHECK_OK(kvf_judge(&v, &strict, c, &orc, r.o, r.lse, &err), &err);
        if (!v.pass && v.finding != KVF_FINDING_OVERFLOW)
            CHECK_FAIL_AT("%s: %s fails strict (%s, max ulps %lld)", what, k->name,
                          kvf_finding_class_name(v.finding), (long long)v.o.max_ulps);
    }
    host_run_free(&r);
    kvf_oracle_result_free(&orc);
    return check_failures == before;
}

static inline void expect_make_error(const char *spec, int code, const char *words) {
    kvf_kernel *k = NULL;
    kvf_error err = {0};
    int rc = kvf__python_kernel_make(spec, &k, &err);
    CHECK_INT_EQ(rc, code);
    CHECK(k == NULL);
    CHECK_STR_CONTAINS(err.msg, words);
    CHECK(strchr(err.msg, '\n') == NULL);
    if (rc == 0) kvf__python_kernel_free(k);
}

/* ---- FP8 caches ------------------------------------------------------------------------------ */

/* A small random spec (at most `work`, docs on kvf_random_opts) with quantized caches: dtypes
 * drawn, then kd / vd where not -1; scales at `gran` (spread and fine scales as drawn, none for
 * tensor scales); a layout when laid_out. -1 when no spec comes of the seed. */
static inline int fp8_spec(uint64_t seed, int64_t work, int kd, int vd, int gran, int laid_out,
                           kvf_spec *s) {
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = work;
    ro.allow_high_ids = 0;
    ro.layouts = 0;
    if (kvf_spec_random(s, seed, &ro, NULL)) return -1;
    kvf_prng r;
    kvf_prng_seed_stream(&r, seed, 77);
    do /* a draw with scales, whose bases are set */
        kvf_recipe_draw_quant(&s->quant, &s->recipe, &r);
    while (s->quant.kv.granularity == KVF_SCALE_NONE);
    if (kd >= 0) s->quant.kv.k_dtype = (uint8_t)kd;
    if (vd >= 0) s->quant.kv.v_dtype = (uint8_t)vd;
    s->quant.kv.granularity = (uint8_t)gran;
    if (gran == KVF_SCALE_TENSOR || gran == KVF_SCALE_NONE) s->quant.spread = s->quant.fine = 0;
    if (gran == KVF_SCALE_NONE) s->quant.k_scale = s->quant.v_scale = 1.0f;
    if (laid_out) kvf_recipe_draw_layout(&s->layout, &s->recipe, &r);
    return 0;
}

/* The first case of fp8_spec(seed, ...), fp8_spec(seed + 1, ...), ... (50 seeds at most) that
 * builds and reads at least one page, into c; 0, or -1 (c empty) when none does. */
static inline int fp8_case(uint64_t seed, int64_t work, int kd, int vd, int gran, int laid_out,
                           kvf_case *c) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    memset(c, 0, sizeof *c);
    for (uint64_t s = seed; s < seed + 50; s++) {
        kvf_spec sp;
        if (fp8_spec(s, work, kd, vd, gran, laid_out, &sp)) continue;
        int rc = kvf_case_build(c, &sp, &lim, NULL);
        kvf_spec_free(&sp);
        if (rc == 0 && c->batch_size > 0 && c->kv_indptr[c->batch_size] > 0) return 0;
        if (rc == 0) kvf_case_free(c);
        memset(c, 0, sizeof *c);
    }
    return -1;
}

/* ---- without torch: any python3 and the stand-in torch ------------------------------------ */

/* python3 on the PATH, else /usr/bin/python3, into py[n]: the interpreter the stand-in runs
 * under. 0 when there is none. */
static inline int some_python(char *py, size_t n) {
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && (size_t)snprintf(py, n, "%.*s/python3", (int)len, p) < n &&
            access(py, X_OK) == 0)
            return 1;
        p += len + (end ? 1 : 0);
    }
    snprintf(py, n, "/usr/bin/python3");
    return access(py, X_OK) == 0;
}

#define NEED_PYTHON(py)                                                                            \
    do {                                                                                           \
        if (!some_python(py, sizeof py)) CHECK_SKIP("no python3 on the PATH or in /usr/bin");      \
    } while (0)

/* Environment variables saved to be put back. */
#define SAVED_ENV_COUNT 6
typedef struct saved_env {
    char *value[SAVED_ENV_COUNT];
} saved_env;

static const char *const saved_names[SAVED_ENV_COUNT] = {"PATH",
                                                         "KVF_PYTHON",
                                                         "PYTHONPATH",
                                                         "PYTHONDONTWRITEBYTECODE",
                                                         "KVF_PYTHON_WORKER",
                                                         "KVF_STUB_TORCH_FLOAT8"};

static inline void env_save(saved_env *e) {
    for (int i = 0; i < SAVED_ENV_COUNT; i++) {
        const char *v = getenv(saved_names[i]);
        e->value[i] = v ? strdup(v) : NULL;
    }
}

static inline void env_restore(saved_env *e) {
    for (int i = 0; i < SAVED_ENV_COUNT; i++) {
        if (e->value[i])
            setenv(saved_names[i], e->value[i], 1);
        else
            unsetenv(saved_names[i]);
        free(e->value[i]);
    }
}

/* Kernels load under py with tests/python/stub_torch in place of torch (no bytecode written into
 * the source tree); a torch before 2.1, without float8 dtypes, unless the caller then sets
 * KVF_STUB_TORCH_FLOAT8=1 (restored by env_restore). */
static inline void use_stub_torch(saved_env *e, const char *py) {
    char stub[1024];
    env_save(e);
    snprintf(stub, sizeof stub, "%s/tests/python/stub_torch", source_dir());
    setenv("KVF_PYTHON", py, 1);
    setenv("PYTHONPATH", stub, 1);
    setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
}

/* ---- FlashInfer-Bench solutions ------------------------------------------------------------ */

static inline char *json_quote(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(6 * n + 3), *p = out;
    *p++ = '"';
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            *p++ = '\\', *p++ = (char)ch;
        else if (ch == '\n')
            *p++ = '\\', *p++ = 'n';
        else if (ch < 0x20)
            p += sprintf(p, "\\u%04x", ch);
        else
            *p++ = (char)ch;
    }
    *p++ = '"';
    *p = 0;
    return out;
}

static inline char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    s[fread(s, 1, (size_t)n, f)] = 0;
    fclose(f);
    return s;
}

/* Writes a solution whose source `source_path` is the torch reference; with `main`, a second
 * source main.py holding that text. */
static inline void write_solution_with(const char *path, const char *language, const char *entry,
                                       const char *source_path, const char *definition,
                                       const char *main) {
    char ref[1024];
    snprintf(ref, sizeof ref, "%s/examples/python/torch_decode.py", source_dir());
    char *src = read_text(ref), *q = json_quote(src ? src : ""), *m = json_quote(main ? main : "");
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"name\": \"torch-reference\", \"definition\": \"%s\", \"author\": \"kvfuzz\",\n"
            " \"spec\": {\"language\": \"%s\", \"target_hardware\": [\"cpu\"],%s%s%s\n"
            "          \"dependencies\": [\"torch\"], \"destination_passing_style\": true},\n"
            " \"sources\": [{\"path\": \"%s\", \"content\": %s}%s%s%s]}\n",
            definition, language, entry ? " \"entry_point\": \"" : "", entry ? entry : "",
            entry ? "\"," : "", source_path, q,
            main ? ", {\"path\": \"main.py\", \"content\": " : "", main ? m : "", main ? "}" : "");
    fclose(f);
    free(src);
    free(q);
    free(m);
}

static inline void write_solution(const char *path, const char *language, const char *entry,
                                  const char *source_path, const char *definition) {
    write_solution_with(path, language, entry, source_path, definition, NULL);
}

#endif
