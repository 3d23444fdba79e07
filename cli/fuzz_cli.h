/* kvfuzz fuzz's command line in four files: cmd_fuzz.c (the run's order: set-up, files, the
 * campaign), fuzz_options.c (the help, the option table and the parser), fuzz_option_values.c
 * (each option's value checked into the run's options) and fuzz_summary.c (the first lines, and
 * after the campaign the statistics closed, the summary, the verdicts and the groups). What a
 * campaign computes is the library's (kvfuzz/campaign.h, kvfuzz/campaign_setup.h); these files
 * parse, set up and print.
 *
 * cmd_fuzz.c calls fuzz_options.c and fuzz_summary.c, fuzz_options.c calls
 * fuzz_option_values.c; none of them calls back. Functions that return an int return 0, an exit
 * status after one sentence, or as said. */
#ifndef KVFUZZ_CLI_FUZZ_H
#define KVFUZZ_CLI_FUZZ_H

#include <stdio.h>

#include "cli.h"
#include "kvfuzz/campaign.h"
#include "kvfuzz/devices.h"
#include "stats_hooks.h"

/* The options' keys: the values getopt_long returns for them. */
enum {
    FUZZ_OPT_KERNEL = 256,
    FUZZ_OPT_RULE,
    FUZZ_OPT_TIME,
    FUZZ_OPT_RUNS,
    FUZZ_OPT_JOBS,
    FUZZ_OPT_SEED,
    FUZZ_OPT_CORPUS,
    FUZZ_OPT_FINDINGS,
    FUZZ_OPT_STATS,
    FUZZ_OPT_STATS_INTERVAL,
    FUZZ_OPT_DEADLINE,
    FUZZ_OPT_DETERMINISM,
    FUZZ_OPT_RELATIONS,
    FUZZ_OPT_MAX_BATCH,
    FUZZ_OPT_MAX_PAGES,
    FUZZ_OPT_MAX_PAGE_SIZE,
    FUZZ_OPT_MAX_WORK,
    FUZZ_OPT_REQUIRE_OVERFLOW,
    FUZZ_OPT_WORKERS,
    FUZZ_OPT_DEVICES,
    FUZZ_OPT_GENERATORS,
    FUZZ_OPT_IN_PROCESS,
    FUZZ_OPT_ORACLE_ONLY,
    FUZZ_OPT_ORACLE,
    FUZZ_OPT_VERBOSE,
    FUZZ_OPT_MAX_FINDINGS,
    FUZZ_OPT_STOP_ON_FINDING,
    FUZZ_OPT_RELOAD,
    FUZZ_OPT_LARGE_SHARE,
    FUZZ_OPT_SHAPE_SET,
    FUZZ_OPT_LARGE_WORK,
    FUZZ_OPT_LANES,
    FUZZ_OPT_PRECISION,
    FUZZ_OPT_TAG,
    FUZZ_OPT_MINIMIZE_TIME,
    FUZZ_OPT_KV_DTYPE
};

/* The options of one `kvfuzz fuzz` run, as parsed. */
typedef struct cli_fuzz {
    kvf_campaign_opts o;
    kvf_device_set devices; /* o.devices points here */
    int seed_given;
    const char *kernel_name, *stats_path, *precision, *tag;
    double stats_interval;
    double minimize_time; /* --minimize-time; -1: the default share of the campaign */
} cli_fuzz;

/* Streaming error statistics (reports/, kvfuzz/stats_sink.h): the campaign hands each case's
 * judging to the sink through the judge hooks (stats_hooks.h), so every element is counted
 * while the judge computes it and each case is judged once. */
typedef struct cli_fuzz_stats {
    cli_stats_hooks hooks;
    const kvf_campaign_opts *o;
} cli_fuzz_stats;

/* ---- fuzz_options.c ---- */

/* Parses the command line into f: -1 to go on, else the exit status (0 after --help). */
int cli_fuzz_parse(cli_fuzz *f, int argc, char **argv);

/* ---- fuzz_option_values.c ---- */

/* The run's options (kernel, rules, time, threads, devices, seed): 0, an exit status, or -1
 * when ch is not one of them. */
int cli_fuzz_run_option(cli_fuzz *f, int ch, const char *v);
/* The outputs' and the cases' options (folders, statistics, budgets): 0, an exit status, or -1
 * when ch is not one of them. */
int cli_fuzz_case_option(cli_fuzz *f, int ch, const char *v);

/* ---- fuzz_summary.c ---- */

/* The run's first lines, once every output is known to be writable. */
void cli_fuzz_banner(const cli_fuzz *f, const kvf_precision *model,
                     cli_precision_source model_source, int stale);
/* After the campaign: the statistics closed, the summary, the verdicts and the groups; the
 * exit status. */
int cli_fuzz_finish(cli_fuzz *f, cli_fuzz_stats *fs, const kvf_precision *model,
                    kvf_campaign_stats *st0, int rc, const kvf_error *err);

#endif
