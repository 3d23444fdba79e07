/* kvfuzz fuzz: the campaign runner's command line (fuzz/include/kvfuzz/campaign.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "stats_hooks.h"
#include "kvfuzz/campaign.h"
#include "kvfuzz/file.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/stats.h"
#include "kvfuzz/stats_sink.h"
#include "kvfuzz/verdict.h"
#include "kvfuzz/test_kernels.h"

static void fuzz_help(void) {
    printf(
        "usage: kvfuzz fuzz [--kernel K] [--rule R]... [--time SEC | --runs N] [--jobs N]\n"
        "                   [--seed N] [--corpus DIR] [--reload SEC] [--findings DIR]\n"
        "                   [--stats FILE] [--stats-interval SEC] [--deadline SEC]\n"
        "                   [--determinism N] [--max-batch N] [--max-pages N]\n"
        "                   [--max-page-size N] [--max-work N] [--large-share PCT]\n"
        "                   [--large-work N] [--require-overflow] [--stop-on-finding]\n"
        "                   [--max-findings N] [--workers N] [--lanes N] [--devices all|LIST]\n"
        "                   [--generators N] [--tag TEXT] [--minimize-time SEC]\n"
        "                   [--in-process] [--oracle-only] [--oracle fast|mpfr] [--verbose]\n\n"
        "Generates cases (random recipes over every strategy, and structure-aware mutations\n"
        "of a corpus that grows with cases reaching new error buckets), runs the kernel in a\n"
        "worker process, computes the MPFR oracle on a pool of threads and judges each case\n"
        "under every rule. Prints a progress line every 5 s and a summary at the end.\n"
        "Each finding is saved as <class>-<hash>.kvfz with a .json report beside it, once per\n"
        "signature (class, kernel, rule, output, error magnitude). A kernel that crashes or\n"
        "passes its deadline is recorded as a crash or hang finding and a fresh worker takes\n"
        "over. SIGINT or SIGTERM stops the run cleanly with its summary (a second one kills).\n\n"
        "  --kernel K          kernel to fuzz: a built-in name (`kvfuzz kernels`), a plugin\n"
        "                      PATH.so (when it holds one kernel) or PATH.so:NAME, a Python\n"
        "                      function python:MODULE:FUNCTION, or a FlashInfer-Bench solution\n"
        "                      .json. Cases go to the shapes the kernel's supports() accepts.\n"
        "                      Default: cuda when a GPU is usable, else cpu-splitkv.\n"
        "  --rule R            rule (repeatable; `kvfuzz rules`). Default: strict, fa.\n"
        "  --precision MODEL   judge strict and fa under this precision model (f32, bf16-p,\n"
        "                      bf16-partials+ftz, ...; `kvfuzz rules`). Default: the model\n"
        "                      the kernel declares, else f32. Findings name the tightest\n"
        "                      model that explains them (docs/precision.md).\n"
        "  --time SEC          stop after SEC seconds.\n"
        "  --runs N            stop after N cases. Without --time or --runs: until stopped.\n"
        "  --jobs N            oracle threads (default: all cores but a quarter, at most\n"
        "                      4, which generation and the kernel worker need; all cores\n"
        "                      with --oracle-only). They run at batch priority, ten nice\n"
        "                      steps below the generators, dispatchers and kernel worker.\n"
        "  --oracle P          oracle path: fast (default: double arithmetic with a certified\n"
        "                      bound, MPFR for what it cannot certify) or mpfr (MPFR for\n"
        "                      every row); both give the same correctly rounded results.\n"
        "  --seed N            campaign seed, a decimal integer (default: from the clock;\n"
        "                      printed at the start).\n"
        "  --tag TEXT          a name for this campaign among others sharing a findings\n"
        "                      folder (a batch job's array task, say), printed at the start.\n"
        "                      The statistics' provenance keeps the campaign's command line\n"
        "                      (with the tag, and the seed when it was drawn from the clock).\n"
        "  --corpus DIR        cases to start from; new cases reaching new error buckets are\n"
        "                      added to it (created if missing). Copy a committed corpus\n"
        "                      first rather than fuzzing into it.\n"
        "  --reload SEC        re-read the corpus folder this often for entries other\n"
        "                      campaigns wrote there (default 10; 0: never).\n"
        "  --findings DIR      where findings go (default: findings).\n"
        "  --stats FILE        streaming error statistics, rewritten atomically during the run\n"
        "                      and at exit, for `kvfuzz report` (default: one file per\n"
        "                      campaign, DIR/stats-HOST-PID-START.json; `kvfuzz report DIR`\n"
        "                      merges every stats*.json of a folder).\n"
        "  --stats-interval SEC  rewrite the statistics at most this often (default 60).\n"
        "  --deadline SEC      per-launch deadline before a hang is declared (default 10).\n"
        "  --determinism N     re-run every Nth case after another one and compare the bits\n"
        "                      (default 16; 0 turns the check off).\n"
        "  --max-batch N       largest batch of a small case (default 4).\n"
        "  --max-pages N       most pages per sequence of a small case (default 8).\n"
        "  --max-page-size N   largest page size (default 256).\n"
        "  --max-work N        cap on the oracle's cost per small case, (tokens + 32 x batch)\n"
        "                      x Hq x D (default 131072, at least 33: one token); the\n"
        "                      generator's budget, elements written per cache, is a quarter\n"
        "                      of it (at least 32768).\n"
        "  --large-share PCT   percent of the oracle's work (the cost above) spent on large\n"
        "                      cases, 0 to 90 (default 25; the other 75%% goes to small\n"
        "                      cases). Large cases: 3 in 4 hold 1-4 sequences, the longest of\n"
        "                      4,096 to 32,768 tokens (32,768 in half of them, 131,072 in 1\n"
        "                      in 8); 1 in 4 is a batch of 64 to 256 sequences of mixed\n"
        "                      lengths (0 to 4,096). Heads and D shrink to fit the cap.\n"
        "  --large-work N      cap on the oracle's cost per large case (default 16777216).\n"
        "  --require-overflow  count violations on rows whose logits exceed the f32 range\n"
        "                      (class overflow) as findings.\n"
        "  --workers N         kernel worker processes (default 1; per device with\n"
        "                      --devices; for CPU kernels more can help, for one GPU they\n"
        "                      time-slice and were slower).\n"
        "  --lanes N           cases each worker runs at once, each on its own kernel state;\n"
        "                      at most the kernel's concurrent_states (8 for the built-in\n"
        "                      kernels, 1 for a plugin that does not set it). A CPU kernel's\n"
        "                      lanes get a thread each; a CUDA kernel's lanes get a stream\n"
        "                      each and one thread that loads and checks one case while the\n"
        "                      device runs another. Default: 2 for a CUDA kernel that allows\n"
        "                      it, else 1. A failure while several ran is run again alone\n"
        "                      before it is filed.\n"
        "  --devices all|LIST  spread the campaign over GPUs: --workers workers per device\n"
        "                      (all, or ordinals such as 0,1,3 as this process sees them),\n"
        "                      each pinned by CUDA_VISIBLE_DEVICES, sharing one oracle pool,\n"
        "                      corpus and findings folder. A device whose worker cannot start\n"
        "                      is retired and the rest go on; the summary and the statistics\n"
        "                      give each device's rate (docs/scaling.md).\n"
        "  --generators N      threads generating cases (default: one per four oracle\n"
        "                      threads).\n"
        "  --in-process        run the kernel in this process (for a debugger; a crash or a\n"
        "                      hang then ends the campaign).\n"
        "  --oracle-only       no kernel and no judging: generate cases and run the oracle,\n"
        "                      to measure the oracle-bound rate a kernel campaign is\n"
        "                      compared with (docs/performance.md).\n"
        "  --stop-on-finding   stop at the first finding (as --max-findings 1).\n"
        "  --max-findings N    stop once N distinct signatures are found (the cases in\n"
        "                      flight are finished); the summary gives the time.\n"
        "  --verbose           print the full report of every new finding.\n"
        "  --minimize-time SEC  after the campaign, minimize the first finding of each group\n"
        "                      of findings (distinct defects, docs/reports.md) that has no\n"
        "                      minimized case yet, in SEC seconds in all, and save it beside\n"
        "                      the finding as <finding>.min.kvfz; the groups are then listed\n"
        "                      with the command that replays each. Default: a tenth of the\n"
        "                      campaign's time, at most 60 s; 0 lists without minimizing.\n\n"
        "Exit status: 0 nothing found, 1 at least one finding, 2 bad usage or a kernel that\n"
        "cannot start.\n");
}

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

/* The default statistics file: one per campaign, so campaigns sharing a findings folder keep
 * their own (`kvfuzz report DIR` merges them): stats-HOST-PID-START.json. */
static void default_stats_path(char *out, size_t n, const char *dir) {
    char host[256] = "host";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = 0;
    for (char *p = host; *p; p++) /* a file name: keep it to letters, digits, '-', '.' */
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '.'))
            *p = '_';
    char when[32] = "0";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(out, n, "%s/stats-%s-%ld-%s.json", dir, host, (long)getpid(), when);
}

/* Streaming error statistics (reports/, kvfuzz/stats_sink.h): the campaign hands each case's
 * judging to the sink through the judge hooks (stats_hooks.h), so every element is counted
 * while the judge computes it and each case is judged once. */
typedef struct fuzz_stats {
    cli_stats_hooks hooks;
    const kvf_campaign_opts *o;
} fuzz_stats;

static int stats_hooks(void *ctx, int thread, const kvf_spec *spec, const kvf_case *c,
                       kvf_judge_hooks *hooks) {
    fuzz_stats *fs = ctx;
    return cli_stats_hooks_begin(&fs->hooks, thread, spec, c, hooks);
}

/* The campaign's answer, last: per rule, the cases judged and the signatures found. Every new
 * signature is one finding file; the statistics tell the benign failures apart. */
static void print_verdicts(FILE *f, const kvf_stats *stats, const kvf_campaign_stats *st) {
    kvf_verdict_counts vc[KVF_MAX_RULES];
    size_t n = kvf_stats_verdicts(stats, vc, KVF_MAX_RULES);
    if (n > KVF_MAX_RULES) n = KVF_MAX_RULES;
    fprintf(f, "verdict:\n");
    for (size_t i = 0; i < n; i++) {
        /* Signatures are per campaign, not per rule; with one rule they are that rule's. */
        if (kvf_verdict_counts_failed(&vc[i]) && n == 1) vc[i].signatures = (long)st->findings_new;
        kvf_verdict_counts_print(f, &vc[i], "  ");
    }
    if (n == 0) fprintf(f, "  nothing judged\n");
    /* Tolerance signatures split by attribution: a defect lies outside every precision model,
     * the others only below the precision the kernel declared (docs/precision.md). */
    if (st->signatures_defect + st->signatures_precision > 0)
        fprintf(f,
                "  tolerance signatures: %" PRId64 " %s (no precision model explains %s), %" PRId64
                " within a looser precision model than the one judged (the kernel's precision "
                "is below what it declares)\n",
                st->signatures_defect, st->signatures_defect == 1 ? "defect" : "defects",
                st->signatures_defect == 1 ? "it" : "them", st->signatures_precision);
}

/* The run's statistics also count launches that gave no output (crashes, hangs, kernel errors,
 * unsupported cases): those are never judged, so the judge hooks do not see them. */
static void stats_run(void *ctx, int finding_class) {
    fuzz_stats *fs = ctx;
    kvf_stats_sink_count_run(fs->hooks.sink, fs->o->kernel->name,
                             finding_class < 0 ? KVF_STATS_UNSUPPORTED : finding_class);
}

enum {
    OPT_KERNEL = 256,
    OPT_RULE,
    OPT_TIME,
    OPT_RUNS,
    OPT_JOBS,
    OPT_SEED,
    OPT_CORPUS,
    OPT_FINDINGS,
    OPT_STATS,
    OPT_STATS_INTERVAL,
    OPT_DEADLINE,
    OPT_DETERMINISM,
    OPT_MAX_BATCH,
    OPT_MAX_PAGES,
    OPT_MAX_PAGE_SIZE,
    OPT_MAX_WORK,
    OPT_REQUIRE_OVERFLOW,
    OPT_WORKERS,
    OPT_DEVICES,
    OPT_GENERATORS,
    OPT_IN_PROCESS,
    OPT_ORACLE_ONLY,
    OPT_ORACLE,
    OPT_VERBOSE,
    OPT_MAX_FINDINGS,
    OPT_STOP_ON_FINDING,
    OPT_RELOAD,
    OPT_LARGE_SHARE,
    OPT_LARGE_WORK,
    OPT_LANES,
    OPT_PRECISION,
    OPT_TAG,
    OPT_MINIMIZE_TIME
};

static const struct option fuzz_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"kernel", required_argument, NULL, OPT_KERNEL},
    {"rule", required_argument, NULL, OPT_RULE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"time", required_argument, NULL, OPT_TIME},
    {"runs", required_argument, NULL, OPT_RUNS},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"corpus", required_argument, NULL, OPT_CORPUS},
    {"findings", required_argument, NULL, OPT_FINDINGS},
    {"stats", required_argument, NULL, OPT_STATS},
    {"stats-interval", required_argument, NULL, OPT_STATS_INTERVAL},
    {"deadline", required_argument, NULL, OPT_DEADLINE},
    {"determinism", required_argument, NULL, OPT_DETERMINISM},
    {"max-batch", required_argument, NULL, OPT_MAX_BATCH},
    {"max-pages", required_argument, NULL, OPT_MAX_PAGES},
    {"max-page-size", required_argument, NULL, OPT_MAX_PAGE_SIZE},
    {"max-work", required_argument, NULL, OPT_MAX_WORK},
    {"require-overflow", no_argument, NULL, OPT_REQUIRE_OVERFLOW},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"lanes", required_argument, NULL, OPT_LANES},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"generators", required_argument, NULL, OPT_GENERATORS},
    {"in-process", no_argument, NULL, OPT_IN_PROCESS},
    {"oracle-only", no_argument, NULL, OPT_ORACLE_ONLY},
    {"oracle", required_argument, NULL, OPT_ORACLE},
    {"verbose", no_argument, NULL, OPT_VERBOSE},
    {"max-findings", required_argument, NULL, OPT_MAX_FINDINGS},
    {"stop-on-finding", no_argument, NULL, OPT_STOP_ON_FINDING},
    {"minimize-time", required_argument, NULL, OPT_MINIMIZE_TIME},
    {"reload", required_argument, NULL, OPT_RELOAD},
    {"large-share", required_argument, NULL, OPT_LARGE_SHARE},
    {"large-work", required_argument, NULL, OPT_LARGE_WORK},
    {"tag", required_argument, NULL, OPT_TAG},
    {NULL, 0, NULL, 0},
};

/* A tag is one line of the summary and of the report's provenance: printable, and short. */
static int tag_ok(const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n > 200) return 0;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return 0;
    return 1;
}

/* The statistics' provenance ("command"): this campaign's command line, and the seed it drew
 * when none was given, so that among many runs merged into one report (the tasks of a batch
 * array, say) each can be told apart and its random choices repeated. Arguments that are not
 * plain words are single-quoted as a POSIX shell reads them. NULL when memory runs out. */
static char *command_line(int argc, char **argv, int seed_given, uint64_t seed) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) return NULL;
    fputs("kvfuzz", f);
    for (int i = 0; i < argc; i++) { /* argv[0] is the subcommand, "fuzz" */
        const char *a = argv[i];
        int plain = *a != 0;
        for (const char *p = a; *p && plain; p++)
            plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                           "_@%+=:,./-",
                           *p) != NULL;
        fputc(' ', f);
        if (plain) {
            fputs(a, f);
            continue;
        }
        fputc('\'', f);
        for (const char *p = a; *p; p++)
            *p == '\'' ? fputs("'\\''", f) : fputc(*p, f);
        fputc('\'', f);
    }
    if (!seed_given) fprintf(f, " --seed %" PRIu64, seed);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The option as the user wrote it, for messages. */
static const char *option_text(char **argv, int index) {
    return index > 0 && argv[index] ? argv[index] : "?";
}

/* The options of one `kvfuzz fuzz` run, as parsed. */
typedef struct fuzz_cli {
    kvf_campaign_opts o;
    kvf_device_set devices; /* o.devices points here */
    int seed_given;
    const char *kernel_name, *stats_path, *precision, *tag;
    double stats_interval;
    double minimize_time; /* --minimize-time; -1: the default share of the campaign */
} fuzz_cli;

/* The run's options (kernel, rules, time, threads, devices, seed): 0, an exit status, or -1
 * when ch is not one of them. */
static int fuzz_run_option(fuzz_cli *f, int ch, const char *v) {
    const char *cmd = "fuzz";
    kvf_error derr = {0};
    int64_t n;
    int rc = 0;
    switch (ch) {
    case OPT_REQUIRE_OVERFLOW:
        f->o.require_overflow = 1;
        return rc;
    case OPT_IN_PROCESS:
        f->o.in_process = 1;
        return rc;
    case OPT_ORACLE_ONLY:
        f->o.oracle_only = 1;
        return rc;
    case OPT_VERBOSE:
        f->o.verbose = 1;
        return rc;
    case OPT_STOP_ON_FINDING:
        f->o.max_findings = 1;
        return rc;
    case OPT_KERNEL:
        f->kernel_name = v;
        return rc;
    case OPT_TAG:
        if (!tag_ok(v))
            return cli_usage_error(cmd, "--tag must be 1 to 200 characters without control "
                                        "characters");
        f->tag = v;
        return rc;
    case OPT_PRECISION:
        if (cli_precision_check(cmd, v)) return KVF_EXIT_USAGE;
        f->precision = v;
        return rc;
    case OPT_RULE: {
        kvf_error err = {0};
        if (f->o.nrules == KVF_MAX_RULES)
            return cli_usage_error(cmd, "at most %d rules per run", KVF_MAX_RULES);
        if (kvf_rule_parse(&f->o.rules[f->o.nrules], v, &err))
            return cli_usage_error(cmd, "%s", err.msg);
        f->o.nrules++;
        return rc;
    }
    case OPT_TIME:
        rc = parse_seconds(cmd, "--time", v, &f->o.time_limit_s);
        return rc;
    case OPT_RUNS:
        rc = parse_int(cmd, "--runs", v, 1, INT64_MAX, &f->o.max_runs);
        return rc;
    case OPT_JOBS:
        rc = parse_int(cmd, "--jobs", v, 1, KVF_CAMPAIGN_MAX_JOBS, &n);
        f->o.jobs = (int)n;
        return rc;
    case OPT_ORACLE: {
        int path;
        if (kvf_oracle_path_parse(v, &path))
            return cli_usage_error(cmd, "--oracle must be fast or mpfr, got \"%s\"", v);
        kvf_oracle_set_default_path(path); /* the campaign's oracle threads take defaults */
        return rc;
    }
    case OPT_WORKERS:
        rc = parse_int(cmd, "--workers", v, 1, 64, &n);
        f->o.workers = (int)n;
        return rc;
    case OPT_LANES:
        rc = parse_int(cmd, "--lanes", v, 1, KVF_RUNNER_MAX_LANES, &n);
        f->o.lanes = (int)n;
        return rc;
    case OPT_DEVICES:
        if (kvf_devices_parse(&f->devices, v, &derr)) return cli_usage_error(cmd, "%s", derr.msg);
        f->o.devices = &f->devices;
        return rc;
    case OPT_GENERATORS:
        rc = parse_int(cmd, "--generators", v, 1, 64, &n);
        f->o.generators = (int)n;
        return rc;
    case OPT_SEED:
        rc = parse_seed(cmd, v, &f->o.seed);
        f->seed_given = 1;
        return rc;
    }
    return -1;
}

/* The outputs' and the cases' options (folders, statistics, budgets): 0, an exit status, or -1
 * when ch is not one of them. */
static int fuzz_case_option(fuzz_cli *f, int ch, const char *v) {
    const char *cmd = "fuzz";
    int64_t n;
    int rc = 0;
    switch (ch) {
    case OPT_CORPUS:
        f->o.corpus_dir = v;
        return rc;
    case OPT_FINDINGS:
        f->o.findings_dir = v;
        return rc;
    case OPT_STATS: {
        /* A .kvfz name is a case file's (a corpus entry, a finding): the statistics, JSON,
         * would replace it. */
        size_t len = strlen(v);
        if (len >= 5 && strcmp(v + len - 5, ".kvfz") == 0)
            return cli_usage_error(cmd,
                                   "--stats %s names a case file (.kvfz): writing the "
                                   "statistics would replace it; give a .json name",
                                   v);
        f->stats_path = v;
        return rc;
    }
    case OPT_STATS_INTERVAL:
        rc = parse_seconds(cmd, "--stats-interval", v, &f->stats_interval);
        return rc;
    case OPT_DEADLINE:
        rc = parse_seconds(cmd, "--deadline", v, &f->o.deadline_s);
        return rc;
    case OPT_DETERMINISM:
        rc = parse_int(cmd, "--determinism", v, 0, INT32_MAX, &n);
        f->o.determinism_every = (int)n;
        return rc;
    case OPT_MAX_BATCH:
        rc = parse_int(cmd, "--max-batch", v, 1, 4096, &n);
        f->o.mutate.max_batch = (int32_t)n;
        return rc;
    case OPT_MAX_PAGES:
        rc = parse_int(cmd, "--max-pages", v, 1, 65535, &n);
        f->o.mutate.max_pages = (int32_t)n;
        return rc;
    case OPT_MAX_PAGE_SIZE:
        rc = parse_int(cmd, "--max-page-size", v, 1, 1024, &n);
        f->o.mutate.max_page_size = (int32_t)n;
        return rc;
    case OPT_MAX_WORK:
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
    case OPT_MAX_FINDINGS:
        rc = parse_int(cmd, "--max-findings", v, 1, INT64_MAX, &f->o.max_findings);
        return rc;
    case OPT_MINIMIZE_TIME:
        rc = parse_seconds_in(cmd, "--minimize-time", v, 1, &f->minimize_time);
        return rc;
    case OPT_RELOAD:
        rc = parse_seconds_in(cmd, "--reload", v, 1, &f->o.reload_s);
        return rc;
    case OPT_LARGE_SHARE:
        rc = parse_int(cmd, "--large-share", v, 0, 90, &n);
        f->o.large_share = (double)n / 100;
        return rc;
    case OPT_LARGE_WORK:
        rc = parse_int(cmd, "--large-work", v, KVF_MUTATE_MIN_WORK, INT64_MAX / 4, &n);
        f->o.large.max_work = n;
        f->o.large.max_pool_elems = n;
        return rc;
    }
    return -1;
}

/* Parses the command line into f: -1 to go on, else the exit status (0 after --help). */
static int fuzz_parse(fuzz_cli *f, int argc, char **argv) {
    const char *cmd = "fuzz";
    /* "-": non-options come back as 1 (refused below) instead of being moved to the end;
     * ":": a missing value comes back as ':' so the message is ours. */
    optind = 0;
    opterr = 0;
    for (;;) {
        int prev = optind ? optind : 1;
        int ch = getopt_long(argc, argv, "-:h", fuzz_options, NULL);
        if (ch == -1) break;
        const char *a = option_text(argv, prev);
        const char *v = optarg;
        switch (ch) {
        case 'h':
            fuzz_help();
            return KVF_EXIT_OK;
        case 1:
            return cli_usage_error(cmd, "unexpected argument \"%s\" (see kvfuzz fuzz --help)", v);
        case ':':
            return cli_usage_error(cmd, "%s needs a value", a);
        case '?':
            return cli_usage_error(cmd, "unknown option \"%s\" (see kvfuzz fuzz --help)", a);
        }
        int rc = fuzz_run_option(f, ch, v);
        if (rc < 0) rc = fuzz_case_option(f, ch, v);
        if (rc < 0)
            return cli_usage_error(cmd, "unknown option \"%s\" (see kvfuzz fuzz --help)", a);
        if (rc) return rc;
    }
    if (f->o.time_limit_s > 0 && f->o.max_runs > 0)
        return cli_usage_error(cmd, "give --time or --runs, not both");
    if (f->o.lanes > 0 && (f->o.in_process || f->o.oracle_only))
        return cli_usage_error(cmd,
                               "--lanes runs cases side by side in a worker: it cannot go "
                               "with %s",
                               f->o.in_process ? "--in-process" : "--oracle-only");
    if (f->o.devices && (f->o.in_process || f->o.oracle_only))
        return cli_usage_error(cmd, "--devices runs worker processes: it cannot go with %s",
                               f->o.in_process ? "--in-process" : "--oracle-only");
    return -1;
}

/* The kernel, the seed, the rules under the kernel's precision model, the corpus folder: 0 or
 * the exit status. */
static int fuzz_setup(fuzz_cli *f, kvf_precision *model, cli_precision_source *model_source) {
    const char *cmd = "fuzz";
    if (f->kernel_name) {
        if (cli_one_kernel(cmd, f->kernel_name, &f->o.kernel)) return KVF_EXIT_USAGE;
    } else {
        /* Asked in a child process: this one must not initialise CUDA before forking workers. */
        char why[256];
        f->o.kernel = kvf_runner_probe_cuda(why, sizeof why) ? kvf_kernel_find("cuda") : NULL;
        if (!f->o.kernel) f->o.kernel = kvf_kernel_find("cpu-splitkv");
    }
    if (!f->seed_given) f->o.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (f->o.nrules == 0) f->o.nrules = kvf_rule_default_set(f->o.rules, KVF_MAX_RULES);
    /* strict and fa judge the kernel within the precision it declares (docs/precision.md). */
    if (cli_kernel_precision(cmd, f->o.kernel, f->precision, model, model_source))
        return KVF_EXIT_USAGE;
    kvf_rules_apply_precision(f->o.rules, f->o.nrules, model);

    /* A corpus that is a file is refused before anything is made (the campaign found it only
     * after writing the statistics); a missing one is created. */
    struct stat cst;
    if (f->o.corpus_dir && stat(f->o.corpus_dir, &cst) == 0 && !S_ISDIR(cst.st_mode))
        return cli_usage_error(cmd, "--corpus %s is not a folder", f->o.corpus_dir);
    return 0;
}

/* The findings folder and the statistics sink: 0 or the exit status. *stale: the temporary
 * files removed. */
static int fuzz_open(fuzz_cli *f, fuzz_stats *fs, int argc, char **argv, int *stale) {
    const char *cmd = "fuzz";
    /* From here on files are made: a signal now must end in an orderly stop (the campaign
     * sees it at once), never in a half-written statistics file. */
    kvf_campaign_catch_signals();
    {
        kvf_error werr = {0};
        if (kvf_mkdirs(f->o.findings_dir, &werr) ||
            kvf_fuzz_check_writable(f->o.findings_dir, &werr)) {
            kvf_campaign_release_signals();
            return cli_usage_error(cmd, "%s", werr.msg);
        }
    }
    /* Temporary files an earlier campaign left when it was killed mid-write (kill -9). */
    *stale = kvf_fuzz_remove_stale_temps(f->o.findings_dir, 60);
    if (f->o.corpus_dir) *stale += kvf_fuzz_remove_stale_temps(f->o.corpus_dir, 60);

    kvf_error err = {0};
    static char default_stats[4096];
    if (!f->stats_path) {
        default_stats_path(default_stats, sizeof default_stats, f->o.findings_dir);
        f->stats_path = default_stats;
    }
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.findings_dir = f->o.findings_dir;
    char *command = command_line(argc, argv, f->seed_given, f->o.seed);
    so.command = command ? command : "kvfuzz fuzz";
    so.flush_interval_s = f->stats_interval;
    so.require_overflow = f->o.require_overflow;
    fs->o = &f->o;
    fs->hooks.kernel = f->o.kernel ? f->o.kernel->name : NULL;
    fs->hooks.rules = f->o.rules;
    fs->hooks.nrules = f->o.nrules;
    int made =
        kvf_stats_sink_create(&fs->hooks.sink, &so, f->stats_path, KVF_CAMPAIGN_MAX_JOBS, &err);
    free(command); /* the statistics keep their own copy */
    if (made) {
        kvf_campaign_release_signals();
        return cli_usage_error(cmd, "%s", err.msg);
    }
    return 0;
}

/* The run's first lines, once every output is known to be writable. */
static void fuzz_banner(const fuzz_cli *f, const kvf_precision *model,
                        cli_precision_source model_source, int stale) {
    if (f->o.oracle_only) {
        fprintf(stderr, "kvfuzz fuzz: oracle only (no kernel, nothing judged), seed %" PRIu64,
                f->o.seed);
    } else {
        fprintf(stderr, "kvfuzz fuzz: kernel %s, seed %" PRIu64 "%s%s, rules", f->o.kernel->name,
                f->o.seed, f->tag ? ", tag " : "", f->tag ? f->tag : "");
        for (int r = 0; r < f->o.nrules; r++)
            fprintf(stderr, " %s", f->o.rules[r].name);
    }
    fprintf(stderr, ", %s in %s%s%s\n", f->o.oracle_only ? "statistics" : "findings",
            f->o.findings_dir, f->o.corpus_dir ? ", corpus " : "",
            f->o.corpus_dir ? f->o.corpus_dir : "");
    if (!f->o.oracle_only) {
        char mtext[96];
        cli_precision_text(model, model_source, mtext, sizeof mtext);
        fprintf(stderr, "kvfuzz fuzz: precision model %s\n", mtext);
    }
    if (stale)
        fprintf(stderr, "kvfuzz fuzz: removed %d temporary file(s) left by an interrupted write\n",
                stale);
}

/* After the campaign: the statistics closed, the summary, the verdicts and the groups; the
 * exit status. */
static int fuzz_finish(fuzz_cli *f, fuzz_stats *fs, const kvf_precision *model,
                       kvf_campaign_stats *st0, int rc, const kvf_error *err) {
    kvf_campaign_stats st = *st0;
    if (!st.interrupted && kvf_campaign_stop_signal()) {
        /* Caught before the campaign started (it then never ran): still a stop by signal. */
        st.interrupted = 1;
        st.stop_signal = kvf_campaign_stop_signal();
    }
    kvf_error serr = {0};
    if (st.ndevices) {
        kvf_stats_device devs[KVF_MAX_DEVICES];
        memset(devs, 0, sizeof devs);
        for (int k = 0; k < st.ndevices; k++) {
            const kvf_campaign_device *d = &st.device[k];
            devs[k] = (kvf_stats_device){d->ordinal, d->cases,         d->active_s, d->crashes,
                                         d->hangs,   d->kernel_errors, d->retired,  ""};
            /* The statistics keep the first sentence's worth; the log has it whole. */
            snprintf(devs[k].why, sizeof devs[k].why, "%.*s", (int)sizeof devs[k].why - 1, d->why);
        }
        if (kvf_stats_sink_set_devices(fs->hooks.sink, devs, (size_t)st.ndevices, &serr))
            fprintf(stderr, "kvfuzz fuzz: %s\n", serr.msg);
    }
    if (kvf_stats_sink_finish(fs->hooks.sink, &serr)) /* the oracle threads have all ended */
        fprintf(stderr, "kvfuzz fuzz: %s\n", serr.msg);
    else
        fprintf(stderr, "kvfuzz fuzz: statistics in %s\n", f->stats_path);
    if (rc) {
        fprintf(stderr, "kvfuzz fuzz: %s\n", err->msg);
        if (st.cases == 0) {
            kvf_stats_sink_free(fs->hooks.sink);
            kvf_campaign_release_signals();
            return KVF_EXIT_USAGE;
        }
    }
    kvf_campaign_print_summary(stdout, &f->o, &st);
    print_verdicts(stdout, kvf_stats_sink_stats(fs->hooks.sink), &st);
    if (!f->o.oracle_only)
        cli_fuzz_triage(stdout, f->o.findings_dir, f->o.kernel, model,
                        f->minimize_time >= 0 ? f->minimize_time : fmin(60, 0.1 * st.elapsed_s));
    kvf_stats_sink_free(fs->hooks.sink);
    fflush(stdout);
    /* Held until here: a signal during the last statistics write or the summary is the
     * orderly stop's, already under way (a second one still kills). */
    kvf_campaign_release_signals();
    if (st.finding_hits > 0) return KVF_EXIT_FINDINGS;
    return rc ? KVF_EXIT_USAGE : KVF_EXIT_OK;
}

int kvf_cmd_fuzz(int argc, char **argv) {
    static fuzz_cli f;    /* o.devices points into it */
    static fuzz_stats fs; /* 256 slots: too large for the stack */
    memset(&f, 0, sizeof f);
    memset(&fs, 0, sizeof fs);
    kvf_campaign_opts_default(&f.o);
    cli_limits(&f.o.case_limits);
    f.o.findings_dir = "findings";
    f.stats_interval = 60;
    f.minimize_time = -1;
    int rc = fuzz_parse(&f, argc, argv);
    if (rc >= 0) return rc;
    kvf_precision model;
    cli_precision_source model_source;
    if ((rc = fuzz_setup(&f, &model, &model_source))) return rc;
    int stale = 0;
    if ((rc = fuzz_open(&f, &fs, argc, argv, &stale))) return rc;
    fuzz_banner(&f, &model, model_source, stale);
    if (!f.o.oracle_only) {
        f.o.judge_hooks = stats_hooks;
        f.o.run_observer = stats_run;
        f.o.observer_ctx = &fs;
    }
    kvf_campaign_stats st;
    kvf_error err = {0};
    rc = kvf_campaign_run(&f.o, &st, &err);
    return fuzz_finish(&f, &fs, &model, &st, rc, &err);
}
