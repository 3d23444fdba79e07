/* `kvfuzz bench --oracle`: oracle throughput of the fast and the MPFR path, measured in the
 * same run on the same cases, on one thread, and the judge stage of a campaign on those cases.
 * What it measures and how is kvfuzz/oracle_bench.h; this file parses the options, gives the
 * judge stage the campaign's streaming statistics (stats_hooks.h, the path `kvfuzz fuzz` counts
 * every element through) and prints the tables. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "stats_hooks.h"
#include "kvfuzz/oracle_bench.h"

enum { BO_ORACLE = 256, BO_CASES, BO_SEED, BO_REPEAT };

static const cli_option bench_oracle_options[] = {
    {"oracle", BO_ORACLE, NULL, "the oracle benchmark (this one; it comes first)"},
    {"cases", BO_CASES, "N",
     "generated cases (default 2000; not with FILE), held in memory\nwhole: within the memory "
     "budget (KVF_MAX_MEMORY_MIB)"},
    {"seed", BO_SEED, "N", "generator seed (default 1; not with FILE)"},
    {"repeat", BO_REPEAT, "N", "repetitions, the best of each path reported (default 3)"},
    {0},
};

static void bench_oracle_help(FILE *f) {
    fprintf(f,
            "usage: kvfuzz bench --oracle [--cases N] [--seed N] [--repeat N] [FILE...]\n\n"
            "Measures the oracle's throughput on one thread, fast path and MPFR path in the same\n"
            "run on the same cases, and checks that their rounded outputs are bit-identical.\n"
            "Without FILE the cases are the campaign's fresh cases: random specs under the\n"
            "campaign's default size limits, fitted and repaired as `kvfuzz fuzz` does.\n\n");
    cli_print_options(f, bench_oracle_options);
    fprintf(f,
            "\nPrints tokens/s (KV tokens of every sequence, summed over the cases), rows/s and\n"
            "cases/s per core for each path, the speed-up, and the fast path's fallback rate\n"
            "(rows handed to MPFR); the line `build` times making the cases (generation).\n"
            "Then the judge stage on the same cases: the default rules on cpu-splitkv's outputs,\n"
            "without and with the campaign's streaming statistics, and the cases/s of one\n"
            "campaign oracle thread (fast oracle plus judge and statistics).\n"
            "Exit 0, 1 when the paths disagree or the oracle fails, 2 on\n"
            "bad usage or unreadable input.\n");
}

/* bench --oracle's options: the generated cases' number and seed, and the repeats. */
typedef struct bench_args {
    int64_t ncases, repeat;
    uint64_t useed;
    int cases_given, seed_given;
} bench_args;

/* The options into a; KVF_EXIT_OK after --help, KVF_EXIT_USAGE on an error, else -1. */
static int parse_bench_options(const char *cmd, cli_parser *op, bench_args *a) {
    const char *v;
    for (int key; (key = cli_next(op, &v)) != CLI_END;) {
        int bad = 0;
        switch (key) {
        case CLI_HELP:
            bench_oracle_help(stdout);
            return KVF_EXIT_OK;
        case CLI_ERROR:
            return KVF_EXIT_USAGE;
        case BO_ORACLE:
            break; /* given twice: harmless */
        case BO_CASES:
            bad = cli_opt_i64(cmd, "--cases", v, 1, 10000000, &a->ncases);
            a->cases_given = 1;
            break;
        case BO_SEED:
            bad = cli_opt_u64(cmd, "--seed", v, &a->useed);
            a->seed_given = 1;
            break;
        case BO_REPEAT:
            bad = cli_opt_i64(cmd, "--repeat", v, 1, 10000000, &a->repeat);
            break;
        }
        if (bad) return KVF_EXIT_USAGE;
    }
    return -1;
}

static int stats_hooks(void *ctx, int thread, const kvf_spec *spec, const kvf_case *c,
                       kvf_judge_hooks *hooks) {
    return cli_stats_hooks_begin(ctx, thread, spec, c, hooks);
}

/* The judge stage's best times over `repeat` runs: best[0] without statistics, [1] with them,
 * written to a sink in /tmp created for the run (at creation only: no file I/O while timed). */
static int time_judging(const kvf_oracle_bench_set *s, int64_t repeat, double best[2]) {
    kvf_oracle_bench_inputs in;
    static cli_stats_hooks hs; /* 256 slots: too large for the stack */
    memset(&hs, 0, sizeof hs);
    char path[] = "/tmp/kvfuzz-bench-stats-XXXXXX";
    int fd = -1, rc = -1;
    kvf_error err = {0};
    if (kvf_oracle_bench_inputs_make(s, &in, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        goto out;
    }
    if ((fd = mkstemp(path)) < 0) {
        fprintf(stderr, "kvfuzz bench: cannot create a statistics file in /tmp\n");
        goto out;
    }
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.flush_interval_s = 1e9;
    if (kvf_stats_sink_create(&hs.sink, &so, path, 1, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        goto out;
    }
    hs.kernel = in.kernel;
    hs.rules = in.rules;
    hs.nrules = in.nrules;
    if (kvf_oracle_bench_judge(s, &in, repeat, stats_hooks, &hs, best, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        goto out;
    }
    rc = 0;
out:
    kvf_stats_sink_free(hs.sink);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    kvf_oracle_bench_inputs_free(&in);
    return rc;
}

/* The oracle paths' table, the build line and the speed-up. */
static void print_paths(const kvf_oracle_bench_set *set, int nfiles, int64_t repeat,
                        const kvf_oracle_bench_path pr[2], double build_s, int64_t mismatched) {
    printf("oracle bench: %" PRId64 " %s, %" PRId64 " tokens, %" PRId64
           " rows, one thread, best of %" PRId64 " (thread CPU time)\n",
           set->n, nfiles ? "case files" : "generated cases (campaign mix)", set->tokens, set->rows,
           repeat);
    printf("%-6s %10s %14s %12s %10s\n", "path", "seconds", "tokens/s/core", "rows/s/core",
           "cases/s");
    for (int p = 0; p < 2; p++) {
        double sec = pr[p].best_s > 0 ? pr[p].best_s : 1e-9;
        printf("%-6s %10.4f %14.0f %12.0f %10.1f\n",
               kvf_oracle_path_name(kvf_oracle_bench_path_ids[p]), sec, (double)set->tokens / sec,
               (double)set->rows / sec, (double)set->n / sec);
    }
    printf("%-6s %10.4f %14.0f %12s %10.1f  (%s the cases, once)\n", "build", build_s,
           (double)set->tokens / (build_s > 0 ? build_s : 1e-9), "",
           (double)set->n / (build_s > 0 ? build_s : 1e-9),
           nfiles ? "reading and building" : "generating, fitting and repairing");
    long fr = pr[1].fast_rows, fb = pr[1].fallback_rows;
    printf("speed-up %.2fx; fallback %ld of %ld rows (%.3f%%); rounded outputs %s\n",
           pr[0].best_s / (pr[1].best_s > 0 ? pr[1].best_s : 1e-9), fb, fr + fb,
           fr + fb ? 100.0 * (double)fb / (double)(fr + fb) : 0.0,
           mismatched ? "DIFFER" : "identical");
}

/* The judge's times, plain and with statistics, beside the fast oracle's. */
static void print_judging(const kvf_oracle_bench_set *set, int64_t repeat,
                          const kvf_oracle_bench_path pr[2], const double jb[2]) {
    const double fast_s = pr[1].best_s > 0 ? pr[1].best_s : 1e-9;
    printf("judge (default rules, cpu-splitkv's outputs), one thread, best of %" PRId64 ":\n",
           repeat);
    for (int k = 0; k < 2; k++) {
        double sec = jb[k] > 0 ? jb[k] : 1e-9;
        printf("%-18s %10.4f s %10.1f cases/s  %5.2fx the fast oracle's time\n",
               k ? "judge+statistics" : "judge", sec, (double)set->n / sec, sec / fast_s);
    }
    printf("an oracle thread of a campaign: %.1f cases/s (fast oracle, then judge+statistics)\n",
           (double)set->n / (fast_s + (jb[1] > 0 ? jb[1] : 1e-9)));
}

/* The cases of FILE arguments, or generated: 0, or the exit status after one sentence. */
static int build_cases(kvf_oracle_bench_set *set, const bench_args *a, char **files, int nfiles,
                       double *build_s) {
    kvf_error err = {0};
    if (nfiles) {
        kvf_limits lim;
        cli_limits(&lim);
        int failed = -1;
        if (!kvf_oracle_bench_load(set, files, nfiles, &lim, build_s, &failed, &err)) return 0;
        if (failed >= 0) return cli_usage_error("bench", "%s: %s", files[failed], err.msg);
    } else {
        const int rc = kvf_oracle_bench_generate(set, a->ncases, a->useed, build_s, &err);
        if (!rc) return 0;
        /* Past the memory budget: too many --cases, a usage error like a case past it. */
        if (rc == KVF_ELIMIT)
            return cli_usage_error("bench", "--cases %" PRId64 ": %s", a->ncases, err.msg);
    }
    fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
    return KVF_EXIT_FINDINGS;
}

int kvf_cmd_bench_oracle(int argc, char **argv) {
    const char *cmd = "bench";
    bench_args a = {.ncases = 2000, .repeat = 3, .useed = 1};
    kvf_oracle_bench_set set = {0};
    double build_s = 0; /* thread CPU time spent generating or loading the cases */
    cli_parser op;
    /* argv[0] is "--oracle" (bench's dispatch); the parser starts after it. */
    cli_parser_init(&op, cmd, argc, argv, bench_oracle_options);
    int rc = parse_bench_options(cmd, &op, &a);
    if (rc >= 0) return rc;
    char **files;
    int nfiles = cli_operands(&op, &files);
    /* The cases either come from the generator or from files, never both. */
    if (nfiles && (a.cases_given || a.seed_given))
        return cli_usage_error(cmd, "%s sets the generated cases: not with FILE arguments",
                               a.cases_given ? "--cases" : "--seed");
    if ((rc = build_cases(&set, &a, files, nfiles, &build_s))) {
        kvf_oracle_bench_set_free(&set);
        return rc;
    }
    kvf_oracle_bench_path pr[2] = {{-1, 0, 0}, {-1, 0, 0}};
    int64_t mismatched = 0;
    kvf_error err = {0};
    if (kvf_oracle_bench_paths(&set, a.repeat, pr, &mismatched, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        rc = KVF_EXIT_FINDINGS;
    } else {
        print_paths(&set, nfiles, a.repeat, pr, build_s, mismatched);
        if (mismatched) {
            fprintf(stderr, "kvfuzz bench: the paths disagree on %" PRId64 " case runs\n",
                    mismatched);
            rc = KVF_EXIT_FINDINGS;
        }
    }
    double jb[2];
    if (rc == KVF_EXIT_OK && time_judging(&set, a.repeat, jb)) rc = KVF_EXIT_FINDINGS;
    if (rc == KVF_EXIT_OK) print_judging(&set, a.repeat, pr, jb);
    kvf_oracle_bench_set_free(&set);
    return rc;
}
