/* kvfuzz replay: kernel, oracle and judge for each case file; one line per (case, kernel). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "kvfuzz/attribution.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/spec.h"
#include "kvfuzz/stats.h"
#include "kvfuzz/verdict.h"

#define MAX_RULES 16

enum {
    REPLAY_KERNEL = 256,
    REPLAY_DEADLINE,
    REPLAY_RULE,
    REPLAY_JOBS,
    REPLAY_ORACLE,
    REPLAY_REQUIRE_OVERFLOW,
    REPLAY_STATS,
    REPLAY_PRECISION
};

/* --help names the limit in words. */
_Static_assert(KVF_PLUGIN_MAX_KERNELS == 4096u, "replay --help states the plugin kernel limit");

static const cli_option replay_options[] = {
    {"kernel", REPLAY_KERNEL, "K",
     "kernel to run (repeatable): a built-in name (`kvfuzz\n"
     "kernels`), PATH.so (every kernel of a plugin: any number up\n"
     "to the 4096 one library may list), PATH.so:NAME,\n"
     "python:MODULE:FUNCTION or a FlashInfer-Bench solution .json.\n"
     "Default: the kernel the files' finding reports (.json beside\n"
     "them) record, when all record the same; else cuda when a GPU\n"
     "is usable, else cpu-splitkv. Each\n"
     "kernel runs in a worker process: a crash or hang is reported\n"
     "for its case and the others still run."},
    {"deadline", REPLAY_DEADLINE, "SEC",
     "per launch, after which the kernel counts as hung (default 60)"},
    {"rule", REPLAY_RULE, "R",
     "rule (repeatable; `kvfuzz rules`). Default: strict, fa, and\n"
     "the failing rule the findings' reports record."},
    {"precision", REPLAY_PRECISION, "MODEL", CLI_PRECISION_HELP},
    {"jobs", REPLAY_JOBS, "N", "oracle threads (default: all cores)."},
    {"oracle", REPLAY_ORACLE, "P",
     "oracle path: fast (default: double arithmetic with a certified\n"
     "bound, MPFR for what it cannot certify) or mpfr (MPFR for\n"
     "every row); both give the same correctly rounded results."},
    {"require-overflow", REPLAY_REQUIRE_OVERFLOW, NULL,
     "count violations on rows whose logits exceed the f32 range\n"
     "(class overflow) as failures; by default they are shown but\n"
     "do not fail the run."},
    {"stats", REPLAY_STATS, "FILE",
     "also keep error statistics of every element judged (per\n"
     "kernel, rule and output) and write them to FILE atomically\n"
     "every 60 s and at the end; `kvfuzz report FILE` draws them."},
    {0},
};

static void replay_help(void) {
    printf("usage: kvfuzz replay [--kernel K]... [--rule R]... [--precision MODEL] [--jobs N]\n"
           "                     [--require-overflow] [--deadline SEC] [--oracle fast|mpfr]\n"
           "                     [--stats FILE] FILE|DIR...\n\n"
           "Runs each kernel on each case (.kvfz files; directories are read one level deep),\n"
           "computes the correctly rounded answer with the MPFR oracle and judges the kernel's\n"
           "o and lse under each rule. Prints one line per case and kernel: the verdict per\n"
           "rule, then max abs error, max rel error and max ulp distance of o (over in-model\n"
           "rows and finite pairs) and the count of NaN/inf mismatches; then the verdict per\n"
           "kernel and rule: \"passes N cases\" or \"FAILS: k findings in c classes\".\n"
           "A verdict word \"overflow\" marks a case that fails only on rows out of the input\n"
           "model (logits beyond f32 or non-finite inputs), \"benign\" one the rule fails\n"
           "although the kernel returned the correctly rounded value (fib on an empty\n"
           "sequence's -inf lse); neither is a kernel failure.\n"
           "Each kernel is judged under its own precision model (a line per kernel names it);\n"
           "a failing strict or fa verdict is followed by its attribution: the tightest looser\n"
           "model that accepts it, or \"no precision model explains it\" (docs/precision.md).\n\n");
    cli_print_options(stdout, replay_options);
    printf(
        "\nSIGINT or SIGTERM stops after the case in progress: the summary and the verdicts of\n"
        "the cases judged so far are printed and the statistics written (a second one kills).\n\n"
        "Exit status: 0 no kernel failure, 1 any kernel failure or kernel error, 2 bad input or\n"
        "usage (an unreadable or malformed case file, or one the oracle cannot judge, is\n"
        "reported and the others still run) or a kernel that cannot start; when stopped by a\n"
        "signal, 1 if the cases judged hold a failure, else 128 + the signal's number.\n");
}

/* The stop request: set by SIGINT/SIGTERM, read between cases. The handler is reset by the
 * first signal, so a second one ends the process. */
static volatile sig_atomic_t replay_stop;

static void on_stop(int sig) {
    replay_stop = sig;
}

/* Whether every case file has a finding report (<name>.json) and all name the same kernel:
 * 1 with it (and the failing rule of the first that has one) written out, else 0. */
static int recorded_run(char **paths, size_t n, char *kernel, size_t ksize, char *rule,
                        size_t rsize) {
    kernel[0] = rule[0] = 0;
    for (size_t i = 0; i < n; i++) {
        /* A report that cannot be read (a FIFO, malformed) is no record: the default kernel. */
        json_t *j = NULL;
        if (cli_read_report(paths[i], &j, NULL)) return 0;
        const char *k = j ? json_string_value(json_object_get(j, "kernel")) : NULL;
        const char *r = j ? json_string_value(json_object_get(j, "rule")) : NULL;
        int same = k && (kernel[0] == 0 || strcmp(kernel, k) == 0) && strlen(k) < ksize;
        if (same) {
            snprintf(kernel, ksize, "%s", k);
            if (r && !rule[0] && strlen(r) < rsize) snprintf(rule, rsize, "%s", r);
        }
        json_decref(j);
        if (!same) return 0;
    }
    return n > 0;
}

/* The per-kernel tables, as many rows as kernels: a plugin may list thousands. */
static void replay_free_tables(kvf_rule (*krules)[MAX_RULES], char (*kmodel)[96],
                               kvf_runner **runners, kvf_verdict_counts (*counts)[MAX_RULES]) {
    free(krules);
    free(kmodel);
    free(runners);
    free(counts);
}

/* Each worker holds a socket in this process: a plugin of thousands of kernels needs more
 * descriptors than the common soft limit of 1024, so the soft limit is raised toward the hard
 * one. Returns 0, or -1 with *allowed set when the hard limit is too low, so the run stops
 * with one sentence before it starts hundreds of workers. */
static int raise_fd_limit(size_t nkernels, size_t *allowed) {
    struct rlimit rl;
    const rlim_t want = (rlim_t)nkernels * 2 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return 0;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= want) return 0;
    *allowed = (size_t)rl.rlim_max;
    return -1;
}

static int default_jobs(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int kvf_cmd_replay(int argc, char **argv) {
    const char *cmd = "replay";
    kvf_rule rules[MAX_RULES];
    int nrules = 0;
    kvf_kernel_list kernels = {0}; /* grows: PATH.so adds every kernel of a plugin */
    double deadline = 60;
    int64_t jobs = default_jobs();
    int require_overflow = 0;
    const char *stats_path = NULL, *precision = NULL;
    char **args = calloc((size_t)argc, sizeof *args);
    int nargs = 0;
    if (!args) return cli_usage_error(cmd, "out of memory");
    int oracle_path = kvf_oracle_default_path();
    int rc = KVF_EXIT_OK;
    cli_parser cp;
    cli_parser_init(&cp, cmd, argc, argv, replay_options);
    const char *optv;
    for (int key; (key = cli_next(&cp, &optv)) != CLI_END;) {
        const char *v = optv;
        int bad = 0;
        switch (key) {
        case CLI_HELP:
            replay_help();
            kvf_kernel_list_free(&kernels);
            free(args);
            return KVF_EXIT_OK;
        case CLI_ERROR:
            bad = 1;
            break;
        case REPLAY_KERNEL:
            bad = cli_add_kernel(cmd, v, &kernels);
            break;
        case REPLAY_RULE: {
            kvf_error err = {0};
            if (nrules == MAX_RULES)
                bad = cli_usage_error(cmd, "at most %d rules per run", MAX_RULES);
            else if (kvf_rule_parse(&rules[nrules], v, &err))
                bad = cli_usage_error(cmd, "%s", err.msg);
            else
                nrules++;
            break;
        }
        case REPLAY_JOBS:
            bad = cli_opt_i64(cmd, "--jobs", v, 1, 1024, &jobs);
            break;
        case REPLAY_DEADLINE:
            bad = cli_opt_seconds(cmd, "--deadline", v, 86400, &deadline);
            break;
        case REPLAY_ORACLE:
            if (kvf_oracle_path_parse(v, &oracle_path))
                bad = cli_usage_error(cmd, "--oracle needs fast or mpfr, got \"%s\"", v);
            break;
        case REPLAY_STATS:
            stats_path = v;
            break;
        case REPLAY_PRECISION:
            bad = cli_precision_check(cmd, v);
            precision = v;
            break;
        case REPLAY_REQUIRE_OVERFLOW:
            require_overflow = 1;
            break;
        }
        if (bad) {
            kvf_kernel_list_free(&kernels);
            free(args);
            return KVF_EXIT_USAGE;
        }
    }
    char **rest;
    nargs = cli_operands(&cp, &rest);
    for (int i = 0; i < nargs; i++)
        args[i] = rest[i];
    if (nargs == 0) {
        kvf_kernel_list_free(&kernels);
        free(args);
        return cli_usage_error(cmd, "no case files given (see kvfuzz replay --help)");
    }
    char **paths;
    size_t npaths;
    if (cli_collect_cases(cmd, args, nargs, &paths, &npaths)) {
        free(args);
        kvf_kernel_list_free(&kernels);
        return KVF_EXIT_USAGE;
    }
    free(args);
    if (npaths == 0) {
        cli_free_paths(paths, npaths);
        kvf_kernel_list_free(&kernels);
        return cli_usage_error(cmd, "no .kvfz files found in the given paths");
    }
    /* The statistics are written before any case is read: a --stats that names a case of the
     * run, or the report beside one, would replace it. */
    struct stat sst;
    for (size_t i = 0; stats_path && stat(stats_path, &sst) == 0 && i < npaths; i++) {
        char report[4096];
        size_t len = strlen(paths[i]);
        snprintf(report, sizeof report, "%.*s.json", (int)(len > 5 ? len - 5 : len), paths[i]);
        const char *mine[2] = {paths[i], report};
        for (int m = 0; m < 2; m++) {
            struct stat cst;
            if (stat(mine[m], &cst) == 0 && cst.st_dev == sst.st_dev && cst.st_ino == sst.st_ino) {
                cli_usage_error(cmd, "--stats %s is %s: writing the statistics would replace it",
                                stats_path,
                                m ? "the report of a case to replay" : "a case to replay");
                cli_free_paths(paths, npaths);
                kvf_kernel_list_free(&kernels);
                return KVF_EXIT_USAGE;
            }
        }
    }
    /* Findings replay the way they were found: without --kernel (and --rule), the kernel (and
     * the failing rule, beside the default set) their reports recorded, when every file has a
     * report and all name the same kernel. */
    char rec_kernel[4200] = "", rec_rule[128] = "";
    int recorded =
        (kernels.count == 0 || nrules == 0) &&
        recorded_run(paths, npaths, rec_kernel, sizeof rec_kernel, rec_rule, sizeof rec_rule);
    if (recorded && kernels.count == 0) {
        if (cli_add_kernel(cmd, rec_kernel, &kernels)) {
            cli_free_paths(paths, npaths);
            return KVF_EXIT_USAGE;
        }
        fprintf(stderr, "kvfuzz replay: kernel %s, as the findings' reports record\n", rec_kernel);
    }
    if (nrules == 0) {
        nrules = kvf_rule_default_set(rules, MAX_RULES);
        /* The recorded rule keeps a model it names ("strict:bf16-p"); a bare "strict" or "fa"
         * takes each kernel's model, as the default set does. It is added unless every
         * kernel's set already holds it under that kernel's model: a finding of a kernel that
         * declares bf16-p-rsum records "strict:bf16-p-rsum", its default strict. */
        int have = 1, add_failed = 0;
        if (recorded && rec_rule[0] && nrules < MAX_RULES &&
            kvf_rule_parse(&rules[nrules], rec_rule, NULL) == 0) {
            have = kernels.count > 0;
            for (size_t k = 0; k < kernels.count && have && !add_failed; k++) {
                kvf_rule mine[MAX_RULES];
                add_failed = cli_rules_for_kernel(cmd, kernels.items[k], precision, rules,
                                                  nrules + 1, mine, NULL, NULL);
                int found = 0;
                for (int r = 0; r < nrules && !add_failed; r++)
                    found |= strcmp(mine[r].name, mine[nrules].name) == 0;
                have = found;
            }
        }
        if (add_failed) {
            kvf_kernel_list_free(&kernels);
            cli_free_paths(paths, npaths);
            return KVF_EXIT_USAGE;
        }
        if (!have) {
            nrules++;
            fprintf(stderr, "kvfuzz replay: rule %s added, as the findings' reports record\n",
                    rules[nrules - 1].name);
        }
    }
    if (kernels.count == 0) {
        char why[256];
        /* Asked in a child: this process forks the kernel workers and must not touch CUDA. */
        const kvf_kernel *k =
            kvf_runner_probe_cuda(why, sizeof why) ? kvf_kernel_find("cuda") : NULL;
        if (kvf_kernel_list_push(&kernels, k ? k : kvf_kernel_find("cpu-splitkv"), NULL)) {
            cli_free_paths(paths, npaths);
            return cli_usage_error(cmd, "out of memory for the kernel list");
        }
    }
    /* Rules per kernel: each kernel is judged within the precision model it declares (or
     * --precision), never another kernel's (docs/precision.md). */
    const size_t nk = kernels.count;
    kvf_rule(*krules)[MAX_RULES] = calloc(nk, sizeof *krules);
    char(*kmodel)[96] = calloc(nk, sizeof *kmodel);
    kvf_runner **runners = calloc(nk, sizeof *runners);
    kvf_verdict_counts(*counts)[MAX_RULES] = calloc(nk, sizeof *counts);
    if (!krules || !kmodel || !runners || !counts) {
        replay_free_tables(krules, kmodel, runners, counts);
        kvf_kernel_list_free(&kernels);
        cli_free_paths(paths, npaths);
        return cli_usage_error(cmd, "out of memory for %zu kernels", nk);
    }
    for (size_t k = 0; k < kernels.count; k++) {
        kvf_precision model;
        cli_precision_source source;
        if (cli_rules_for_kernel(cmd, kernels.items[k], precision, rules, nrules, krules[k], &model,
                                 &source)) {
            replay_free_tables(krules, kmodel, runners, counts);
            kvf_kernel_list_free(&kernels);
            cli_free_paths(paths, npaths);
            return KVF_EXIT_USAGE;
        }
        cli_precision_text(&model, source, kmodel[k], sizeof kmodel[k]);
    }

    /* Installed before the statistics file or a worker is created, so a stop request is
     * always answered with the summary; SA_RESTART, so the worker pipes are not interrupted
     * and the case in flight completes before the loop stops. */
    replay_stop = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    /* Statistics are written once before any work, so a path that cannot be written fails
     * the run at once instead of after hours. */
    kvf_stats *stats = NULL;
    if (stats_path) {
        kvf_error err = {0};
        kvf_stats_opts so;
        kvf_stats_opts_default(&so);
        so.command = "kvfuzz replay";
        so.require_overflow = require_overflow;
        if (kvf_stats_create(&stats, &so, &err) || kvf_stats_write(stats, stats_path, &err)) {
            kvf_stats_free(stats);
            replay_free_tables(krules, kmodel, runners, counts);
            kvf_kernel_list_free(&kernels);
            cli_free_paths(paths, npaths);
            return cli_usage_error(cmd, "%s", err.msg);
        }
    }
    kvf_limits limits;
    cli_limits(&limits);
    /* Each kernel in a worker process of its own, started now so that one that cannot start
     * is reported before any case runs. */
    size_t allowed = 0;
    if (raise_fd_limit(nk, &allowed)) {
        replay_free_tables(krules, kmodel, runners, counts);
        kvf_kernel_list_free(&kernels);
        cli_free_paths(paths, npaths);
        kvf_stats_free(stats);
        return cli_usage_error(cmd,
                               "%zu kernels need %zu open files (a worker each), and the limit "
                               "is %zu: raise it with ulimit -n",
                               nk, nk * 2 + 64, allowed);
    }
    for (size_t k = 0; k < kernels.count; k++) {
        kvf_error err = {0};
        kvf_runner_opts ro = {kernels.items[k], limits, deadline, 0, 0, 1};
        if (kvf_runner_create(&runners[k], &ro, &err) || kvf_runner_start(runners[k], &err)) {
            int urc = cli_kernel_cannot_start(cmd, kernels.items[k]->name, err.msg);
            for (size_t j = 0; j <= k; j++)
                kvf_runner_destroy(runners[j]);
            replay_free_tables(krules, kmodel, runners, counts);
            kvf_kernel_list_free(&kernels);
            cli_free_paths(paths, npaths);
            kvf_stats_free(stats);
            return urc;
        }
    }
    kvf_oracle_opts oopts;
    kvf_oracle_opts_default(&oopts);
    oopts.threads = (int)jobs;
    oopts.path = oracle_path;

    for (size_t k = 0; k < kernels.count; k++)
        printf("precision model for %s: %s\n", kernels.items[k]->name, kmodel[k]);
    printf("%-34s %-14s", "case", "kernel");
    /* A column is named as its rule is judged when every kernel judges it alike
     * ("strict:bf16-p"), else by the rule as given; the lines above say each kernel's model. */
    for (int r = 0; r < nrules; r++) {
        const char *name = krules[0][r].name;
        for (size_t k = 1; k < kernels.count; k++)
            if (strcmp(krules[k][r].name, name) != 0) name = rules[r].name;
        printf(" %-12s", name);
    }
    printf(" %11s %11s %8s %7s\n", "max_abs", "max_rel", "max_ulp", "nan/inf");
    /* Each kernel run adds to runs and to at most one of failed_runs and unsupported, so the
     * runs without a failure (their difference) cannot go below 0; a case the oracle could not
     * judge runs no kernel and counts in not_judged alone. */
    size_t cases_ok = 0, bad_inputs = 0, not_judged = 0, runs = 0, failed_runs = 0, unsupported = 0,
           done = 0;
    for (size_t k = 0; k < kernels.count; k++)
        for (int r = 0; r < nrules; r++) {
            counts[k][r].kernel = kernels.items[k]->name;
            counts[k][r].rule = krules[k][r].name;
            counts[k][r].signatures = -1;
            counts[k][r].require_overflow = require_overflow;
        }
    for (size_t p = 0; p < npaths && !replay_stop; p++, done++) {
        const char *base = strrchr(paths[p], '/') ? strrchr(paths[p], '/') + 1 : paths[p];
        kvf_case c;
        kvf_spec spec;
        kvf_error err = {0};
        if (kvf_case_load(paths[p], &spec, &c, &limits, &err)) {
            cli_usage_error("replay", "%s: %s", paths[p], err.msg);
            printf("%-34s %-14s bad input\n", base, "-");
            bad_inputs++;
            continue;
        }
        cases_ok++;
        /* The statistics identify a case by its canonical bytes (the file's, for any file
         * that decodes) so their worst elements can be replayed from the report. */
        kvf_stats_case ref = {paths[p], NULL, 0};
        uint8_t *kvfz = NULL;
        if (stats && kvf_spec_encode(&spec, &kvfz, &ref.kvfz_size, NULL) == 0) ref.kvfz = kvfz;
        kvf_spec_free(&spec);
        kvf_oracle_result oracle;
        if (kvf_oracle_run(&oracle, &c, &oopts, &err)) {
            cli_usage_error("replay", "%s: the oracle failed: %s", paths[p], err.msg);
            printf("%-34s %-14s not judged: the oracle failed\n", base, "-");
            kvf_case_free(&c);
            free(kvfz);
            not_judged++;
            continue;
        }
        kvf_bf16 *o = malloc((size_t)(kvf_case_o_elems(&c) ? kvf_case_o_elems(&c) : 1) * sizeof *o);
        float *lse =
            malloc((size_t)(kvf_case_lse_elems(&c) ? kvf_case_lse_elems(&c) : 1) * sizeof *lse);
        for (size_t k = 0; k < kernels.count && o && lse; k++) {
            runs++;
            printf("%-34s %-14s", base, kernels.items[k]->name);
            kvf_run_result res;
            if (kvf_runner_run(runners[k], &c, o, lse, &res, &err)) {
                res.status = KVF_RUN_KERNEL_ERROR;
                snprintf(res.message, sizeof res.message, "%s", err.msg);
            }
            kvf_outcome run_out;
            kvf_outcome_from_run(&run_out, res.status, res.message);
            if (stats)
                kvf_stats_count_run(stats, kernels.items[k]->name,
                                    res.status == KVF_RUN_OK            ? KVF_STATS_RAN
                                    : res.status == KVF_RUN_UNSUPPORTED ? KVF_STATS_UNSUPPORTED
                                                                        : (int)run_out.finding,
                                    NULL);
            if (res.status == KVF_RUN_UNSUPPORTED) {
                printf(" unsupported: %s\n", res.message);
                unsupported++;
                continue;
            }
            if (res.status != KVF_RUN_OK) {
                printf(" %s: %s\n", kvf_finding_class_name(run_out.finding), res.message);
                failed_runs++;
                continue;
            }
            int failed = 0;
            kvf_verdict v;
            double max_abs = 0, max_rel = 0;
            int64_t max_ulp = 0, mismatches = 0;
            /* Each failing strict or fa verdict's attribution, said under the case's line. */
            static kvf_attribution attr[MAX_RULES];
            char attr_err[MAX_RULES][KVF_ERROR_MSG_MAX];
            for (int r = 0; r < nrules; r++) {
                const kvf_rule *rule = &krules[k][r];
                kvf_stats_judge(stats, kernels.items[k]->name, &ref, &v, rule, &c, &oracle, o, lse,
                                NULL);
                kvf_verdict_status st = kvf_verdict_status_of(&v, require_overflow);
                kvf_error aerr = {0};
                attr_err[r][0] = 0;
                memset(&attr[r], 0, sizeof attr[r]);
                if (st == KVF_VERDICT_FAIL &&
                    kvf_attribute(&attr[r], &v, &c, &oracle, o, lse, &aerr))
                    snprintf(attr_err[r], sizeof attr_err[r], "%s", aerr.msg);
                kvf_verdict_counts_add(&counts[k][r], &v, require_overflow);
                const char *word = st == KVF_VERDICT_PASS ? "pass"
                                   : st == KVF_VERDICT_RULE_REJECTS_ROUNDED
                                       ? "benign"
                                       : kvf_finding_class_name(v.finding);
                if (st == KVF_VERDICT_FAIL) failed = 1;
                printf(" %-12s", word);
                max_abs = v.o.max_abs;
                max_rel = v.o.max_rel_fib;
                max_ulp = v.o.max_ulps;
                mismatches = v.o.nonfinite_mismatch + v.lse.nonfinite_mismatch;
            }
            printf(" %11.3e %11.3e %8lld %7lld\n", max_abs, max_rel, (long long)max_ulp,
                   (long long)mismatches);
            if (failed && res.plan[0]) printf("%-34s   plan: %s\n", "", res.plan);
            for (int r = 0; r < nrules; r++) {
                /* A rule that the kernel's model made the same as an earlier one ("strict"
                 * under bf16-p beside a recorded "strict:bf16-p") is said once. */
                int dup = 0;
                for (int j = 0; j < r && !dup; j++)
                    dup = strcmp(krules[k][j].name, krules[k][r].name) == 0;
                if (dup) continue;
                if (attr_err[r][0])
                    printf("%-34s   attribution (%s): not attributed: %s\n", "", krules[k][r].name,
                           attr_err[r]);
                else if (attr[r].kind != KVF_ATTRIB_NONE)
                    printf("%-34s   attribution (%s): %s\n", "", krules[k][r].name, attr[r].text);
            }
            if (failed) failed_runs++;
        }
        if (!o || !lse) {
            cli_usage_error("replay", "out of memory for %s", paths[p]);
            not_judged++;
        }
        free(o);
        free(lse);
        kvf_oracle_result_free(&oracle);
        kvf_case_free(&c);
        free(kvfz);
        if (stats && kvf_stats_tick(stats, stats_path, &err))
            fprintf(stderr, "kvfuzz replay: %s\n", err.msg);
        fflush(stdout);
    }
    for (size_t k = 0; k < kernels.count; k++)
        kvf_runner_destroy(runners[k]);
    const int stopped = replay_stop;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (stopped)
        printf("\nstopped by %s after %zu of %zu case file(s)\n", strsignal(stopped), done, npaths);
    printf("\n%zu case(s), %zu kernel run(s): %zu without a kernel failure, %zu with one, %zu "
           "unsupported, %zu bad input(s)",
           cases_ok + bad_inputs, runs, runs - failed_runs - unsupported, failed_runs, unsupported,
           bad_inputs);
    if (not_judged) printf(", %zu not judged (the oracle failed)", not_judged);
    printf("\n");
    printf("verdict:\n");
    for (size_t k = 0; k < kernels.count; k++)
        for (int r = 0; r < nrules; r++)
            kvf_verdict_counts_print(stdout, &counts[k][r], "  ");
    replay_free_tables(krules, kmodel, runners, counts);
    kvf_kernel_list_free(&kernels); /* after the verdicts, which name them */
    cli_free_paths(paths, npaths);
    if (failed_runs) rc = KVF_EXIT_FINDINGS;
    if (stats) {
        kvf_error err = {0};
        if (kvf_stats_write(stats, stats_path, &err)) {
            fprintf(stderr, "kvfuzz replay: %s\n", err.msg);
            rc = KVF_EXIT_USAGE;
        } else {
            printf("statistics: %s\n", stats_path);
        }
        kvf_stats_free(stats);
    }
    /* A file we could not judge outranks a verdict. */
    if (bad_inputs || not_judged) rc = KVF_EXIT_USAGE;
    if (stopped && rc == KVF_EXIT_OK) rc = 128 + stopped;
    return rc;
}
