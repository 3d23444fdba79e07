/* Fixtures of the reports tests (tests/test_stats_*.c, tests/test_report*.c): a scratch
 * directory removed at exit, judged cases (the real judge on small generated cases with
 * perturbed kernel outputs), a hand-made case and hand-made elements where an exact value
 * matters, and small text and JSON helpers. */
#ifndef KVFUZZ_TESTS_REPORTS_FIXTURES_H
#define KVFUZZ_TESTS_REPORTS_FIXTURES_H

#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/file.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/report.h"
#include "kvfuzz/spec.h"
#include "kvfuzz/stats.h"

static char tmp_root[256];
static pid_t tmp_owner;

/* Removes the scratch directory at exit (KVF_KEEP_TMP=1 keeps it for a look). */
static inline void cleanup(void) {
    if (!tmp_root[0] || getpid() != tmp_owner || getenv("KVF_KEEP_TMP")) return;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_root);
}

static inline const char *tmp_dir(void) {
    if (!tmp_root[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp_root, sizeof tmp_root, "%s/kvf-test-reports-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmp_root)) {
            perror("mkdtemp");
            exit(2);
        }
        tmp_owner = getpid();
        atexit(cleanup);
    }
    return tmp_root;
}

static inline void tmp_path(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", tmp_dir(), name);
}

/* A judged case: spec, case, oracle, and a kernel output that is the correctly rounded answer
 * with some elements moved. */
typedef struct judged {
    kvf_spec spec;
    kvf_case c;
    kvf_oracle_result orc;
    kvf_bf16 *o;
    float *lse;
    uint8_t *kvfz;
    size_t kvfz_size;
    char path[64];
} judged;

static inline void judged_make(judged *j, uint64_t seed, int damage) {
    kvf_error err = {0};
    memset(j, 0, sizeof *j);
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_batch = 3;
    ro.max_pages = 4;
    ro.max_work = 200000;
    ro.allow_overflow = 0;
    ro.allow_high_ids = 0;
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_spec_random(&j->spec, seed, &ro, &err), &err);
    CHECK_OK(kvf_case_build(&j->c, &j->spec, &lim, &err), &err);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    CHECK_OK(kvf_oracle_run(&j->orc, &j->c, &oo, &err), &err);
    CHECK_OK(kvf_spec_encode(&j->spec, &j->kvfz, &j->kvfz_size, &err), &err);
    snprintf(j->path, sizeof j->path, "cases/seed-%llu.kvfz", (unsigned long long)seed);
    int64_t n = kvf_case_o_elems(&j->c), rows = kvf_case_lse_elems(&j->c);
    j->o = malloc((size_t)(n ? n : 1) * sizeof *j->o);
    j->lse = malloc((size_t)(rows ? rows : 1) * sizeof *j->lse);
    memcpy(j->o, j->orc.o_rounded, (size_t)n * sizeof *j->o);
    memcpy(j->lse, j->orc.lse_rounded, (size_t)rows * sizeof *j->lse);
    /* Damage: every 7th o element moved by (i % 5) ulps away from zero, one NaN, one lse
     * moved by 3 f32 ulps. Finite, non-zero values only, so the move is a pure ulp step. */
    for (int64_t i = 0; damage && i < n; i += 7)
        if (kvf_bf16_is_finite(j->o[i]) && (j->o[i] & 0x7FFF) && (j->o[i] & 0x7FFF) < 0x7F00)
            j->o[i] = (kvf_bf16)(j->o[i] + (i % 5));
    if (damage && n > 3) j->o[3] = KVF_BF16_QNAN;
    if (damage && rows > 0 && isfinite(j->lse[0]) && j->lse[0] != 0)
        j->lse[0] = kvf_f32_from_bits(kvf_f32_bits(j->lse[0]) + 3);
}

static const char *const RULES[] = {"strict", "fib", "ulp:2"};

/* Judges j under every rule, as kernel `kernel`, into s. */
static inline void judged_observe(kvf_stats *s, const char *kernel, judged *j) {
    kvf_error err = {0};
    kvf_stats_case ref = {j->path, j->kvfz, j->kvfz_size};
    CHECK_OK(kvf_stats_count_run(s, kernel, KVF_STATS_RAN, &err), &err);
    for (size_t r = 0; r < sizeof RULES / sizeof RULES[0]; r++) {
        kvf_rule rule;
        kvf_verdict v;
        CHECK_OK(kvf_rule_parse(&rule, RULES[r], &err), &err);
        CHECK_OK(kvf_stats_judge(s, kernel, &ref, &v, &rule, &j->c, &j->orc, j->o, j->lse, &err),
                 &err);
    }
}

static inline kvf_stats *stats_new(int worst_n) {
    kvf_stats *s = NULL;
    kvf_stats_opts so;
    kvf_error err = {0};
    kvf_stats_opts_default(&so);
    so.worst_n = worst_n;
    so.command = "test_reports";
    CHECK_OK(kvf_stats_create(&s, &so, &err), &err);
    return s;
}

#define NJUDGED 4
static judged J[NJUDGED];
static int judged_ready;

static inline void judged_all(void) {
    if (judged_ready) return;
    for (int i = 0; i < NJUDGED; i++)
        judged_make(&J[i], 100 + (uint64_t)i, i != 1);
    judged_ready = 1;
}

/* A case by hand: B = 3 sequences of lengths 0, 70 and 64 with page size 64, Hq = 2, D = 4. */
static inline void small_case(kvf_case *c) {
    kvf_error err = {0};
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_case_alloc(c, 2, 1, 4, 64, 3, 3, 3, &lim, &err), &err);
    int32_t indptr[4] = {0, 0, 2, 3}, last[3] = {0, 6, 64}, idx[3] = {0, 1, 2};
    memcpy(c->kv_indptr, indptr, sizeof indptr);
    memcpy(c->kv_last_page_len, last, sizeof last);
    memcpy(c->kv_indices, idx, sizeof idx);
}

static inline kvf_element_error elem(kvf_output_kind out, int b, int h, int d, double abs,
                                     int64_t ulps, double margin) {
    kvf_element_error e;
    memset(&e, 0, sizeof e);
    e.output = out;
    e.b = b;
    e.h = h;
    e.d = d;
    e.kernel_value = 1 + abs;
    e.rounded_value = 1;
    e.exact_value = 1;
    e.abs_error = abs;
    e.rel_error = abs / (1 + 1e-8);
    e.ulps = ulps;
    e.margin = margin;
    e.excess_margin = margin;
    e.fails = margin > 1;
    return e;
}

static inline void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static inline int count_substr(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static inline const json_t *jpath(const json_t *v, const char *path) {
    char key[64];
    while (v && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        if (json_is_array(v))
            v = json_array_get(v, (size_t)atoi(key));
        else
            v = json_object_get(v, key);
        path += n + (dot != NULL);
    }
    return v;
}

#endif
