/* kvfuzz replay: kernel, oracle and judge for each case file; one line per (case, kernel). This
 * file holds the options, the help and the run's order; the set-up and the output are
 * replay_setup.c and replay_print.c (replay_cli.h), the replay itself kvfuzz/replay.h. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "replay_cli.h"

enum {
    REPLAY_KERNEL = 256,
    REPLAY_DEADLINE,
    REPLAY_RULE,
    REPLAY_JOBS,
    REPLAY_ORACLE,
    REPLAY_REQUIRE_OVERFLOW,
    REPLAY_STATS,
    REPLAY_PRECISION,
    REPLAY_RELATIONS,
    REPLAY_RELATION_SEED
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
    {"relations", REPLAY_RELATIONS, "LIST",
     "also run each case transformed by these invariance relations\n"
     "(names joined by ',', or all: placement, head-permutation,\n"
     "v-scaling, batch-invariance, graph-replay (CUDA kernels);\n"
     "docs/invariance.md) and compare\n"
     "the bits: a relation the kernel promises that breaks is an\n"
     "invariance failure, one it does not promise a property. An\n"
     "invariance finding's report beside its case adds its relation\n"
     "and seed without this option."},
    {"relation-seed", REPLAY_RELATION_SEED, "N",
     "with --relations: the seed that derives the transformed cases\n(default 1)"},
    {"stats", REPLAY_STATS, "FILE",
     "also keep error statistics of every element judged (per\n"
     "kernel, rule and output) and write them to FILE atomically\n"
     "every 60 s and at the end; `kvfuzz report FILE` draws them."},
    {0},
};

static void replay_help(void) {
    printf("usage: kvfuzz replay [--kernel K]... [--rule R]... [--precision MODEL] [--jobs N]\n"
           "                     [--require-overflow] [--deadline SEC] [--oracle fast|mpfr]\n"
           "                     [--relations LIST] [--relation-seed N] [--stats FILE]\n"
           "                     FILE|DIR...\n\n"
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
        "Exit status: 0 no kernel failure, 1 any kernel failure, kernel error or broken promised\n"
        "relation, 2 bad input or\n"
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

static int default_jobs(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int replay_option(cli_replay *r, int key, const char *v) {
    switch (key) {
    case CLI_ERROR:
        return 1;
    case REPLAY_KERNEL:
        return cli_add_kernel(r->cmd, v, &r->kernels);
    case REPLAY_RULE: {
        kvf_error err = {0};
        if (r->nrules == KVF_MAX_RULES)
            return cli_usage_error(r->cmd, "at most %d rules per run", KVF_MAX_RULES);
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
        r->stats_path = v; /* checked once the cases are known (cli_replay_check_stats_path) */
        return 0;
    case REPLAY_PRECISION:
        r->precision = v;
        return cli_precision_check(r->cmd, v);
    case REPLAY_REQUIRE_OVERFLOW:
        r->require_overflow = 1;
        return 0;
    case REPLAY_RELATIONS:
        return cli_relations_parse(r->cmd, v, &r->relations);
    case REPLAY_RELATION_SEED:
        if (cli_parse_u64(v, &r->relation_seed))
            return cli_usage_error(r->cmd, "--relation-seed needs a number, got \"%s\"", v);
        r->relation_seed_given = 1;
        return 0;
    }
    return 0;
}

/* The options and the case files: -1 to go on, else the exit status. */
static int replay_parse(cli_replay *r, int argc, char **argv) {
    cli_parser cp;
    cli_parser_init(&cp, r->cmd, argc, argv, replay_options);
    cli_parser_repeatable(&cp, REPLAY_KERNEL);
    cli_parser_repeatable(&cp, REPLAY_RULE);
    const char *v;
    for (int key; (key = cli_next(&cp, &v)) != CLI_END;) {
        if (key == CLI_HELP) {
            replay_help();
            return KVF_EXIT_OK;
        }
        if (replay_option(r, key, v)) return KVF_EXIT_USAGE;
    }
    char **rest;
    /* A finding's own relation runs with the seed its report records: --relation-seed seeds
     * only the --relations runs. */
    if (r->relation_seed_given && !r->relations)
        return cli_usage_error(r->cmd, "--relation-seed seeds the --relations runs: give "
                                       "--relations too");
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

/* Installed before the statistics file or a worker is created, so a stop request is always
 * answered with the summary; SA_RESTART, so the worker pipes are not interrupted and the case
 * in flight completes before the loop stops. */
static void replay_signals(cli_replay *r) {
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

/* Restores the handlers replay_signals replaced. */
static void replay_release_signals(cli_replay *r) {
    if (!r->signals_set) return;
    sigaction(SIGINT, &r->old_int, NULL);
    sigaction(SIGTERM, &r->old_term, NULL);
    r->signals_set = 0;
}

int kvf_cmd_replay(int argc, char **argv) {
    static cli_replay r; /* the last result's verdicts and attributions: too large for the stack */
    memset(&r, 0, sizeof r);
    r.cmd = "replay";
    r.deadline = 60;
    r.jobs = default_jobs();
    r.oracle_path = kvf_oracle_default_path();
    r.relation_seed = 1;
    int rc = replay_parse(&r, argc, argv);
    if (rc >= 0) { /* --help, or bad usage */
        cli_replay_free(&r);
        return rc;
    }
    rc = cli_replay_check_stats_path(&r);
    if (rc == 0) rc = cli_replay_defaults(&r);
    if (rc == 0) rc = cli_replay_kernel_rules(&r);
    if (rc == 0) {
        replay_signals(&r);
        rc = cli_replay_start(&r);
    }
    if (rc == 0) {
        cli_replay_header(&r);
        for (size_t p = 0; p < r.npaths && !replay_stop; p++, r.done++)
            cli_replay_case(&r, r.paths[p]);
        kvf_replay_stop(&r.session);
        replay_release_signals(&r);
        rc = cli_replay_summary(&r, replay_stop);
    }
    cli_replay_free(&r);
    replay_release_signals(&r);
    return rc;
}
