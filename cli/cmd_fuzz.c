/* kvfuzz fuzz: the campaign runner's command line (fuzz/include/kvfuzz/campaign.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "kvfuzz/campaign.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/stats.h"
#include "kvfuzz/stats_sink.h"
#include "kvfuzz/verdict.h"
#include "kvfuzz/test_kernels.h"

static void fuzz_help(void) {
    printf(
        "usage: kvfuzz fuzz [--kernel K] [--rule R]... [--time SEC | --runs N] [--jobs N]\n"
        "                   [--seed N] [--corpus DIR] [--findings DIR] [--stats FILE]\n"
        "                   [--stats-interval SEC] [--deadline SEC]\n"
        "                   [--determinism N] [--max-batch N] [--max-pages N]\n"
        "                   [--max-page-size N] [--max-work N] [--require-overflow]\n"
        "                   [--workers N] [--generators N] [--in-process] [--oracle-only]\n"
        "                   [--oracle fast|mpfr] [--verbose]\n\n"
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
        "  --time SEC          stop after SEC seconds.\n"
        "  --runs N            stop after N cases. Without --time or --runs: until stopped.\n"
        "  --jobs N            oracle threads (default: all cores but a quarter, at most\n"
        "                      4, which generation and the kernel worker need; all cores\n"
        "                      with --oracle-only).\n"
        "  --oracle P          oracle path: fast (default: double arithmetic with a certified\n"
        "                      bound, MPFR for what it cannot certify) or mpfr (MPFR for\n"
        "                      every row); both give the same correctly rounded results.\n"
        "  --seed N            campaign seed (default: from the clock; printed at the start).\n"
        "  --corpus DIR        cases to start from; new cases reaching new error buckets are\n"
        "                      added to it (created if missing).\n"
        "  --findings DIR      where findings go (default: findings).\n"
        "  --stats FILE        streaming error statistics, rewritten atomically during the run\n"
        "                      and at exit, for `kvfuzz report` (default: DIR/stats.json).\n"
        "  --stats-interval SEC  rewrite the statistics at most this often (default 60).\n"
        "  --deadline SEC      per-launch deadline before a hang is declared (default 10).\n"
        "  --determinism N     re-run every Nth case after another one and compare the bits\n"
        "                      (default 16; 0 turns the check off).\n"
        "  --max-batch N       largest batch generated (default 4).\n"
        "  --max-pages N       most pages per sequence (default 8).\n"
        "  --max-page-size N   largest page size (default 256).\n"
        "  --max-work N        cap on the oracle's cost per case, (tokens + 32 x batch) x\n"
        "                      Hq x D (default 131072); the generator's budget, elements\n"
        "                      written per cache, is a quarter of it (at least 32768).\n"
        "  --require-overflow  count violations on rows whose logits exceed the f32 range\n"
        "                      (class overflow) as findings.\n"
        "  --workers N         kernel worker processes, each launching one case at a time\n"
        "                      (default 1; for CPU kernels more can help, for one GPU\n"
        "                      they time-slice and were slower).\n"
        "  --generators N      threads generating cases (default: one per four oracle\n"
        "                      threads).\n"
        "  --in-process        run the kernel in this process (for a debugger; a crash or a\n"
        "                      hang then ends the campaign).\n"
        "  --oracle-only       no kernel and no judging: generate cases and run the oracle,\n"
        "                      to measure the oracle-bound rate a kernel campaign is\n"
        "                      compared with (docs/performance.md).\n"
        "  --verbose           print the full report of every new finding.\n\n"
        "Exit status: 0 nothing found, 1 at least one finding, 2 bad usage or a kernel that\n"
        "cannot start.\n");
}

static int parse_pos(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi,
                     int64_t *out) {
    if (cli_parse_i64(v, lo, hi, out))
        return cli_usage_error(cmd, "%s must be an integer in [%lld, %lld], got \"%s\"", opt,
                               (long long)lo, (long long)hi, v);
    return 0;
}

static int parse_seconds(const char *cmd, const char *opt, const char *v, double *out) {
    if (cli_parse_double(v, out) || !(*out > 0) || *out > 1e9)
        return cli_usage_error(cmd, "%s must be a positive number of seconds, got \"%s\"", opt, v);
    return 0;
}

/* Streaming error statistics (reports/, kvfuzz/stats_sink.h): the campaign hands each case's
 * judging to the sink through the judge hooks, so every element is counted while the judge
 * computes it and each case is judged once. One slot per oracle thread carries the case's
 * bytes and the sink's scope between the hooks. */
typedef struct fuzz_stats {
    kvf_stats_sink *sink;
    const kvf_campaign_opts *o;
    struct stats_slot {
        struct fuzz_stats *fs;
        int thread;
    } slots[KVF_CAMPAIGN_MAX_JOBS];
} fuzz_stats;

static void *stats_rule_begin(void *ctx, int rule) {
    struct stats_slot *sl = ctx;
    return kvf_stats_sink_rule_begin(sl->fs->sink, sl->thread, rule);
}

static void stats_rule_end(void *ctx, void *scope, const kvf_verdict *v) {
    struct stats_slot *sl = ctx;
    kvf_stats_sink_rule_end(sl->fs->sink, sl->thread, scope, v);
}

static int stats_hooks(void *ctx, int thread, const kvf_spec *spec, const kvf_case *c,
                       kvf_judge_hooks *hooks) {
    fuzz_stats *fs = ctx;
    if (thread < 0 || thread >= KVF_CAMPAIGN_MAX_JOBS) return -1;
    uint8_t *bytes = NULL;
    size_t size = 0;
    if (kvf_spec_encode(spec, &bytes, &size, NULL)) bytes = NULL;
    kvf_stats_case ref = {NULL, bytes, bytes ? size : 0};
    kvf_stats_sink_case_begin(fs->sink, thread, fs->o->kernel->name, fs->o->rules, fs->o->nrules, c,
                              &ref); /* copies the bytes */
    free(bytes);
    struct stats_slot *sl = &fs->slots[thread];
    sl->fs = fs;
    sl->thread = thread;
    hooks->begin = stats_rule_begin;
    hooks->element = kvf_stats_observe_element;
    hooks->end = stats_rule_end;
    hooks->ctx = sl;
    return 0;
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
}

int kvf_cmd_fuzz(int argc, char **argv) {
    const char *cmd = "fuzz";
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    cli_limits(&o.case_limits);
    o.findings_dir = "findings";
    int seed_given = 0;
    const char *kernel_name = NULL, *stats_path = NULL;
    double stats_interval = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            fuzz_help();
            return KVF_EXIT_OK;
        }
        if (strcmp(a, "--require-overflow") == 0) {
            o.require_overflow = 1;
            continue;
        }
        if (strcmp(a, "--in-process") == 0) {
            o.in_process = 1;
            continue;
        }
        if (strcmp(a, "--oracle-only") == 0) {
            o.oracle_only = 1;
            continue;
        }
        if (strcmp(a, "--verbose") == 0) {
            o.verbose = 1;
            continue;
        }
        static const char *const valued[] = {"--kernel",        "--rule",      "--time",
                                             "--runs",          "--jobs",      "--seed",
                                             "--corpus",        "--findings",  "--deadline",
                                             "--determinism",   "--max-batch", "--max-pages",
                                             "--max-page-size", "--max-work",  "--generators",
                                             "--workers",       "--stats",     "--stats-interval",
                                             "--oracle",        NULL};
        int known = 0;
        for (int k = 0; valued[k]; k++)
            if (strcmp(a, valued[k]) == 0) known = 1;
        if (!known) {
            if (a[0] == '-')
                return cli_usage_error(cmd, "unknown option \"%s\" (see kvfuzz fuzz --help)", a);
            return cli_usage_error(cmd, "unexpected argument \"%s\" (see kvfuzz fuzz --help)", a);
        }
        if (i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a);
        const char *v = argv[++i];
        int64_t n;
        int rc = 0;
        if (strcmp(a, "--kernel") == 0) {
            kernel_name = v;
        } else if (strcmp(a, "--rule") == 0) {
            kvf_error err = {0};
            if (o.nrules == KVF_MAX_RULES)
                return cli_usage_error(cmd, "at most %d rules per run", KVF_MAX_RULES);
            if (kvf_rule_parse(&o.rules[o.nrules], v, &err))
                return cli_usage_error(cmd, "%s", err.msg);
            o.nrules++;
        } else if (strcmp(a, "--time") == 0) {
            rc = parse_seconds(cmd, a, v, &o.time_limit_s);
        } else if (strcmp(a, "--runs") == 0) {
            rc = parse_pos(cmd, a, v, 1, INT64_MAX, &o.max_runs);
        } else if (strcmp(a, "--jobs") == 0) {
            rc = parse_pos(cmd, a, v, 1, 256, &n);
            o.jobs = (int)n;
        } else if (strcmp(a, "--oracle") == 0) {
            int path;
            if (kvf_oracle_path_parse(v, &path))
                return cli_usage_error(cmd, "--oracle must be fast or mpfr, got \"%s\"", v);
            kvf_oracle_set_default_path(path); /* the campaign's oracle threads take defaults */
        } else if (strcmp(a, "--workers") == 0) {
            rc = parse_pos(cmd, a, v, 1, 64, &n);
            o.workers = (int)n;
        } else if (strcmp(a, "--generators") == 0) {
            rc = parse_pos(cmd, a, v, 1, 64, &n);
            o.generators = (int)n;
        } else if (strcmp(a, "--seed") == 0) {
            if (cli_parse_u64(v, &o.seed))
                return cli_usage_error(cmd, "--seed must be a non-negative integer, got \"%s\"", v);
            seed_given = 1;
        } else if (strcmp(a, "--corpus") == 0) {
            o.corpus_dir = v;
        } else if (strcmp(a, "--findings") == 0) {
            o.findings_dir = v;
        } else if (strcmp(a, "--stats") == 0) {
            stats_path = v;
        } else if (strcmp(a, "--stats-interval") == 0) {
            rc = parse_seconds(cmd, a, v, &stats_interval);
        } else if (strcmp(a, "--deadline") == 0) {
            rc = parse_seconds(cmd, a, v, &o.deadline_s);
        } else if (strcmp(a, "--determinism") == 0) {
            rc = parse_pos(cmd, a, v, 0, INT32_MAX, &n);
            o.determinism_every = (int)n;
        } else if (strcmp(a, "--max-batch") == 0) {
            rc = parse_pos(cmd, a, v, 1, 4096, &n);
            o.mutate.max_batch = (int32_t)n;
        } else if (strcmp(a, "--max-pages") == 0) {
            rc = parse_pos(cmd, a, v, 1, 65535, &n);
            o.mutate.max_pages = (int32_t)n;
        } else if (strcmp(a, "--max-page-size") == 0) {
            rc = parse_pos(cmd, a, v, 1, 1024, &n);
            o.mutate.max_page_size = (int32_t)n;
        } else if (strcmp(a, "--max-work") == 0) {
            rc = parse_pos(cmd, a, v, 1, INT64_MAX / 4, &n);
            o.mutate.max_work = n;
            /* The pool budget follows the work budget so larger cases get larger pools. */
            if (n / 4 > o.mutate.max_pool_elems) o.mutate.max_pool_elems = n / 4;
        }
        if (rc) return rc;
    }
    if (o.time_limit_s > 0 && o.max_runs > 0)
        return cli_usage_error(cmd, "give --time or --runs, not both");
    if (kernel_name) {
        if (cli_one_kernel(cmd, kernel_name, &o.kernel)) return KVF_EXIT_USAGE;
    } else {
        /* Asked in a child process: this one must not initialise CUDA before forking workers. */
        char why[256];
        o.kernel = kvf_runner_probe_cuda(why, sizeof why) ? kvf_kernel_find("cuda") : NULL;
        if (!o.kernel) o.kernel = kvf_kernel_find("cpu-splitkv");
    }
    if (!seed_given) o.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (o.nrules == 0) o.nrules = kvf_rule_default_set(o.rules, KVF_MAX_RULES);

    {
        kvf_error werr = {0};
        if (kvf_fuzz_mkdirs(o.findings_dir, &werr) ||
            kvf_fuzz_check_writable(o.findings_dir, &werr))
            return cli_usage_error(cmd, "%s", werr.msg);
    }
    fprintf(stderr, "kvfuzz fuzz: kernel %s, seed %" PRIu64 ", rules", o.kernel->name, o.seed);
    for (int r = 0; r < o.nrules; r++)
        fprintf(stderr, " %s", o.rules[r].name);
    fprintf(stderr, ", findings in %s%s%s\n", o.findings_dir, o.corpus_dir ? ", corpus " : "",
            o.corpus_dir ? o.corpus_dir : "");

    kvf_error err = {0};
    char default_stats[4096];
    if (!stats_path) {
        snprintf(default_stats, sizeof default_stats, "%s/stats.json", o.findings_dir);
        stats_path = default_stats;
        if (kvf_fuzz_mkdirs(o.findings_dir, &err)) return cli_usage_error(cmd, "%s", err.msg);
    }
    static fuzz_stats fs; /* 256 slots: too large for the stack */
    memset(&fs, 0, sizeof fs);
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.findings_dir = o.findings_dir;
    so.command = "kvfuzz fuzz";
    so.flush_interval_s = stats_interval;
    so.require_overflow = o.require_overflow;
    fs.o = &o;
    if (kvf_stats_sink_create(&fs.sink, &so, stats_path, KVF_CAMPAIGN_MAX_JOBS, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    if (!o.oracle_only) {
        o.judge_hooks = stats_hooks;
        o.observer_ctx = &fs;
    }

    kvf_campaign_stats st;
    int rc = kvf_campaign_run(&o, &st, &err);
    kvf_error serr = {0};
    if (kvf_stats_sink_finish(fs.sink, &serr)) /* the oracle threads have all ended */
        fprintf(stderr, "kvfuzz fuzz: %s\n", serr.msg);
    else
        fprintf(stderr, "kvfuzz fuzz: statistics in %s\n", stats_path);
    if (rc) {
        fprintf(stderr, "kvfuzz fuzz: %s\n", err.msg);
        if (st.cases == 0) {
            kvf_stats_sink_free(fs.sink);
            return KVF_EXIT_USAGE;
        }
    }
    kvf_campaign_print_summary(stdout, &o, &st);
    print_verdicts(stdout, kvf_stats_sink_stats(fs.sink), &st);
    kvf_stats_sink_free(fs.sink);
    fflush(stdout);
    if (st.finding_hits > 0) return KVF_EXIT_FINDINGS;
    return rc ? KVF_EXIT_USAGE : KVF_EXIT_OK;
}
