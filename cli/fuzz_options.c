/* kvfuzz fuzz's help, option table and parser (fuzz_cli.h). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_cli.h"

static void fuzz_help(void) {
    printf(
        "usage: kvfuzz fuzz [--kernel K] [--rule R]... [--precision MODEL]\n"
        "                   [--time SEC | --runs N] [--jobs N]\n"
        "                   [--seed N] [--corpus DIR] [--reload SEC] [--findings DIR]\n"
        "                   [--stats FILE] [--stats-interval SEC] [--deadline SEC]\n"
        "                   [--determinism N] [--relations N] [--max-batch N] [--max-pages N]\n"
        "                   [--max-page-size N] [--max-work N] [--large-share PCT]\n"
        "                   [--large-work N] [--shape-set N] [--kv-dtype T]\n"
        "                   [--require-overflow] [--stop-on-finding] [--max-findings N]\n"
        "                   [--workers N] [--lanes N] [--devices all|LIST] [--generators N]\n"
        "                   [--tag TEXT] [--minimize-time SEC] [--in-process] [--oracle-only]\n"
        "                   [--oracle fast|mpfr] [--verbose]\n\n"
        "Generates cases (random recipes over every strategy, and structure-aware mutations\n"
        "of a corpus that grows with cases reaching new error buckets), runs the kernel in a\n"
        "worker process, computes the MPFR oracle on a pool of threads and judges each case\n"
        "under every rule. Buffer layouts are drawn for kernels whose host lays them out, FP8\n"
        "KV caches with scales for kernels that declare them (`kvfuzz kernels --kernel K`\n"
        "shows it; docs/fuzzing.md). Prints a progress line every 5 s and a summary at the\n"
        "end.\n"
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
        "  --relations N       run every Nth case again transformed by an invariance relation,\n"
        "                      the relations in turn (placement, head-permutation, v-scaling,\n"
        "                      batch-invariance, and graph-replay for CUDA kernels;\n"
        "                      docs/invariance.md), and compare the bits: a\n"
        "                      relation the kernel promises that breaks is an invariance\n"
        "                      finding, one it does not promise a property in the summary's\n"
        "                      table (default 8; 0 turns them off).\n"
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
        "  --shape-set N       draw shapes (Hq, Hk, D, S) from a set that starts with N\n"
        "                      shapes and admits one more every 1,000 cases, so that a kernel\n"
        "                      compiling per shape reuses its compilations; 0 to 256, 0 draws\n"
        "                      every shape anew (default 4 for a Python kernel on a GPU,\n"
        "                      else 0).\n"
        "  --kv-dtype T        the KV caches' dtype in every case made: any (default: FP8 in\n"
        "                      about 1 case in 4 for a kernel that reads FP8 caches, bf16 in\n"
        "                      the rest), bf16 (no FP8 case), fp8 (FP8 K and V caches in\n"
        "                      every case, e4m3 or e5m2 as drawn), e4m3 or e5m2 (FP8 in every\n"
        "                      case, both caches of that dtype). fp8, e4m3 and e5m2 need a\n"
        "                      kernel that reads FP8 caches. Initial corpus entries take the\n"
        "                      dtype too, except that explicit tensors (imported workloads)\n"
        "                      keep the dtypes they came with under fp8, e4m3 and e5m2.\n"
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

static const struct option fuzz_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"kernel", required_argument, NULL, FUZZ_OPT_KERNEL},
    {"rule", required_argument, NULL, FUZZ_OPT_RULE},
    {"precision", required_argument, NULL, FUZZ_OPT_PRECISION},
    {"time", required_argument, NULL, FUZZ_OPT_TIME},
    {"runs", required_argument, NULL, FUZZ_OPT_RUNS},
    {"jobs", required_argument, NULL, FUZZ_OPT_JOBS},
    {"seed", required_argument, NULL, FUZZ_OPT_SEED},
    {"corpus", required_argument, NULL, FUZZ_OPT_CORPUS},
    {"findings", required_argument, NULL, FUZZ_OPT_FINDINGS},
    {"stats", required_argument, NULL, FUZZ_OPT_STATS},
    {"stats-interval", required_argument, NULL, FUZZ_OPT_STATS_INTERVAL},
    {"deadline", required_argument, NULL, FUZZ_OPT_DEADLINE},
    {"determinism", required_argument, NULL, FUZZ_OPT_DETERMINISM},
    {"relations", required_argument, NULL, FUZZ_OPT_RELATIONS},
    {"max-batch", required_argument, NULL, FUZZ_OPT_MAX_BATCH},
    {"max-pages", required_argument, NULL, FUZZ_OPT_MAX_PAGES},
    {"max-page-size", required_argument, NULL, FUZZ_OPT_MAX_PAGE_SIZE},
    {"max-work", required_argument, NULL, FUZZ_OPT_MAX_WORK},
    {"require-overflow", no_argument, NULL, FUZZ_OPT_REQUIRE_OVERFLOW},
    {"workers", required_argument, NULL, FUZZ_OPT_WORKERS},
    {"lanes", required_argument, NULL, FUZZ_OPT_LANES},
    {"devices", required_argument, NULL, FUZZ_OPT_DEVICES},
    {"generators", required_argument, NULL, FUZZ_OPT_GENERATORS},
    {"in-process", no_argument, NULL, FUZZ_OPT_IN_PROCESS},
    {"oracle-only", no_argument, NULL, FUZZ_OPT_ORACLE_ONLY},
    {"oracle", required_argument, NULL, FUZZ_OPT_ORACLE},
    {"verbose", no_argument, NULL, FUZZ_OPT_VERBOSE},
    {"max-findings", required_argument, NULL, FUZZ_OPT_MAX_FINDINGS},
    {"stop-on-finding", no_argument, NULL, FUZZ_OPT_STOP_ON_FINDING},
    {"minimize-time", required_argument, NULL, FUZZ_OPT_MINIMIZE_TIME},
    {"reload", required_argument, NULL, FUZZ_OPT_RELOAD},
    {"large-share", required_argument, NULL, FUZZ_OPT_LARGE_SHARE},
    {"shape-set", required_argument, NULL, FUZZ_OPT_SHAPE_SET},
    {"large-work", required_argument, NULL, FUZZ_OPT_LARGE_WORK},
    {"tag", required_argument, NULL, FUZZ_OPT_TAG},
    {"kv-dtype", required_argument, NULL, FUZZ_OPT_KV_DTYPE},
    {NULL, 0, NULL, 0},
};

/* Whether the option `name` was given, from the parser's `seen`. */
static int given(const unsigned char *seen, const char *name) {
    for (size_t i = 0; fuzz_options[i].name; i++)
        if (strcmp(fuzz_options[i].name, name) == 0) return seen[i];
    return 0;
}

/* The option as the user wrote it, for messages. */
static const char *option_text(char **argv, int index) {
    return index > 0 && argv[index] ? argv[index] : "?";
}

int cli_fuzz_parse(cli_fuzz *f, int argc, char **argv) {
    const char *cmd = "fuzz";
    /* "-": non-options come back as 1 (refused below) instead of being moved to the end;
     * ":": a missing value comes back as ':' so the message is ours. */
    optind = 0;
    opterr = 0;
    /* Options given so far, by table index: a second value would drop the first (docs/cli.md,
     * "Contradictions"; --rule alone adds one each time), and some pairs drop one another. */
    unsigned char seen[sizeof fuzz_options / sizeof fuzz_options[0]] = {0};
    for (;;) {
        int prev = optind ? optind : 1, at = -1;
        int ch = getopt_long(argc, argv, "-:h", fuzz_options, &at);
        if (ch == -1) break;
        if (at >= 0) {
            if (fuzz_options[at].has_arg == required_argument && ch != FUZZ_OPT_RULE && seen[at])
                return cli_usage_error(cmd, "--%s is given twice; it takes one value",
                                       fuzz_options[at].name);
            seen[at] = 1;
        }
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
        int rc = cli_fuzz_run_option(f, ch, v);
        if (rc < 0) rc = cli_fuzz_case_option(f, ch, v);
        if (rc < 0)
            return cli_usage_error(cmd, "unknown option \"%s\" (see kvfuzz fuzz --help)", a);
        if (rc) return rc;
    }
    /* After "--" getopt stops: what follows is an operand, and fuzz takes none. */
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument \"%s\" (see kvfuzz fuzz --help)",
                               argv[optind]);
    if (f->o.time_limit_s > 0 && f->o.max_runs > 0)
        return cli_usage_error(cmd, "give --time or --runs, not both");
    /* Options that one of the others would silently drop (docs/cli.md, "Contradictions"). */
    if (given(seen, "stop-on-finding") && given(seen, "max-findings"))
        return cli_usage_error(cmd, "--stop-on-finding is --max-findings 1: give one of them");
    if (f->o.oracle_only) {
        static const char *const judged[] = {
            "kernel",  "rule",         "precision",     "deadline",        "determinism",
            "workers", "max-findings", "minimize-time", "stop-on-finding", "require-overflow"};
        for (size_t i = 0; i < sizeof judged / sizeof judged[0]; i++)
            if (given(seen, judged[i]))
                return cli_usage_error(cmd,
                                       "--oracle-only runs no kernel and judges nothing: it "
                                       "cannot go with --%s",
                                       judged[i]);
    }
    if (f->o.in_process && (given(seen, "deadline") || given(seen, "workers")))
        return cli_usage_error(cmd,
                               "--in-process runs the kernel in this process, with no worker to "
                               "time out or add: it cannot go with --%s",
                               given(seen, "deadline") ? "deadline" : "workers");
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
