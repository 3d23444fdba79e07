/* Shared pieces of the kvfuzz command line: every subcommand is `int kvf_cmd_X(argc, argv)`
 * with argv[0] the subcommand name, returning the process exit code (0 success, 1 findings,
 * 2 bad input or usage, a kernel that cannot start included). Usage errors print one sentence
 * to stderr. The rules every command follows (options, numbers, contradictions, environment
 * variables, exit status, JSON) are in docs/cli.md. */
#ifndef KVFUZZ_CLI_H
#define KVFUZZ_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "kvfuzz/attribution.h"
#include "kvfuzz/case.h"
#include "kvfuzz/error.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/minimize.h"
#include "kvfuzz/relation.h"

#define KVF_EXIT_OK 0
#define KVF_EXIT_FINDINGS 1
#define KVF_EXIT_USAGE 2

int kvf_cmd_replay(int argc, char **argv);
int kvf_cmd_gen(int argc, char **argv);
int kvf_cmd_show(int argc, char **argv);
int kvf_cmd_oracle(int argc, char **argv);
int kvf_cmd_kernels(int argc, char **argv);
int kvf_cmd_rules(int argc, char **argv);
int kvf_cmd_bench(int argc, char **argv);
int kvf_cmd_bench_oracle(int argc, char **argv); /* kvfuzz bench --oracle (bench_oracle.c) */
int kvf_cmd_fuzz(int argc, char **argv);
int kvf_cmd_minimize(int argc, char **argv);
int kvf_cmd_report(int argc, char **argv);
int kvf_cmd_mutants(int argc, char **argv);
int kvf_cmd_import_fib(int argc, char **argv); /* cmd_fib_import.c */
int kvf_cmd_export_fib(int argc, char **argv); /* cmd_fib_export.c */

/* Prints "kvfuzz CMD: <message>" to stderr on one line (control bytes become '?') and returns
 * KVF_EXIT_USAGE; commands that go on past a bad file print its sentence with it too. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Strict number parsing (kvfuzz/env.h: decimal, the whole string, in range; a leading 0 is
 * not octal). 0 or -1. */
int cli_parse_u64(const char *text, uint64_t *out);
/* --relations LIST: relation names joined by ',' or "all" into a kvf_relation mask; a usage
 * error naming the first word that is not one. */
int cli_relations_parse(const char *cmd, const char *text, unsigned *mask);
int cli_parse_i64(const char *text, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_double(const char *text, double *out);

/* The same, printing "kvfuzz CMD: OPT must be ..., got \"TEXT\"" on failure: 0, or
 * KVF_EXIT_USAGE. cli_opt_seconds takes a number of seconds in (0, hi]. */
int cli_opt_u64(const char *cmd, const char *opt, const char *text, uint64_t *out);
int cli_opt_i64(const char *cmd, const char *opt, const char *text, int64_t lo, int64_t hi,
                int64_t *out);
int cli_opt_seconds(const char *cmd, const char *opt, const char *text, double hi, double *out);
/* A scale: positive and, rounded to f32, finite and nonzero (*out is the f32 value). */
int cli_opt_scale(const char *cmd, const char *opt, const char *text, double *out);
/* A statistics file's path (fuzz --stats, replay --stats, report --merge): a .kvfz name is a
 * case file's, which the statistics (JSON) would replace: one sentence and KVF_EXIT_USAGE. */
int cli_opt_stats_path(const char *cmd, const char *opt, const char *path);

/* True when argv[i] is -h or --help. */
int cli_is_help(const char *arg);

/* ---- options -------------------------------------------------------------------------------
 * Each command describes its options in one table; the parser (getopt_long) and the option
 * list of its --help are both made from it, so the help lists exactly what the parser accepts.
 * -h and --help are added to every table. */
typedef struct cli_option {
    const char *name; /* long name without the dashes, or NULL for a short option only */
    int key;          /* what cli_next returns: a letter (also the short option) or >= 256;
                         0 ends the table */
    const char *arg;  /* the value's name in the help ("K", "SEC"), NULL for a flag */
    const char *help; /* lines separated by '\n', printed beside and below the option */
} cli_option;

#define CLI_MAX_OPTIONS 40
#define CLI_END (-1)   /* the options are done; cli_operands gives the rest */
#define CLI_ERROR (-2) /* one sentence was printed: exit KVF_EXIT_USAGE */
#define CLI_HELP (-3)  /* -h or --help */

typedef struct cli_parser {
    const char *cmd;
    int argc;
    char **argv;
    const cli_option *opts;
    struct option longs[CLI_MAX_OPTIONS + 2];
    char shorts[3 * CLI_MAX_OPTIONS + 8];
    unsigned char seen[CLI_MAX_OPTIONS]; /* by table index: options with a value given so far */
    int repeatable[4], nrepeatable;      /* keys that may come more than once, each adding one */
} cli_parser;

/* argv[0] is the command's name; options and operands may come in any order ("--" ends the
 * options). */
void cli_parser_init(cli_parser *p, const char *cmd, int argc, char **argv, const cli_option *opts);
/* Marks an option with a value as one that may be given more than once, each adding one value
 * (--kernel K); at most 4 a parser. */
void cli_parser_repeatable(cli_parser *p, int key);
/* The next option's key, with *arg its value (NULL for a flag), or CLI_END / CLI_ERROR /
 * CLI_HELP. An option with a value given a second time is CLI_ERROR unless it is repeatable:
 * one of the two values would be dropped. */
int cli_next(cli_parser *p, const char **arg);
/* After CLI_END: the operands (pointers into argv, in order) and their count. */
int cli_operands(cli_parser *p, char ***operands);
/* The table as the help's option list. */
void cli_print_options(FILE *f, const cli_option *opts);
/* The option's spelling for messages: "--kernel" or "-o". */
const char *cli_option_name(const cli_option *opts, int key);

/* The report `kvfuzz fuzz` saves beside a finding, <name>.json for <name>.kvfz: 0 with *report
 * NULL when there is none (or the case is not named .kvfz), 0 with the object (the caller
 * json_decref()s it), or a KVF_E* code with one sentence in err for a report that is not a
 * regular file of at most 16 MiB or not a JSON object. Read like a case file (no FIFO waits,
 * no device read to the end), numbers as reals (a recipe seed past 2^63 is valid JSON). */
int cli_read_report(const char *case_path, json_t **report, kvf_error *err);
/* The relation and seed an invariance finding's report names, into o (kvfuzz/minimize.h):
 * KVF_EFORMAT with a sentence when there is no report or it names none. */
int cli_finding_relation(const char *case_path, kvf_minimize_opts *o, kvf_error *err);
/* A folder named by an option that must hold case files (a mistyped one would silently drop
 * what it feeds): 0, or a usage error naming it. */
int cli_case_folder(const char *cmd, const char *option, const char *dir);
/* A kernel a finding's report records ("PATH.so:NAME"): 0 when its library is where the report
 * says, else a usage error saying where to point --kernel (built-in kernels: 0). */
int cli_recorded_kernel_present(const char *cmd, const char *kernel);

/* Expands FILE|DIR arguments into a sorted list of .kvfz files (directories are walked one
 * level deep, sorted by name). The list and its strings are malloc'd; cli_free_paths frees.
 * Returns 0, or -1 after printing one sentence about the path that cannot be read. */
int cli_collect_cases(const char *cmd, char **args, int nargs, char ***paths, size_t *count);
void cli_free_paths(char **paths, size_t count);

/* Resolves one --kernel value (a built-in or test kernel name, PATH.so[:NAME],
 * python:MODULE:FUNCTION, a solution .json) and appends its kernels to the list, which grows:
 * PATH.so adds every kernel of the plugin, however many it lists (a plugin may list up to
 * KVF_PLUGIN_MAX_KERNELS; more is a load error). On failure prints "kvfuzz CMD: <one
 * sentence>", leaves the list as it was and returns KVF_EXIT_USAGE. kvf_kernel_list_free
 * releases the list. */
int cli_add_kernel(const char *cmd, const char *spec, kvf_kernel_list *kernels);
/* The same for a command that runs one kernel: a plugin with several needs PATH.so:NAME. */
int cli_one_kernel(const char *cmd, const char *spec, const kvf_kernel **kernel);

/* Limits from defaults plus the environment (KVF_MAX_POOL_GIB, validated by main before any
 * command runs: kvf_env_check). */
void cli_limits(kvf_limits *limits);

/* "kernel cannot start" is exit 2 in every command: prints "kvfuzz CMD: kernel NAME cannot
 * start: REASON" and returns KVF_EXIT_USAGE. */
int cli_kernel_cannot_start(const char *cmd, const char *kernel, const char *reason);

/* ---- precision models (cli/precision_opt.c; docs/precision.md) ---------------------------- */

/* The --precision option's help, the same in every command that judges. */
#define CLI_PRECISION_HELP                                                                         \
    "judge strict and fa under precision model MODEL (f32, bf16-p, bf16-partials+ftz, ...;\n"      \
    "`kvfuzz rules` lists them); default: the model the kernel declares, else f32.\n"              \
    "A rule that names its own model (strict:ftz) keeps it."

/* Where a run's precision model came from, for the line that says which model judges. */
typedef enum cli_precision_source {
    CLI_PRECISION_DEFAULT = 0, /* f32: nothing declared, no override */
    CLI_PRECISION_DECLARED,    /* the kernel's declared model */
    CLI_PRECISION_OVERRIDE,    /* --precision */
} cli_precision_source;

/* Checks a --precision value: 0, or prints "kvfuzz CMD: --precision: <why>" and returns
 * KVF_EXIT_USAGE. */
int cli_precision_check(const char *cmd, const char *text);
/* The model a run judges kernel `k` under: the override when not NULL, else the kernel's
 * declared model, else f32. A declared model that does not parse is the kernel's error:
 * prints one sentence naming the kernel and returns KVF_EXIT_USAGE. */
int cli_kernel_precision(const char *cmd, const kvf_kernel *k, const char *override,
                         kvf_precision *out, cli_precision_source *source);
/* "bf16-p (declared by the kernel)", "f32 (default)", "fp16-p (--precision)". */
void cli_precision_text(const kvf_precision *p, cli_precision_source source, char *buf,
                        size_t size);

/* ---- per-kernel rules and attribution (cli/precision_attrib.c) ---- */

/* The rules a command judges kernel `k` by: base[0..n) copied into out, with every strict and
 * fa rule still under f32 taking the kernel's model (cli_kernel_precision), so that one
 * kernel's model never reaches another's rules. *model and *source (either may be NULL) say
 * which model that was. 0, or KVF_EXIT_USAGE after one sentence (a declared model kvfuzz
 * cannot read, a bad override). */
int cli_rules_for_kernel(const char *cmd, const kvf_kernel *k, const char *override,
                         const kvf_rule *base, int n, kvf_rule *out, kvf_precision *model,
                         cli_precision_source *source);

/* ---- after a campaign (cli/fuzz_triage.c) ---- */

/* Groups the findings of dir into distinct defects (kvfuzz/groups.h), minimizes the first
 * finding of each group without a minimized case with `kernel` under `model` in budget_s
 * seconds in all (0: none), saving <finding>.min.kvfz beside it, and lists the groups on out.
 * 0, or -1 when the folder cannot be read (said on stderr). */
int cli_fuzz_triage(FILE *out, const char *dir, const kvf_kernel *kernel,
                    const kvf_precision *model, double budget_s);

#endif
