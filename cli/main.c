/* kvfuzz: the command-line front end. Dispatches subcommands and hosts the small helpers they
 * share (strict numbers, the option tables, collecting case files, kernels). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "kvfuzz/env.h"
#include "kvfuzz/file.h"
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

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line whatever the operands hold: a path with a newline in its name would split it. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    fprintf(stderr, "kvfuzz %s: %s\n", cmd, msg);
    return KVF_EXIT_USAGE;
}

int cli_is_help(const char *arg) {
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_parse_u64(const char *text, uint64_t *out) {
    return kvf_parse_u64(text, out);
}

int cli_parse_i64(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    return kvf_parse_i64(text, lo, hi, out);
}

int cli_parse_double(const char *text, double *out) {
    return kvf_parse_double(text, out);
}

int cli_opt_u64(const char *cmd, const char *opt, const char *text, uint64_t *out) {
    if (kvf_parse_u64(text, out))
        return cli_usage_error(cmd, "%s must be a decimal integer in [0, 2^64-1], got \"%s\"", opt,
                               text);
    return KVF_EXIT_OK;
}

int cli_opt_i64(const char *cmd, const char *opt, const char *text, int64_t lo, int64_t hi,
                int64_t *out) {
    if (kvf_parse_i64(text, lo, hi, out))
        return cli_usage_error(cmd, "%s must be a decimal integer in [%lld, %lld], got \"%s\"", opt,
                               (long long)lo, (long long)hi, text);
    return KVF_EXIT_OK;
}

int cli_opt_seconds(const char *cmd, const char *opt, const char *text, double hi, double *out) {
    double v;
    if (kvf_parse_double(text, &v) || !(v > 0) || v > hi)
        return cli_usage_error(
            cmd, "%s must be a positive number of seconds (at most %g), got \"%s\"", opt, hi, text);
    *out = v;
    return KVF_EXIT_OK;
}

/* ---- options ---------------------------------------------------------------------------- */

static const cli_option help_option = {"help", 'h', NULL, "this help"};

void cli_parser_init(cli_parser *p, const char *cmd, int argc, char **argv,
                     const cli_option *opts) {
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    p->opts = opts;
    /* ':' first: a missing value is reported as ':' rather than '?', and getopt prints
     * nothing (opterr = 0); the messages are ours. */
    size_t ns = 0, nl = 0;
    p->shorts[ns++] = ':';
    p->shorts[ns++] = 'h';
    p->longs[nl++] = (struct option){"help", no_argument, NULL, 'h'};
    for (const cli_option *o = opts; o->key && nl < CLI_MAX_OPTIONS + 1; o++) {
        if (o->key < 256 && isalnum(o->key)) {
            p->shorts[ns++] = (char)o->key;
            if (o->arg) p->shorts[ns++] = ':';
        }
        if (o->name)
            p->longs[nl++] =
                (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->key};
    }
    p->shorts[ns] = 0;
    optind = 0; /* glibc: start over, whatever a previous parse left */
    opterr = 0;
}

static const cli_option *find_key(const cli_option *opts, int key) {
    for (const cli_option *o = opts; o->key; o++)
        if (o->key == key) return o;
    return key == 'h' ? &help_option : NULL;
}

const char *cli_option_name(const cli_option *opts, int key) {
    static char buf[64];
    const cli_option *o = find_key(opts, key);
    if (!o) return "?";
    if (o->name)
        snprintf(buf, sizeof buf, "--%s", o->name);
    else
        snprintf(buf, sizeof buf, "-%c", o->key);
    return buf;
}

/* Whether "--abc[=v]" is a prefix of two or more long options (getopt_long then refuses it). */
static int ambiguous(const cli_parser *p, const char *bad) {
    if (strncmp(bad, "--", 2) != 0) return 0;
    size_t n = strcspn(bad + 2, "=");
    int matches = 0;
    for (const struct option *o = p->longs; o->name; o++)
        matches += strncmp(o->name, bad + 2, n) == 0;
    return matches > 1;
}

int cli_next(cli_parser *p, const char **arg) {
    *arg = NULL;
    int c = getopt_long(p->argc, p->argv, p->shorts, p->longs, NULL);
    if (c == -1) return CLI_END;
    if (c == 'h') return CLI_HELP;
    if (c == ':')
        return cli_usage_error(p->cmd, "%s needs a value", cli_option_name(p->opts, optopt)),
               CLI_ERROR;
    if (c == '?') {
        const char *bad = p->argv[optind - 1];
        const cli_option *o = optopt ? find_key(p->opts, optopt) : NULL;
        if (o && !o->arg && strncmp(bad, "--", 2) == 0 && strchr(bad, '='))
            cli_usage_error(p->cmd, "--%s takes no value, got \"%s\"", o->name, bad);
        else if (optopt && strncmp(bad, "--", 2) != 0)
            cli_usage_error(p->cmd, "unknown option \"-%c\" (see kvfuzz %s --help)", optopt,
                            p->cmd);
        else if (ambiguous(p, bad))
            cli_usage_error(p->cmd,
                            "\"%s\" is the start of more than one option (see kvfuzz %s --help)",
                            bad, p->cmd);
        else
            cli_usage_error(p->cmd, "unknown option \"%s\" (see kvfuzz %s --help)", bad, p->cmd);
        return CLI_ERROR;
    }
    *arg = optarg;
    return c;
}

int cli_operands(cli_parser *p, char ***operands) {
    *operands = p->argv + optind;
    return optind < p->argc ? p->argc - optind : 0;
}

static int spelled(char *buf, size_t size, const cli_option *o) {
    const int letter = o->key < 256 && isalnum(o->key); /* also a short option */
    if (o->name && letter)
        return snprintf(buf, size, "-%c, --%s%s%s", o->key, o->name, o->arg ? " " : "",
                        o->arg ? o->arg : "");
    if (o->name)
        return snprintf(buf, size, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    return snprintf(buf, size, "-%c%s%s", o->key, o->arg ? " " : "", o->arg ? o->arg : "");
}

static void print_option(FILE *f, const cli_option *o, int col) {
    char name[96];
    spelled(name, sizeof name, o);
    fprintf(f, "  %-*s", col, name);
    for (const char *h = o->help; *h;) {
        const char *nl = strchr(h, '\n');
        int n = nl ? (int)(nl - h) : (int)strlen(h);
        fprintf(f, "%.*s\n", n, h);
        if (!nl) break;
        h = nl + 1;
        fprintf(f, "  %-*s", col, "");
    }
}

void cli_print_options(FILE *f, const cli_option *opts) {
    char name[96];
    int col = spelled(name, sizeof name, &help_option);
    for (const cli_option *o = opts; o->key; o++) {
        int n = spelled(name, sizeof name, o);
        if (n > col) col = n;
    }
    col += 2;
    for (const cli_option *o = opts; o->key; o++)
        print_option(f, o, col);
    print_option(f, &help_option, col);
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
        /* Not for a folder without cases: *paths may still be NULL, which qsort must not get. */
        if (*count > first) qsort(*paths + first, *count - first, sizeof **paths, cmp_str);
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

int cli_read_report(const char *case_path, json_t **report, kvf_error *err) {
    *report = NULL;
    size_t len = strlen(case_path);
    char jpath[4096];
    if (len < 5 || strcmp(case_path + len - 5, ".kvfz") != 0 || len >= sizeof jpath) return 0;
    snprintf(jpath, sizeof jpath, "%.*s.json", (int)(len - 5), case_path);
    struct stat st;
    if (stat(jpath, &st) != 0 && errno == ENOENT) return 0;
    char *text;
    size_t n;
    int rc = kvf_read_file_max(jpath, (size_t)16 << 20, &text, &n, err);
    if (rc) return rc;
    json_error_t je;
    json_t *j = json_loadb(text, n, JSON_DECODE_INT_AS_REAL, &je);
    free(text);
    if (!j)
        return kvf_error_set(err, KVF_EFORMAT, "the report %s is not JSON: %s at line %d", jpath,
                             je.text, je.line);
    if (!json_is_object(j)) {
        json_decref(j);
        return kvf_error_set(err, KVF_EFORMAT, "the report %s is not a JSON object", jpath);
    }
    *report = j;
    return 0;
}

void cli_free_paths(char **paths, size_t count) {
    for (size_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}

void cli_limits(kvf_limits *limits) {
    kvf_limits_default(limits);
    int64_t gib;
    /* main refused a bad value before the command ran, so this reads a valid one or none. */
    if (kvf_env_int("KVF_MAX_POOL_GIB", 0, &gib, NULL) == 0 && gib > 0)
        limits->max_pool_bytes = gib << 30;
}

int cli_kernel_cannot_start(const char *cmd, const char *kernel, const char *reason) {
    /* The runner says "kernel K could not start: ", the buffer host "K could not start: ":
     * the reason is what follows them. */
    char prefix[256];
    for (int pass = 0; pass < 2; pass++) {
        snprintf(prefix, sizeof prefix, "%s%s could not start: ", pass ? "" : "kernel ", kernel);
        if (strncmp(reason, prefix, strlen(prefix)) == 0) reason += strlen(prefix);
    }
    return cli_usage_error(cmd, "kernel %s could not start: %s", kernel, reason);
}

int cli_add_kernel(const char *cmd, const char *spec, kvf_kernel_list *kernels) {
    kvf_error err = {0};
    if (kvf_kernel_resolve_list(spec, kvf_fuzz_kernel_find, kernels, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    return KVF_EXIT_OK;
}

int cli_one_kernel(const char *cmd, const char *spec, const kvf_kernel **kernel) {
    kvf_kernel_list ks = {0};
    if (cli_add_kernel(cmd, spec, &ks)) return KVF_EXIT_USAGE;
    if (ks.count != 1) {
        char names[512] = "";
        size_t at = 0;
        for (size_t i = 0; i < ks.count && at + 2 < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                                   ks.items[i]->name);
        const size_t n = ks.count;
        kvf_kernel_list_free(&ks);
        return cli_usage_error(cmd, "%s holds %zu kernels; this command runs one: name it (%s)",
                               spec, n, names);
    }
    *kernel = ks.items[0];
    free(ks.items);
    return KVF_EXIT_OK;
}
