/* `kvfuzz bench --oracle`: oracle throughput of the fast and the MPFR path, measured in the
 * same run on the same cases, on one thread.
 *
 * Method: the cases are built before any timing (the campaign's fresh-case generator: random
 * specs under the campaign's default size limits, fitted and repaired as the campaign does; or
 * case files). Each repetition runs the whole set through the MPFR path and through the fast
 * path, alternating which goes first, with threads = 1; the time is the calling thread's CPU
 * time (CLOCK_THREAD_CPUTIME_ID), so other load on the machine inflates it less than wall
 * time would. The best repetition of each path is reported. tokens = sum over the cases of
 * the KV tokens of every sequence; rows = (sequence, q head) pairs. Every repetition checks
 * that the two paths' rounded outputs are bit-identical.
 *
 * The judge stage of a campaign is timed on the same cases, also on one thread: each case's
 * kernel output comes from cpu-splitkv and its oracle from the fast path (both once, untimed),
 * then the default rules judge every case without statistics, and with the campaign's
 * streaming statistics (stats_hooks.h, the path `kvfuzz fuzz` counts every element through).
 * A campaign's oracle thread spends the oracle's time plus the second of these on each case. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "stats_hooks.h"
#include "kvfuzz/campaign.h"
#include "kvfuzz/mutate.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

enum { BO_ORACLE = 256, BO_CASES, BO_SEED, BO_REPEAT };

static const cli_option bench_oracle_options[] = {
    {"oracle", BO_ORACLE, NULL, "the oracle benchmark (this one; it comes first)"},
    {"cases", BO_CASES, "N", "generated cases (default 2000; not with FILE)"},
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

typedef struct bench_set {
    kvf_case *cases;
    kvf_spec *specs; /* generated cases' recipes (the statistics' case identity); NULL: files */
    int64_t n, cap;
    int64_t tokens, rows;
} bench_set;

/* Adds c, and its recipe when sp is not NULL (both then belong to the set). */
static int set_add(bench_set *s, const kvf_case *c, const kvf_spec *sp) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        kvf_case *p = realloc(s->cases, (size_t)cap * sizeof *p);
        if (!p) return -1;
        s->cases = p;
        if (sp) {
            kvf_spec *q = realloc(s->specs, (size_t)cap * sizeof *q);
            if (!q) return -1;
            s->specs = q;
        }
        s->cap = cap;
    }
    if (sp) s->specs[s->n] = *sp;
    s->cases[s->n++] = *c;
    s->tokens += kvf_case_total_tokens(c);
    s->rows += (int64_t)c->batch_size * c->num_qo_heads;
    return 0;
}

static void set_free(bench_set *s) {
    for (int64_t i = 0; i < s->n; i++) {
        kvf_case_free(&s->cases[i]);
        if (s->specs) kvf_spec_free(&s->specs[i]);
    }
    free(s->cases);
    free(s->specs);
}

static double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct path_run {
    double best_s;
    long fast_rows, fallback_rows;
} path_run;

/* Runs every case through one path; *results gets the outputs (for the comparison). */
static int run_path(const bench_set *s, int path, kvf_oracle_result *results, double *sec) {
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    o.path = path;
    o.threads = 1;
    kvf_error err;
    double t0 = thread_cpu_s();
    for (int64_t i = 0; i < s->n; i++) {
        if (kvf_oracle_run(&results[i], &s->cases[i], &o, &err)) {
            fprintf(stderr, "kvfuzz bench: the %s oracle failed on case %" PRId64 ": %s\n",
                    kvf_oracle_path_name(path), i, err.msg);
            for (int64_t j = 0; j < i; j++)
                kvf_oracle_result_free(&results[j]);
            return -1;
        }
    }
    *sec = thread_cpu_s() - t0;
    return 0;
}

static int64_t count_mismatches(const bench_set *s, const kvf_oracle_result *a,
                                const kvf_oracle_result *b) {
    int64_t bad = 0;
    for (int64_t i = 0; i < s->n; i++) {
        const kvf_case *c = &s->cases[i];
        int64_t rows = (int64_t)c->batch_size * c->num_qo_heads;
        if (memcmp(a[i].o_rounded, b[i].o_rounded, (size_t)(rows * c->head_dim) * 2) != 0 ||
            memcmp(a[i].lse_rounded, b[i].lse_rounded, (size_t)rows * 4) != 0 ||
            memcmp(a[i].rows, b[i].rows, (size_t)rows * sizeof(kvf_oracle_row)) != 0)
            bad++;
    }
    return bad;
}

static int generate(bench_set *s, int64_t ncases, uint64_t seed) {
    kvf_campaign_opts co;
    kvf_campaign_opts_default(&co);
    kvf_random_opts ro;
    kvf_mutate_random_opts(&ro, &co.mutate);
    kvf_prng rng;
    kvf_prng_seed(&rng, seed);
    for (int64_t tries = 0; s->n < ncases && tries < 100 * ncases; tries++) {
        kvf_spec sp;
        kvf_case c;
        if (kvf_spec_random(&sp, kvf_prng_next(&rng), &ro, NULL)) continue;
        kvf_spec_fit(&sp, &co.mutate);
        int rc = kvf_spec_repair(&sp, &co.case_limits, co.mutate.allow_nonfinite, &c, NULL);
        if (rc) {
            kvf_spec_free(&sp);
            continue;
        }
        if (set_add(s, &c, &sp)) {
            kvf_case_free(&c);
            kvf_spec_free(&sp);
            return -1;
        }
    }
    return s->n == ncases ? 0 : -1;
}

/* Every case's kernel output (cpu-splitkv) and fast oracle, untimed, for timing the judge. */
typedef struct judge_inputs {
    kvf_oracle_result *oracle;
    kvf_bf16 **o;
    float **lse;
    int64_t n;
} judge_inputs;

static void judge_inputs_free(judge_inputs *in) {
    for (int64_t i = 0; i < in->n; i++) {
        kvf_oracle_result_free(&in->oracle[i]);
        free(in->o[i]);
        free(in->lse[i]);
    }
    free(in->oracle);
    free(in->o);
    free(in->lse);
    memset(in, 0, sizeof *in);
}

static int judge_inputs_make(const bench_set *s, judge_inputs *in) {
    memset(in, 0, sizeof *in);
    in->oracle = calloc((size_t)s->n + 1, sizeof *in->oracle);
    in->o = calloc((size_t)s->n + 1, sizeof *in->o);
    in->lse = calloc((size_t)s->n + 1, sizeof *in->lse);
    if (!in->oracle || !in->o || !in->lse) return -1;
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    oo.threads = 1;
    const kvf_kernel *kernel = kvf_kernel_find("cpu-splitkv");
    for (int64_t i = 0; i < s->n; i++) {
        const kvf_case *c = &s->cases[i];
        kvf_error err;
        in->o[i] = malloc((size_t)(kvf_case_o_elems(c) + 1) * sizeof **in->o);
        in->lse[i] = malloc((size_t)(kvf_case_lse_elems(c) + 1) * sizeof **in->lse);
        in->n = i + 1;
        if (!in->o[i] || !in->lse[i] || !kernel ||
            kvf_kernel_run_once(kernel, c, in->o[i], in->lse[i], &err) ||
            kvf_oracle_run(&in->oracle[i], c, &oo, &err))
            return -1;
    }
    return 0;
}

/* Judges every case under the default rules, with the campaign's statistics when hs is not
 * NULL; the thread's CPU seconds, or -1 when a judging fails. */
static double judge_all(const bench_set *s, const judge_inputs *in, const kvf_rule *rules,
                        int nrules, cli_stats_hooks *hs) {
    double t0 = thread_cpu_s();
    for (int64_t i = 0; i < s->n; i++) {
        kvf_outcome out;
        kvf_judge_hooks hooks;
        int hooked = hs && cli_stats_hooks_begin(hs, 0, s->specs ? &s->specs[i] : NULL,
                                                 &s->cases[i], &hooks) == 0;
        kvf_error err;
        if (kvf_outcome_judge_hooked(&out, rules, nrules, 0, &s->cases[i], &in->oracle[i], in->o[i],
                                     in->lse[i], hooked ? &hooks : NULL, &err)) {
            fprintf(stderr, "kvfuzz bench: judging case %" PRId64 " failed: %s\n", i, err.msg);
            return -1;
        }
    }
    return thread_cpu_s() - t0;
}

/* The judge stage's best times over `repeat` runs: plain[0] without statistics, [1] with. */
static int time_judging(const bench_set *s, int64_t repeat, double best[2]) {
    judge_inputs in;
    static cli_stats_hooks hs; /* 256 slots: too large for the stack */
    memset(&hs, 0, sizeof hs);
    kvf_rule rules[KVF_MAX_RULES];
    int nrules = kvf_rule_default_set(rules, KVF_MAX_RULES);
    char path[] = "/tmp/kvfuzz-bench-stats-XXXXXX";
    int fd = -1, rc = -1;
    if (judge_inputs_make(s, &in)) {
        fprintf(stderr, "kvfuzz bench: could not compute the judge's inputs\n");
        goto out;
    }
    if ((fd = mkstemp(path)) < 0) {
        fprintf(stderr, "kvfuzz bench: cannot create a statistics file in /tmp\n");
        goto out;
    }
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.flush_interval_s = 1e9; /* written at creation only: no file I/O while timed */
    kvf_error err;
    if (kvf_stats_sink_create(&hs.sink, &so, path, 1, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        goto out;
    }
    hs.kernel = "cpu-splitkv";
    hs.rules = rules;
    hs.nrules = nrules;
    best[0] = best[1] = -1;
    for (int64_t r = 0; r < repeat; r++)
        for (int k = 0; k < 2; k++) {
            const double sec = judge_all(s, &in, rules, nrules, k ? &hs : NULL);
            if (sec < 0) goto out;
            if (best[k] < 0 || sec < best[k]) best[k] = sec;
        }
    rc = 0;
out:
    kvf_stats_sink_free(hs.sink);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    judge_inputs_free(&in);
    return rc;
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

/* The case files into set, their loading's thread CPU time added to *build_s; the exit status
 * on a failure (set freed), else 0. */
static int load_files(bench_set *set, char **files, int n, double *build_s) {
    for (int i = 0; i < n; i++) {
        const char *a = files[i];
        kvf_limits lim;
        cli_limits(&lim);
        kvf_case c;
        kvf_error err;
        double t0 = thread_cpu_s();
        int lrc = kvf_case_load(a, NULL, &c, &lim, &err);
        *build_s += thread_cpu_s() - t0;
        if (lrc) {
            cli_usage_error("bench", "%s: %s", a, err.msg);
            set_free(set);
            return KVF_EXIT_USAGE;
        }
        if (set_add(set, &c, NULL)) {
            kvf_case_free(&c);
            set_free(set);
            fprintf(stderr, "kvfuzz bench: out of memory\n");
            return KVF_EXIT_FINDINGS;
        }
    }
    return 0;
}

static const int paths[2] = {KVF_ORACLE_MPFR, KVF_ORACLE_FAST};

/* Both oracle paths over the set `repeat` times, each path's best time and rows into pr and
 * the case runs whose rounded outputs differ into *mismatched; the exit status. */
static int time_paths(const bench_set *set, int64_t repeat, path_run pr[2], int64_t *mismatched) {
    kvf_oracle_result *res[2];
    res[0] = calloc((size_t)set->n + 1, sizeof(kvf_oracle_result));
    res[1] = calloc((size_t)set->n + 1, sizeof(kvf_oracle_result));
    int rc = KVF_EXIT_OK;
    for (int64_t r = 0; r < repeat && rc == KVF_EXIT_OK && res[0] && res[1]; r++) {
        for (int k = 0; k < 2; k++) {
            int p = (int)((k + r) & 1); /* alternate which path goes first */
            double sec;
            if (run_path(set, paths[p], res[p], &sec)) {
                rc = KVF_EXIT_FINDINGS;
                if (k == 1)
                    for (int64_t i = 0; i < set->n; i++)
                        kvf_oracle_result_free(&res[1 - p][i]);
                break;
            }
            if (pr[p].best_s < 0 || sec < pr[p].best_s) pr[p].best_s = sec;
            pr[p].fast_rows = pr[p].fallback_rows = 0;
            for (int64_t i = 0; i < set->n; i++) {
                pr[p].fast_rows += res[p][i].fast_rows;
                pr[p].fallback_rows += res[p][i].fallback_rows;
            }
        }
        if (rc != KVF_EXIT_OK) break;
        *mismatched += count_mismatches(set, res[0], res[1]);
        for (int p = 0; p < 2; p++)
            for (int64_t i = 0; i < set->n; i++)
                kvf_oracle_result_free(&res[p][i]);
    }
    if (!res[0] || !res[1]) {
        fprintf(stderr, "kvfuzz bench: out of memory\n");
        rc = KVF_EXIT_FINDINGS;
    }
    free(res[0]);
    free(res[1]);
    return rc;
}

/* The oracle paths' table, the build line and the speed-up. */
static void print_paths(const bench_set *set, int nfiles, int64_t repeat, const path_run pr[2],
                        double build_s, int64_t mismatched) {
    printf("oracle bench: %" PRId64 " %s, %" PRId64 " tokens, %" PRId64
           " rows, one thread, best of %" PRId64 " (thread CPU time)\n",
           set->n, nfiles ? "case files" : "generated cases (campaign mix)", set->tokens, set->rows,
           repeat);
    printf("%-6s %10s %14s %12s %10s\n", "path", "seconds", "tokens/s/core", "rows/s/core",
           "cases/s");
    for (int p = 0; p < 2; p++) {
        double sec = pr[p].best_s > 0 ? pr[p].best_s : 1e-9;
        printf("%-6s %10.4f %14.0f %12.0f %10.1f\n", kvf_oracle_path_name(paths[p]), sec,
               (double)set->tokens / sec, (double)set->rows / sec, (double)set->n / sec);
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
static void print_judging(const bench_set *set, int64_t repeat, const path_run pr[2],
                          const double jb[2]) {
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

int kvf_cmd_bench_oracle(int argc, char **argv) {
    const char *cmd = "bench";
    bench_args a = {.ncases = 2000, .repeat = 3, .useed = 1};
    bench_set set = {0};
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
    if ((rc = load_files(&set, files, nfiles, &build_s))) return rc;
    double g0 = thread_cpu_s();
    int grc = nfiles ? 0 : generate(&set, a.ncases, a.useed);
    if (!nfiles) build_s = thread_cpu_s() - g0;
    if (grc) {
        fprintf(stderr, "kvfuzz bench: could not generate %" PRId64 " cases\n", a.ncases);
        set_free(&set);
        return KVF_EXIT_FINDINGS;
    }

    path_run pr[2] = {{-1, 0, 0}, {-1, 0, 0}};
    int64_t mismatched = 0;
    rc = time_paths(&set, a.repeat, pr, &mismatched);
    if (rc == KVF_EXIT_OK) {
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
    set_free(&set);
    return rc;
}
