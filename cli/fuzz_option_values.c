/* kvfuzz fuzz's option values, checked into the run's options (fuzz_cli.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_cli.h"
#include "kvfuzz/campaign_setup.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/runner.h"

/* Strict numbers: decimal digits only (no sign, no space, no base prefix: `--seed 010` is
 * ten), within [lo, hi]. */
static int parse_int(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi,
                     int64_t *out) {
    const char *p = v;
    while (*p >= '0' && *p <= '9')
        p++;
    errno = 0;
    char *end = NULL;
    unsigned long long x = p != v && *p == 0 ? strtoull(v, &end, 10) : 0;
    if (p == v || *p != 0 || errno || x > (unsigned long long)hi || (int64_t)x < lo)
        return cli_usage_error(cmd, "%s must be an integer in [%lld, %lld], got \"%s\"", opt,
                               (long long)lo, (long long)hi, v);
    *out = (int64_t)x;
    return 0;
}

static int parse_seed(const char *cmd, const char *v, uint64_t *out) {
    const char *p = v;
    while (*p >= '0' && *p <= '9')
        p++;
    errno = 0;
    unsigned long long x = p != v && *p == 0 ? strtoull(v, NULL, 10) : 0;
    if (p == v || *p != 0 || errno)
        return cli_usage_error(cmd,
                               "--seed must be a decimal integer in [0, 18446744073709551615], "
                               "got \"%s\"",
                               v);
    *out = (uint64_t)x;
    return 0;
}

/* A number of seconds: a plain decimal (digits, at most one point, an optional exponent; no
 * sign, no space, no hex, inf or nan) in (0, 1e9], or [0, 1e9] when zero is allowed. */
static int parse_seconds_in(const char *cmd, const char *opt, const char *v, int zero_ok,
                            double *out) {
    int plain = (v[0] >= '0' && v[0] <= '9') || (v[0] == '.' && v[1] >= '0' && v[1] <= '9');
    for (const char *p = v; plain && *p; p++)
        plain = (*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' ||
                ((*p == '-' || *p == '+') && p > v && (p[-1] == 'e' || p[-1] == 'E'));
    double x = 0;
    if (!plain || cli_parse_double(v, &x) || !(zero_ok ? x >= 0 : x > 0) || x > 1e9)
        return cli_usage_error(cmd, "%s must be a %s number of seconds, got \"%s\"", opt,
                               zero_ok ? "non-negative" : "positive", v);
    *out = x;
    return 0;
}

static int parse_seconds(const char *cmd, const char *opt, const char *v, double *out) {
    return parse_seconds_in(cmd, opt, v, 0, out);
}

int cli_fuzz_run_option(cli_fuzz *f, int ch, const char *v) {
    const char *cmd = "fuzz";
    kvf_error derr = {0};
    int64_t n;
    int rc = 0;
    switch (ch) {
    case FUZZ_OPT_REQUIRE_OVERFLOW:
        f->o.require_overflow = 1;
        return rc;
    case FUZZ_OPT_IN_PROCESS:
        f->o.in_process = 1;
        return rc;
    case FUZZ_OPT_ORACLE_ONLY:
        f->o.oracle_only = 1;
        return rc;
    case FUZZ_OPT_VERBOSE:
        f->o.verbose = 1;
        return rc;
    case FUZZ_OPT_STOP_ON_FINDING:
        f->o.max_findings = 1;
        return rc;
    case FUZZ_OPT_KERNEL:
        f->kernel_name = v;
        return rc;
    case FUZZ_OPT_TAG:
        if (!kvf_campaign_tag_ok(v))
            return cli_usage_error(cmd, "--tag must be 1 to 200 characters without control "
                                        "characters");
        f->tag = v;
        return rc;
    case FUZZ_OPT_PRECISION:
        if (cli_precision_check(cmd, v)) return KVF_EXIT_USAGE;
        f->precision = v;
        return rc;
    case FUZZ_OPT_RULE: {
        kvf_error err = {0};
        if (f->o.nrules == KVF_MAX_RULES)
            return cli_usage_error(cmd, "at most %d rules per run", KVF_MAX_RULES);
        if (kvf_rule_parse(&f->o.rules[f->o.nrules], v, &err))
            return cli_usage_error(cmd, "%s", err.msg);
        f->o.nrules++;
        return rc;
    }
    case FUZZ_OPT_TIME:
        rc = parse_seconds(cmd, "--time", v, &f->o.time_limit_s);
        return rc;
    case FUZZ_OPT_RUNS:
        rc = parse_int(cmd, "--runs", v, 1, INT64_MAX, &f->o.max_runs);
        return rc;
    case FUZZ_OPT_JOBS:
        rc = parse_int(cmd, "--jobs", v, 1, KVF_CAMPAIGN_MAX_JOBS, &n);
        f->o.jobs = (int)n;
        return rc;
    case FUZZ_OPT_ORACLE: {
        int path;
        if (kvf_oracle_path_parse(v, &path))
            return cli_usage_error(cmd, "--oracle must be fast or mpfr, got \"%s\"", v);
        kvf_oracle_set_default_path(path); /* the campaign's oracle threads take defaults */
        return rc;
    }
    case FUZZ_OPT_WORKERS:
        rc = parse_int(cmd, "--workers", v, 1, 64, &n);
        f->o.workers = (int)n;
        return rc;
    case FUZZ_OPT_LANES:
        rc = parse_int(cmd, "--lanes", v, 1, KVF_RUNNER_MAX_LANES, &n);
        f->o.lanes = (int)n;
        return rc;
    case FUZZ_OPT_DEVICES:
        if (kvf_devices_parse(&f->devices, v, &derr)) return cli_usage_error(cmd, "%s", derr.msg);
        f->o.devices = &f->devices;
        return rc;
    case FUZZ_OPT_GENERATORS:
        rc = parse_int(cmd, "--generators", v, 1, 64, &n);
        f->o.generators = (int)n;
        return rc;
    case FUZZ_OPT_SEED:
        rc = parse_seed(cmd, v, &f->o.seed);
        f->seed_given = 1;
        return rc;
    }
    return -1;
}

int cli_fuzz_case_option(cli_fuzz *f, int ch, const char *v) {
    const char *cmd = "fuzz";
    int64_t n;
    int rc = 0;
    switch (ch) {
    case FUZZ_OPT_CORPUS:
        f->o.corpus_dir = v;
        return rc;
    case FUZZ_OPT_FINDINGS:
        f->o.findings_dir = v;
        return rc;
    case FUZZ_OPT_STATS:
        if (cli_opt_stats_path(cmd, "--stats", v)) return KVF_EXIT_USAGE;
        f->stats_path = v;
        return rc;
    case FUZZ_OPT_STATS_INTERVAL:
        rc = parse_seconds(cmd, "--stats-interval", v, &f->stats_interval);
        return rc;
    case FUZZ_OPT_DEADLINE:
        rc = parse_seconds(cmd, "--deadline", v, &f->o.deadline_s);
        return rc;
    case FUZZ_OPT_DETERMINISM:
        rc = parse_int(cmd, "--determinism", v, 0, INT32_MAX, &n);
        f->o.determinism_every = (int)n;
        return rc;
    case FUZZ_OPT_RELATIONS:
        rc = parse_int(cmd, "--relations", v, 0, INT32_MAX, &n);
        f->o.relations_every = (int)n;
        return rc;
    case FUZZ_OPT_MAX_BATCH:
        rc = parse_int(cmd, "--max-batch", v, 1, 4096, &n);
        f->o.mutate.max_batch = (int32_t)n;
        return rc;
    case FUZZ_OPT_MAX_PAGES:
        rc = parse_int(cmd, "--max-pages", v, 1, 65535, &n);
        f->o.mutate.max_pages = (int32_t)n;
        return rc;
    case FUZZ_OPT_MAX_PAGE_SIZE:
        rc = parse_int(cmd, "--max-page-size", v, 1, 1024, &n);
        f->o.mutate.max_page_size = (int32_t)n;
        return rc;
    case FUZZ_OPT_MAX_WORK:
        rc = parse_int(cmd, "--max-work", v, 1, INT64_MAX / 4, &n);
        if (!rc && n < KVF_MUTATE_MIN_WORK)
            return cli_usage_error(cmd,
                                   "--max-work %lld leaves every case empty: one token of "
                                   "one head of one dimension costs %d",
                                   (long long)n, KVF_MUTATE_MIN_WORK);
        f->o.mutate.max_work = n;
        /* The pool budget follows the work budget so larger cases get larger pools. */
        if (n / 4 > f->o.mutate.max_pool_elems) f->o.mutate.max_pool_elems = n / 4;
        return rc;
    case FUZZ_OPT_MAX_FINDINGS:
        rc = parse_int(cmd, "--max-findings", v, 1, INT64_MAX, &f->o.max_findings);
        return rc;
    case FUZZ_OPT_MINIMIZE_TIME:
        rc = parse_seconds_in(cmd, "--minimize-time", v, 1, &f->minimize_time);
        return rc;
    case FUZZ_OPT_RELOAD:
        rc = parse_seconds_in(cmd, "--reload", v, 1, &f->o.reload_s);
        return rc;
    case FUZZ_OPT_LARGE_SHARE:
        rc = parse_int(cmd, "--large-share", v, 0, 90, &n);
        f->o.large_share = (double)n / 100;
        return rc;
    case FUZZ_OPT_SHAPE_SET:
        rc = parse_int(cmd, "--shape-set", v, 0, 256, &n);
        f->o.shape_set = (int)n;
        return rc;
    case FUZZ_OPT_KV_DTYPE: {
        /* Small and large cases alike; the kernel is checked once it is known (cmd_fuzz.c). */
        const int set = kvf_kv_dtypes_parse(v);
        if (set < 0)
            return cli_usage_error(cmd,
                                   "--kv-dtype must be any, bf16, fp8, e4m3 or e5m2, got "
                                   "\"%s\"",
                                   v);
        f->o.mutate.kv_dtypes = f->o.large.kv_dtypes = (unsigned)set;
        return rc;
    }
    case FUZZ_OPT_LARGE_WORK:
        rc = parse_int(cmd, "--large-work", v, KVF_MUTATE_MIN_WORK, INT64_MAX / 4, &n);
        f->o.large.max_work = n;
        f->o.large.max_pool_elems = n;
        return rc;
    }
    return -1;
}
