/* kvfuzz replay's command line in three files: cmd_replay.c (options, help, the run's order),
 * replay_setup.c (default kernel and rules, each kernel's rules and model, the statistics and
 * the workers) and replay_print.c (the table, a line per case and kernel, the summary). What a
 * replay computes is the library's (kvfuzz/replay.h); these files parse, set up and print.
 *
 * cmd_replay.c calls the other two; they call neither cmd_replay.c nor each other. The struct
 * owns everything it points to (cli_replay_free releases it) except the argv strings. Functions
 * that return an int return 0 or an exit status after printing one sentence. */
#ifndef KVFUZZ_CLI_REPLAY_H
#define KVFUZZ_CLI_REPLAY_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "kvfuzz/replay.h"
#include "kvfuzz/stats.h"
#include "kvfuzz/verdict.h"

/* One replay: its options, its kernels with their rules, models and verdict counts (one row
 * per kernel: a plugin may list thousands), its statistics and its session. */
typedef struct cli_replay {
    const char *cmd;
    kvf_rule rules[KVF_MAX_RULES]; /* as given, or the default set */
    int nrules;
    kvf_kernel_list kernels;
    double deadline;
    int64_t jobs;
    int require_overflow, oracle_path;
    const char *stats_path, *precision;
    char **paths;
    size_t npaths;
    kvf_rule (*krules)[KVF_MAX_RULES]; /* each kernel's rules under its model */
    char (*kmodel)[96];                /* each kernel's model, in words */
    kvf_verdict_counts (*counts)[KVF_MAX_RULES];
    kvf_stats *stats;
    kvf_replay session;
    kvf_replay_result res; /* the last kernel run's: too large for the stack */
    struct sigaction old_int, old_term;
    int signals_set;
    size_t done;            /* case files handled */
    unsigned relations;     /* --relations (kvf_relation mask) */
    uint64_t relation_seed; /* --relation-seed (default 1) */
    int relation_seed_given;
} cli_replay;

/* ---- replay_setup.c ---- */

/* The statistics are written before any case is read: a --stats that names a case of the run,
 * or the report beside one, or any other .kvfz file, would replace it. */
int cli_replay_check_stats_path(const cli_replay *r);
/* Without --kernel (and --rule): the kernel (and failing rule) the findings' reports record,
 * else cuda when a GPU is usable, else cpu-splitkv; the default rule set. */
int cli_replay_defaults(cli_replay *r);
/* Each kernel's rules under its own precision model, the model in words and its verdict
 * counts. */
int cli_replay_kernel_rules(cli_replay *r);
/* The statistics file (written once now, so a path that cannot be written fails at once) and
 * each kernel's worker. */
int cli_replay_start(cli_replay *r);
void cli_replay_free(cli_replay *r);

/* ---- replay_print.c ---- */

/* The kernels' models and the table's header. */
void cli_replay_header(const cli_replay *r);
/* One case file: a line per kernel (or one saying why none ran), the statistics ticked. */
void cli_replay_case(cli_replay *r, const char *path);
/* The summary and the verdicts, the statistics written; the exit status (stopped: the signal
 * that stopped the run, or 0). */
int cli_replay_summary(cli_replay *r, int stopped);

#endif
