/* kvfuzz: the command-line front end. Dispatches subcommands; the helpers they share are in
 * cli_args.c (usage errors, strict numbers, the option tables) and cli_inputs.c (case files,
 * finding reports, limits, kernels). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvfuzz/env.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"replay", kvf_cmd_replay, "run kernels on case files and judge them against the oracle"},
    {"gen", kvf_cmd_gen, "write a case file from a preset or a random recipe"},
    {"show", kvf_cmd_show, "print a case as JSON"},
    {"oracle", kvf_cmd_oracle, "print the oracle's correctly rounded o and lse for a case"},
    {"kernels", kvf_cmd_kernels, "list the registered kernels"},
    {"rules", kvf_cmd_rules, "list the tolerance rules"},
    {"mutants", kvf_cmd_mutants,
     "the bug-finding benchmark: mutants vs kvfuzz and bench-style tests"},
    {"bench", kvf_cmd_bench, "time a kernel against a same-run read roofline (CUDA)"},
    {"fuzz", kvf_cmd_fuzz, "run a fuzzing campaign: generate, run, judge, save findings"},
    {"minimize", kvf_cmd_minimize, "shrink a failing case while it fails the same way"},
    {"report", kvf_cmd_report, "draw error-distribution reports from stats files"},
    {"import-fib", kvf_cmd_import_fib, "FlashInfer-Bench workloads into case files"},
    {"export-fib", kvf_cmd_export_fib, "findings into a FlashInfer-Bench dataset FIB replays"},
};

static void print_usage(FILE *f) {
    fprintf(f, "usage: kvfuzz COMMAND [OPTIONS]\n\n"
               "kvfuzz finds correctness bugs in paged GQA decode attention kernels: it runs a\n"
               "kernel and an MPFR oracle on generated cases and judges the output by tolerance\n"
               "rules.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`kvfuzz COMMAND --help` describes each command. Exit codes: 0 success, 1 a\n"
               "violation or finding, 2 bad input or usage.\n");
    fputs("\nEvery command refuses (exit 2) a case whose cost, estimated from its shape before\n"
          "anything is allocated, passes the budgets: 2048 MiB of memory (tensors, oracle,\n"
          "kernel buffers) and 2^33 units of oracle work; KVF_MAX_MEMORY_MIB and KVF_MAX_WORK\n"
          "(positive integers) change them (docs/case-format.md, \"Budgets\").\n",
          f);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return KVF_EXIT_USAGE;
    }
    if (cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
        print_usage(stdout);
        return KVF_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* Every variable kvfuzz reads is checked before any work: a bad value is refused,
             * never silently ignored (kvfuzz/env.h). */
            kvf_error err = {0};
            if (kvf_env_check(&err)) return cli_usage_error(argv[1], "%s", err.msg);
            return commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "kvfuzz: unknown command \"%s\" (run `kvfuzz --help` for the list)\n", argv[1]);
    return KVF_EXIT_USAGE;
}
