/* Strict number parsing and the table of kvfuzz's environment variables (kvfuzz/env.h). */
#include "kvfuzz/env.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int kvf_parse_i64(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    if (!text || !*text) return -1;
    const char *p = text + (*text == '-');
    if (!isdigit((unsigned char)*p)) return -1; /* no blanks, no '+', no bare '-' */
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int kvf_parse_u64(const char *text, uint64_t *out) {
    if (!text || !isdigit((unsigned char)*text)) return -1; /* no sign: strtoull wraps "-1" */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int kvf_parse_double(const char *text, double *out) {
    if (!text || !*text) return -1;
    const char *p = text + (*text == '-' || *text == '+');
    if (!isdigit((unsigned char)*p) && *p != '.') return -1; /* no blanks, nan, inf */
    for (const char *q = p; *q; q++)
        if (*q == 'x' || *q == 'X') return -1; /* no hex floats */
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno == EINVAL || *end || end == text) return -1;
    if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL)) return -1;
    *out = v;
    return 0;
}

/* Every variable kvfuzz reads, with what it accepts. A variable is an integer in [lo, hi]
 * (a multiple of `multiple` when that is set) or a flag (0 or 1). Paths (KVF_PYTHON,
 * KVF_PYTHON_WORKER) are checked where they are used, where the file can be looked at. */
typedef struct env_var {
    const char *name;
    int flag;
    int64_t lo, hi, multiple;
} env_var;

static const env_var vars[] = {
    {"KVF_MAX_POOL_GIB", 0, 1, 1 << 16, 0},                /* cli: the page pool's size limit */
    {"KVF_MAX_MEMORY_MIB", 0, 1, (int64_t)1 << 30, 0},     /* cost.c: the memory budget */
    {"KVF_MAX_WORK", 0, 1, (int64_t)1 << 62, 0},           /* cost.c: the work budget */
    {"KVF_CUDA_CHUNK_TILES", 0, 1, 1 << 30, 0},            /* decode.cu: forced split size */
    {"KVF_CUDA_STAGE_BYTES", 0, 32, (int64_t)1 << 30, 16}, /* host_cuda.cu: staging buffer */
    {"KVF_CUDA_VERIFY_POOL", 1, 0, 1, 0},                  /* host_cuda.cu: re-read the pools */
    {"KVF_CUDA_HOST_TIMING", 1, 0, 1, 0},                  /* host_cuda.cu: host time split */
    {"KVF_CUDA_FP8_BF16_SCORES", 1, 0, 1, 0},              /* split_launch.cuh: FP8 scores */
    {"KVF_WORKER_TIMING", 1, 0, 1, 0},                     /* runner.c: worker time split */
    {"KVF_FUZZ_MAX_WORK", 0, 0, INT64_MAX / 4, 0},         /* fuzz/targets/harness.c; 0: no cap */
    {"KVF_FUZZ_JOBS", 0, 1, 256, 0},                       /* fuzz/targets/harness.c */
    {"KVF_FUZZ_REQUIRE_OVERFLOW", 1, 0, 1, 0},             /* fuzz/targets/harness.c */
    {"KVF_FUZZ_KEEP_GOING", 1, 0, 1, 0},                   /* fuzz/targets/harness.c */
    {"KVF_FUZZ_ALLOW_NONFINITE", 1, 0, 1, 0},              /* fuzz/targets/harness.c */
};

static const env_var *find(const char *name) {
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (strcmp(vars[i].name, name) == 0) return &vars[i];
    return NULL;
}

static int check_one(const env_var *v, const char *text, int64_t *out, kvf_error *err) {
    int64_t x;
    if (v->flag) {
        if (strcmp(text, "0") && strcmp(text, "1"))
            return kvf_error_set(err, KVF_EINVAL, "%s must be 0 or 1, got \"%s\"", v->name, text);
        *out = text[0] == '1';
        return 0;
    }
    if (kvf_parse_i64(text, v->lo, v->hi, &x) || (v->multiple && x % v->multiple))
        return kvf_error_set(err, KVF_EINVAL,
                             "%s must be a decimal integer in [%lld, %lld]%s, got \"%s\"", v->name,
                             (long long)v->lo, (long long)v->hi,
                             v->multiple == 16 ? " and a multiple of 16" : "", text);
    *out = x;
    return 0;
}

int kvf_env_int(const char *name, int64_t dflt, int64_t *out, kvf_error *err) {
    const env_var *v = find(name);
    *out = dflt;
    if (!v || v->flag)
        return kvf_error_set(err, KVF_EINVAL, "%s is not an integer setting of kvfuzz", name);
    const char *text = getenv(name);
    if (!text || !*text) return 0;
    return check_one(v, text, out, err);
}

int kvf_env_flag(const char *name, int *out, kvf_error *err) {
    const env_var *v = find(name);
    *out = 0;
    if (!v || !v->flag) return kvf_error_set(err, KVF_EINVAL, "%s is not a flag of kvfuzz", name);
    const char *text = getenv(name);
    int64_t x;
    if (!text || !*text) return 0;
    int rc = check_one(v, text, &x, err);
    if (rc == 0) *out = (int)x;
    return rc;
}

int kvf_env_check(kvf_error *err) {
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *text = getenv(vars[i].name);
        int64_t x;
        if (text && *text && check_one(&vars[i], text, &x, err)) return KVF_EINVAL;
    }
    return 0;
}
