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
#include "kvfuzz/trial.h"
#include "kvfuzz/verdict.h"
#include "stats_hooks.h"

#define MAX_RULES KVF_MAX_RULES

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

/* One replay: its options, its kernels with their rules, runners and verdict counts (one row
 * per kernel: a plugin may list thousands), and the run's tallies. Each kernel run adds to runs
 * and to at most one of failed_runs and unsupported, so the runs without a failure (their
 * difference) cannot go below 0; a case the oracle could not judge runs no kernel and counts in
 * not_judged alone. */
typedef struct replay {
    const char *cmd;
    kvf_rule rules[MAX_RULES];
    int nrules;
    kvf_kernel_list kernels;
    double deadline;
    int64_t jobs;
    int require_overflow, oracle_path;
    const char *stats_path, *precision;
    char **paths;
    size_t npaths;
    kvf_rule (*krules)[MAX_RULES];
    char (*kmodel)[96];
    kvf_runner **runners;
    kvf_verdict_counts (*counts)[MAX_RULES];
    kvf_stats *stats;
    kvf_limits limits;
    kvf_oracle_opts oopts;
    struct sigaction old_int, old_term;
    int signals_set;
    size_t cases_ok, bad_inputs, not_judged, runs, failed_runs, unsupported, done;
} replay;

static void replay_free(replay *r) {
    for (size_t k = 0; r->runners && k < r->kernels.count; k++)
        kvf_runner_destroy(r->runners[k]);
    free(r->krules);
    free(r->kmodel);
    free(r->runners);
    free(r->counts);
    kvf_kernel_list_free(&r->kernels);
    if (r->paths) cli_free_paths(r->paths, r->npaths);
    kvf_stats_free(r->stats);
    if (r->signals_set) {
        sigaction(SIGINT, &r->old_int, NULL);
        sigaction(SIGTERM, &r->old_term, NULL);
    }
    memset(r, 0, sizeof *r);
}

static int replay_option(replay *r, int key, const char *v) {
    switch (key) {
    case CLI_ERROR:
        return 1;
    case REPLAY_KERNEL:
        return cli_add_kernel(r->cmd, v, &r->kernels);
    case REPLAY_RULE: {
        kvf_error err = {0};
        if (r->nrules == MAX_RULES)
            return cli_usage_error(r->cmd, "at most %d rules per run", MAX_RULES);
        if (kvf_rule_parse(&r->rules[r->nrules], v, &err))
            return cli_usage_error(r->cmd, "%s", err.msg);
        r->nrules++;
        return 0;
    }
    case REPLAY_JOBS:
        return cli_opt_i64(r->cmd, "--jobs", v, 1, 1024, &r->jobs);
    case REPLAY_DEADLINE:
        return cli_opt_seconds(r->cmd, "--deadline", v, 86400, &r->deadline);
    case REPLAY_ORACLE:
        if (kvf_oracle_path_parse(v, &r->oracle_path))
            return cli_usage_error(r->cmd, "--oracle needs fast or mpfr, got \"%s\"", v);
        return 0;
    case REPLAY_STATS:
        r->stats_path = v;
        return 0;
    case REPLAY_PRECISION:
        r->precision = v;
        return cli_precision_check(r->cmd, v);
    case REPLAY_REQUIRE_OVERFLOW:
        r->require_overflow = 1;
        return 0;
    }
    return 0;
}

/* The options and the case files: -1 to go on, else the exit status. */
static int replay_parse(replay *r, int argc, char **argv) {
    cli_parser cp;
    cli_parser_init(&cp, r->cmd, argc, argv, replay_options);
    const char *v;
    for (int key; (key = cli_next(&cp, &v)) != CLI_END;) {
        if (key == CLI_HELP) {
            replay_help();
            return KVF_EXIT_OK;
        }
        if (replay_option(r, key, v)) return KVF_EXIT_USAGE;
    }
    char **rest;
    int nargs = cli_operands(&cp, &rest);
    if (nargs == 0)
        return cli_usage_error(r->cmd, "no case files given (see kvfuzz replay --help)");
    if (cli_collect_cases(r->cmd, rest, nargs, &r->paths, &r->npaths)) {
        r->paths = NULL;
        return KVF_EXIT_USAGE;
    }
    if (r->npaths == 0) return cli_usage_error(r->cmd, "no .kvfz files found in the given paths");
    return -1;
}

/* The statistics are written before any case is read: a --stats that names a case of the run,
 * or the report beside one, would replace it. 0, or the exit status. */
static int replay_check_stats_path(const replay *r) {
    struct stat sst;
    for (size_t i = 0; r->stats_path && stat(r->stats_path, &sst) == 0 && i < r->npaths; i++) {
        char report[4096];
        size_t len = strlen(r->paths[i]);
        snprintf(report, sizeof report, "%.*s.json", (int)(len > 5 ? len - 5 : len), r->paths[i]);
        const char *mine[2] = {r->paths[i], report};
        for (int m = 0; m < 2; m++) {
            struct stat cst;
            if (stat(mine[m], &cst) == 0 && cst.st_dev == sst.st_dev && cst.st_ino == sst.st_ino)
                return cli_usage_error(
                    r->cmd, "--stats %s is %s: writing the statistics would replace it",
                    r->stats_path, m ? "the report of a case to replay" : "a case to replay");
        }
    }
    return 0;
}

/* The default set, plus the rule the findings' reports record. It keeps a model it names
 * ("strict:bf16-p"); a bare "strict" or "fa" takes each kernel's model, as the default set does.
 * It is added unless every kernel's set already holds it under that kernel's model: a finding of
 * a kernel that declares bf16-p-rsum records "strict:bf16-p-rsum", its default strict. */
static int replay_default_rules(replay *r, int recorded, const char *rec_rule) {
    r->nrules = kvf_rule_default_set(r->rules, MAX_RULES);
    int have = 1;
    if (recorded && rec_rule[0] && r->nrules < MAX_RULES &&
        kvf_rule_parse(&r->rules[r->nrules], rec_rule, NULL) == 0) {
        have = r->kernels.count > 0;
        for (size_t k = 0; k < r->kernels.count && have; k++) {
            kvf_rule mine[MAX_RULES];
            if (cli_rules_for_kernel(r->cmd, r->kernels.items[k], r->precision, r->rules,
                                     r->nrules + 1, mine, NULL, NULL))
                return KVF_EXIT_USAGE;
            int found = 0;
            for (int j = 0; j < r->nrules; j++)
                found |= strcmp(mine[j].name, mine[r->nrules].name) == 0;
            have = found;
        }
    }
    if (!have) {
        r->nrules++;
        fprintf(stderr, "kvfuzz replay: rule %s added, as the findings' reports record\n",
                r->rules[r->nrules - 1].name);
    }
    return 0;
}

/* Findings replay the way they were found: without --kernel (and --rule), the kernel (and the
 * failing rule, beside the default set) their reports recorded, when every file has a report
 * and all name the same kernel; else cuda when a GPU is usable, else cpu-splitkv. */
static int replay_defaults(replay *r) {
    char rec_kernel[4200] = "", rec_rule[128] = "";
    int recorded =
        (r->kernels.count == 0 || r->nrules == 0) &&
        recorded_run(r->paths, r->npaths, rec_kernel, sizeof rec_kernel, rec_rule, sizeof rec_rule);
    if (recorded && r->kernels.count == 0) {
        if (cli_add_kernel(r->cmd, rec_kernel, &r->kernels)) return KVF_EXIT_USAGE;
        fprintf(stderr, "kvfuzz replay: kernel %s, as the findings' reports record\n", rec_kernel);
    }
    if (r->nrules == 0 && replay_default_rules(r, recorded, rec_rule)) return KVF_EXIT_USAGE;
    if (r->kernels.count == 0) {
        char why[256];
        /* Asked in a child: this process forks the kernel workers and must not touch CUDA. */
        const kvf_kernel *k =
            kvf_runner_probe_cuda(why, sizeof why) ? kvf_kernel_find("cuda") : NULL;
        if (kvf_kernel_list_push(&r->kernels, k ? k : kvf_kernel_find("cpu-splitkv"), NULL))
            return cli_usage_error(r->cmd, "out of memory for the kernel list");
    }
    return 0;
}

/* Rules per kernel: each kernel is judged within the precision model it declares (or
 * --precision), never another kernel's (docs/precision.md). */
static int replay_kernel_rules(replay *r) {
    const size_t nk = r->kernels.count;
    r->krules = calloc(nk, sizeof *r->krules);
    r->kmodel = calloc(nk, sizeof *r->kmodel);
    r->runners = calloc(nk, sizeof *r->runners);
    r->counts = calloc(nk, sizeof *r->counts);
    if (!r->krules || !r->kmodel || !r->runners || !r->counts)
        return cli_usage_error(r->cmd, "out of memory for %zu kernels", nk);
    for (size_t k = 0; k < nk; k++) {
        kvf_precision model;
        cli_precision_source source;
        if (cli_rules_for_kernel(r->cmd, r->kernels.items[k], r->precision, r->rules, r->nrules,
                                 r->krules[k], &model, &source))
            return KVF_EXIT_USAGE;
        cli_precision_text(&model, source, r->kmodel[k], sizeof r->kmodel[k]);
        for (int j = 0; j < r->nrules; j++) {
            kvf_verdict_counts *vc = &r->counts[k][j];
            vc->kernel = r->kernels.items[k]->name;
            vc->rule = r->krules[k][j].name;
            vc->signatures = -1;
            vc->require_overflow = r->require_overflow;
        }
    }
    return 0;
}

/* Installed before the statistics file or a worker is created, so a stop request is always
 * answered with the summary; SA_RESTART, so the worker pipes are not interrupted and the case
 * in flight completes before the loop stops. */
static void replay_signals(replay *r) {
    replay_stop = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &r->old_int);
    sigaction(SIGTERM, &sa, &r->old_term);
    r->signals_set = 1;
}

/* The statistics (written once before any work, so a path that cannot be written fails the run
 * at once instead of after hours) and each kernel in a worker process of its own, started now
 * so that one that cannot start is reported before any case runs. 0, or the exit status. */
static int replay_start(replay *r) {
    if (r->stats_path) {
        kvf_error err = {0};
        kvf_stats_opts so;
        kvf_stats_opts_default(&so);
        so.command = "kvfuzz replay";
        so.require_overflow = r->require_overflow;
        if (kvf_stats_create(&r->stats, &so, &err) ||
            kvf_stats_write(r->stats, r->stats_path, &err))
            return cli_usage_error(r->cmd, "%s", err.msg);
    }
    cli_limits(&r->limits);
    const size_t nk = r->kernels.count;
    size_t allowed = 0;
    if (raise_fd_limit(nk, &allowed))
        return cli_usage_error(r->cmd,
                               "%zu kernels need %zu open files (a worker each), and the limit "
                               "is %zu: raise it with ulimit -n",
                               nk, nk * 2 + 64, allowed);
    for (size_t k = 0; k < nk; k++) {
        kvf_error err = {0};
        kvf_runner_opts ro = {r->kernels.items[k], r->limits, r->deadline, 0, 0, 1};
        if (kvf_runner_create(&r->runners[k], &ro, &err) || kvf_runner_start(r->runners[k], &err))
            return cli_kernel_cannot_start(r->cmd, r->kernels.items[k]->name, err.msg);
    }
    kvf_oracle_opts_default(&r->oopts);
    r->oopts.threads = (int)r->jobs;
    r->oopts.path = r->oracle_path;
    return 0;
}

/* The kernels' models and the table's header. A column is named as its rule is judged when
 * every kernel judges it alike ("strict:bf16-p"), else by the rule as given; the lines above it
 * say each kernel's model. */
static void replay_header(const replay *r) {
    for (size_t k = 0; k < r->kernels.count; k++)
        printf("precision model for %s: %s\n", r->kernels.items[k]->name, r->kmodel[k]);
    printf("%-34s %-14s", "case", "kernel");
    for (int j = 0; j < r->nrules; j++) {
        const char *name = r->krules[0][j].name;
        for (size_t k = 1; k < r->kernels.count; k++)
            if (strcmp(r->krules[k][j].name, name) != 0) name = r->rules[j].name;
        printf(" %-12s", name);
    }
    printf(" %11s %11s %8s %7s\n", "max_abs", "max_rel", "max_ulp", "nan/inf");
}

/* The verdicts of kernel k's output on one case: a word per rule, o's error figures, the plan
 * of a failing run and each failing strict or fa verdict's attribution under the line. */
static void replay_verdicts(replay *r, size_t k, const kvf_case *c, const kvf_oracle_result *oracle,
                            const kvf_stats_case *ref, const kvf_bf16 *o, const float *lse,
                            const kvf_run_result *res) {
    /* One trial judges every rule, counting each rule's elements into the statistics while it
     * judges them. */
    static kvf_outcome out;
    static kvf_attribution attr[MAX_RULES];
    char attr_err[MAX_RULES][KVF_ERROR_MSG_MAX];
    cli_case_stats cs = {.stats = r->stats,
                         .kernel = r->kernels.items[k]->name,
                         .rules = r->krules[k],
                         .c = c,
                         .ref = ref};
    kvf_judge_hooks hooks;
    cli_case_stats_hooks(&cs, &hooks);
    const kvf_trial_rules tr = {r->krules[k],    r->nrules, r->require_overflow, 0, 0,
                                KVF_FINDING_NONE};
    kvf_error err = {0};
    if (kvf_trial_judge(&out, &tr, c, oracle, o, lse, r->stats ? &hooks : NULL, &err)) {
        printf(" not judged: %s\n", err.msg);
        r->failed_runs++;
        return;
    }
    int failed = 0;
    for (int j = 0; j < r->nrules; j++) {
        const kvf_verdict *v = &out.verdicts[j];
        kvf_verdict_status st = kvf_verdict_status_of(v, r->require_overflow);
        kvf_error aerr = {0};
        attr_err[j][0] = 0;
        memset(&attr[j], 0, sizeof attr[j]);
        if (st == KVF_VERDICT_FAIL && kvf_attribute(&attr[j], v, c, oracle, o, lse, &aerr))
            snprintf(attr_err[j], sizeof attr_err[j], "%s", aerr.msg);
        kvf_verdict_counts_add(&r->counts[k][j], v, r->require_overflow);
        const char *word = st == KVF_VERDICT_PASS ? "pass"
                           : st == KVF_VERDICT_RULE_REJECTS_ROUNDED
                               ? "benign"
                               : kvf_finding_class_name(v->finding);
        if (st == KVF_VERDICT_FAIL) failed = 1;
        printf(" %-12s", word);
    }
    const kvf_verdict *last = &out.verdicts[r->nrules - 1];
    printf(" %11.3e %11.3e %8lld %7lld\n", last->o.max_abs, last->o.max_rel_fib,
           (long long)last->o.max_ulps,
           (long long)(last->o.nonfinite_mismatch + last->lse.nonfinite_mismatch));
    if (failed && res->plan[0]) printf("%-34s   plan: %s\n", "", res->plan);
    for (int j = 0; j < r->nrules; j++) {
        /* A rule that the kernel's model made the same as an earlier one ("strict" under
         * bf16-p beside a recorded "strict:bf16-p") is said once. */
        int dup = 0;
        for (int i = 0; i < j && !dup; i++)
            dup = strcmp(r->krules[k][i].name, r->krules[k][j].name) == 0;
        if (dup) continue;
        if (attr_err[j][0])
            printf("%-34s   attribution (%s): not attributed: %s\n", "", r->krules[k][j].name,
                   attr_err[j]);
        else if (attr[j].kind != KVF_ATTRIB_NONE)
            printf("%-34s   attribution (%s): %s\n", "", r->krules[k][j].name, attr[j].text);
    }
    if (failed) r->failed_runs++;
}

/* Kernel k on one case: its run, counted in the statistics, then its verdicts. */
static void replay_kernel(replay *r, size_t k, const char *base, const kvf_case *c,
                          const kvf_oracle_result *oracle, const kvf_stats_case *ref,
                          kvf_trial_buffers *b) {
    r->runs++;
    printf("%-34s %-14s", base, r->kernels.items[k]->name);
    kvf_run_result res;
    kvf_error err = {0};
    if (kvf_runner_run(r->runners[k], c, b->o, b->lse, &res, &err)) {
        res.status = KVF_RUN_KERNEL_ERROR;
        snprintf(res.message, sizeof res.message, "%s", err.msg);
    }
    kvf_outcome run_out;
    kvf_outcome_from_run(&run_out, res.status, res.message);
    if (r->stats)
        kvf_stats_count_run(r->stats, r->kernels.items[k]->name,
                            res.status == KVF_RUN_OK            ? KVF_STATS_RAN
                            : res.status == KVF_RUN_UNSUPPORTED ? KVF_STATS_UNSUPPORTED
                                                                : (int)run_out.finding,
                            NULL);
    if (res.status == KVF_RUN_UNSUPPORTED) {
        printf(" unsupported: %s\n", res.message);
        r->unsupported++;
    } else if (res.status != KVF_RUN_OK) {
        printf(" %s: %s\n", kvf_finding_class_name(run_out.finding), res.message);
        r->failed_runs++;
    } else {
        replay_verdicts(r, k, c, oracle, ref, b->o, b->lse, &res);
    }
}

/* One case file: read, the oracle once, then every kernel. */
static void replay_case(replay *r, const char *path) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    kvf_case c;
    kvf_spec spec;
    kvf_error err = {0};
    if (kvf_case_load(path, &spec, &c, &r->limits, &err)) {
        cli_usage_error("replay", "%s: %s", path, err.msg);
        printf("%-34s %-14s bad input\n", base, "-");
        r->bad_inputs++;
        return;
    }
    r->cases_ok++;
    /* The statistics identify a case by its canonical bytes (the file's, for any file that
     * decodes) so their worst elements can be replayed from the report. */
    kvf_stats_case ref = {path, NULL, 0};
    uint8_t *kvfz = NULL;
    if (r->stats && kvf_spec_encode(&spec, &kvfz, &ref.kvfz_size, NULL) == 0) ref.kvfz = kvfz;
    kvf_spec_free(&spec);
    kvf_oracle_result oracle;
    if (kvf_oracle_run(&oracle, &c, &r->oopts, &err)) {
        cli_usage_error("replay", "%s: the oracle failed: %s", path, err.msg);
        printf("%-34s %-14s not judged: the oracle failed\n", base, "-");
        r->not_judged++;
    } else {
        kvf_trial_buffers b = {NULL, NULL};
        if (kvf_trial_buffers_alloc(&b, &c, NULL)) {
            cli_usage_error("replay", "out of memory for %s", path);
            r->not_judged++;
        }
        for (size_t k = 0; k < r->kernels.count && b.o; k++)
            replay_kernel(r, k, base, &c, &oracle, &ref, &b);
        kvf_trial_buffers_free(&b);
        kvf_oracle_result_free(&oracle);
    }
    kvf_case_free(&c);
    free(kvfz);
    if (r->stats && kvf_stats_tick(r->stats, r->stats_path, &err))
        fprintf(stderr, "kvfuzz replay: %s\n", err.msg);
    fflush(stdout);
}

/* The summary and the verdicts; the exit status. */
static int replay_summary(replay *r) {
    const int stopped = replay_stop;
    if (stopped)
        printf("\nstopped by %s after %zu of %zu case file(s)\n", strsignal(stopped), r->done,
               r->npaths);
    printf("\n%zu case(s), %zu kernel run(s): %zu without a kernel failure, %zu with one, %zu "
           "unsupported, %zu bad input(s)",
           r->cases_ok + r->bad_inputs, r->runs, r->runs - r->failed_runs - r->unsupported,
           r->failed_runs, r->unsupported, r->bad_inputs);
    if (r->not_judged) printf(", %zu not judged (the oracle failed)", r->not_judged);
    printf("\n");
    printf("verdict:\n");
    for (size_t k = 0; k < r->kernels.count; k++)
        for (int j = 0; j < r->nrules; j++)
            kvf_verdict_counts_print(stdout, &r->counts[k][j], "  ");
    int rc = r->failed_runs ? KVF_EXIT_FINDINGS : KVF_EXIT_OK;
    if (r->stats) {
        kvf_error err = {0};
        if (kvf_stats_write(r->stats, r->stats_path, &err)) {
            fprintf(stderr, "kvfuzz replay: %s\n", err.msg);
            rc = KVF_EXIT_USAGE;
        } else {
            printf("statistics: %s\n", r->stats_path);
        }
    }
    /* A file we could not judge outranks a verdict. */
    if (r->bad_inputs || r->not_judged) rc = KVF_EXIT_USAGE;
    if (stopped && rc == KVF_EXIT_OK) rc = 128 + stopped;
    return rc;
}

int kvf_cmd_replay(int argc, char **argv) {
    static replay r;
    memset(&r, 0, sizeof r);
    r.cmd = "replay";
    r.deadline = 60;
    r.jobs = default_jobs();
    r.oracle_path = kvf_oracle_default_path();
    int rc = replay_parse(&r, argc, argv);
    if (rc >= 0) { /* --help, or bad usage */
        replay_free(&r);
        return rc;
    }
    rc = replay_check_stats_path(&r);
    if (rc == 0) rc = replay_defaults(&r);
    if (rc == 0) rc = replay_kernel_rules(&r);
    if (rc == 0) {
        replay_signals(&r);
        rc = replay_start(&r);
    }
    if (rc == 0) {
        replay_header(&r);
        for (size_t p = 0; p < r.npaths && !replay_stop; p++, r.done++)
            replay_case(&r, r.paths[p]);
        for (size_t k = 0; k < r.kernels.count; k++) {
            kvf_runner_destroy(r.runners[k]);
            r.runners[k] = NULL;
        }
        sigaction(SIGINT, &r.old_int, NULL);
        sigaction(SIGTERM, &r.old_term, NULL);
        r.signals_set = 0;
        rc = replay_summary(&r);
    }
    replay_free(&r);
    return rc;
}
