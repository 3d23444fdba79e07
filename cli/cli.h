/* Shared pieces of the kvfuzz command line: every subcommand is `int kvf_cmd_X(argc, argv)`
 * with argv[0] the subcommand name, returning the process exit code (0 success, 1 findings,
 * 2 bad input or usage). Usage errors print one sentence to stderr. */
#ifndef KVFUZZ_CLI_H
#define KVFUZZ_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvfuzz/case.h"
#include "kvfuzz/kernel.h"

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

/* Prints "kvfuzz CMD: <message>" to stderr and returns KVF_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Strict number parsing: the whole string must be a number in range. 0 or -1. */
int cli_parse_u64(const char *text, uint64_t *out);
int cli_parse_i64(const char *text, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_double(const char *text, double *out);

/* True when argv[i] is -h or --help. */
int cli_is_help(const char *arg);

/* Expands FILE|DIR arguments into a sorted list of .kvfz files (directories are walked one
 * level deep, sorted by name). The list and its strings are malloc'd; cli_free_paths frees.
 * Returns 0, or -1 after printing one sentence about the path that cannot be read. */
int cli_collect_cases(const char *cmd, char **args, int nargs, char ***paths, size_t *count);
void cli_free_paths(char **paths, size_t count);

/* Writes a JSON string literal (with quotes) for s. */
void cli_json_string(FILE *f, const char *s);

/* Resolves one --kernel value (a built-in or test kernel name, PATH.so[:NAME],
 * python:MODULE:FUNCTION, a solution .json) into kernels[*count], at most max. On failure
 * prints "kvfuzz CMD: <one sentence>" and returns KVF_EXIT_USAGE. cli_free_kernels releases
 * what it allocated. */
int cli_add_kernel(const char *cmd, const char *spec, const kvf_kernel **kernels, size_t max,
                   size_t *count);
void cli_free_kernels(const kvf_kernel **kernels, size_t count);
/* The same for a command that runs one kernel: a plugin with several needs PATH.so:NAME. */
int cli_one_kernel(const char *cmd, const char *spec, const kvf_kernel **kernel);

/* Limits from defaults plus the environment (KVF_MAX_POOL_GIB). */
void cli_limits(kvf_limits *limits);

#endif
