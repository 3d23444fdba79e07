/* kvfuzz: the command-line front end. Dispatches subcommands and hosts the small helpers they
 * share (strict number parsing, collecting case files, JSON strings). */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "kvfuzz/test_kernels.h"

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
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "kvfuzz: unknown command \"%s\" (run `kvfuzz --help` for the list)\n", argv[1]);
    return KVF_EXIT_USAGE;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kvfuzz %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return KVF_EXIT_USAGE;
}

int cli_is_help(const char *arg) {
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_parse_u64(const char *text, uint64_t *out) {
    if (!text || !*text || *text == '-' || *text == '+') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int cli_parse_i64(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    if (!text || !*text) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_parse_double(const char *text, double *out) {
    if (!text || !*text) return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push_path(char ***paths, size_t *count, size_t *cap, const char *path) {
    if (*count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        char **np = realloc(*paths, ncap * sizeof *np);
        if (!np) return -1;
        *paths = np;
        *cap = ncap;
    }
    char *copy = strdup(path);
    if (!copy) return -1;
    (*paths)[(*count)++] = copy;
    return 0;
}

int cli_collect_cases(const char *cmd, char **args, int nargs, char ***paths, size_t *count) {
    size_t cap = 0;
    *paths = NULL;
    *count = 0;
    for (int i = 0; i < nargs; i++) {
        struct stat st;
        if (stat(args[i], &st) != 0) {
            cli_usage_error(cmd, "cannot read %s: %s", args[i], strerror(errno));
            goto fail;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (push_path(paths, count, &cap, args[i])) goto oom;
            continue;
        }
        DIR *dir = opendir(args[i]);
        if (!dir) {
            cli_usage_error(cmd, "cannot open directory %s: %s", args[i], strerror(errno));
            goto fail;
        }
        size_t first = *count;
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".kvfz")) continue;
            size_t len = strlen(args[i]) + strlen(e->d_name) + 2;
            char *full = malloc(len);
            if (!full) {
                closedir(dir);
                goto oom;
            }
            snprintf(full, len, "%s/%s", args[i], e->d_name);
            int rc = push_path(paths, count, &cap, full);
            free(full);
            if (rc) {
                closedir(dir);
                goto oom;
            }
        }
        closedir(dir);
        qsort(*paths + first, *count - first, sizeof **paths, cmp_str);
    }
    return 0;
oom:
    cli_usage_error(cmd, "out of memory listing case files");
fail:
    cli_free_paths(*paths, *count);
    *paths = NULL;
    *count = 0;
    return -1;
}

void cli_free_paths(char **paths, size_t count) {
    for (size_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

void cli_limits(kvf_limits *limits) {
    kvf_limits_default(limits);
    const char *gib = getenv("KVF_MAX_POOL_GIB");
    int64_t v;
    if (gib && cli_parse_i64(gib, 1, 1 << 16, &v) == 0) limits->max_pool_bytes = v << 30;
}

int cli_add_kernel(const char *cmd, const char *spec, const kvf_kernel **kernels, size_t max,
                   size_t *count) {
    kvf_error err = {0};
    if (kvf_kernel_resolve(spec, kvf_fuzz_kernel_find, kernels, max, count, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    return KVF_EXIT_OK;
}

void cli_free_kernels(const kvf_kernel **kernels, size_t count) {
    for (size_t i = 0; i < count; i++)
        kvf_kernel_free(kernels[i]);
}

int cli_one_kernel(const char *cmd, const char *spec, const kvf_kernel **kernel) {
    const kvf_kernel *ks[64];
    size_t n = 0;
    if (cli_add_kernel(cmd, spec, ks, 64, &n)) return KVF_EXIT_USAGE;
    if (n != 1) {
        char names[512] = "";
        size_t at = 0;
        for (size_t i = 0; i < n && at + 2 < sizeof names; i++)
            at +=
                (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", ks[i]->name);
        cli_free_kernels(ks, n);
        return cli_usage_error(cmd, "%s holds %zu kernels; this command runs one: name it (%s)",
                               spec, n, names);
    }
    *kernel = ks[0];
    return KVF_EXIT_OK;
}
