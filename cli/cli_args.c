/* The commands' shared argument handling (cli.h): usage errors, strict numbers, and the
 * option tables with their parser and --help listing. */
#include <math.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvfuzz/env.h"

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

int cli_opt_scale(const char *cmd, const char *opt, const char *text, double *out) {
    double v;
    if (kvf_parse_double(text, &v) || !(v > 0) || !isfinite((float)v) || (float)v == 0)
        return cli_usage_error(cmd,
                               "%s must be a positive decimal number within the f32 range (such "
                               "as 0.375 or 2e-3), got \"%s\"",
                               opt, text);
    *out = (double)(float)v;
    return KVF_EXIT_OK;
}

int cli_opt_stats_path(const char *cmd, const char *opt, const char *path) {
    const size_t len = strlen(path);
    if (len >= 5 && strcmp(path + len - 5, ".kvfz") == 0)
        return cli_usage_error(cmd,
                               "%s %s names a case file (.kvfz): writing the statistics would "
                               "replace it; give a .json name",
                               opt, path);
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

void cli_parser_repeatable(cli_parser *p, int key) {
    if (p->nrepeatable < (int)(sizeof p->repeatable / sizeof p->repeatable[0]))
        p->repeatable[p->nrepeatable++] = key;
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
    const cli_option *o = find_key(p->opts, c);
    const ptrdiff_t at = o && o != &help_option ? o - p->opts : -1;
    int repeatable = 0;
    for (int i = 0; i < p->nrepeatable; i++)
        repeatable |= p->repeatable[i] == c;
    if (o && o->arg && !repeatable && at >= 0 && at < CLI_MAX_OPTIONS) {
        if (p->seen[at])
            return cli_usage_error(p->cmd, "%s is given twice; it takes one value",
                                   cli_option_name(p->opts, c)),
                   CLI_ERROR;
        p->seen[at] = 1;
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

int cli_relations_parse(const char *cmd, const char *text, unsigned *mask) {
    kvf_error err = {0};
    if (kvf_relation_set_parse(text, "list", 0, mask, &err))
        return cli_usage_error(cmd, "--relations: %s", err.msg);
    if (!*mask) return cli_usage_error(cmd, "--relations needs at least one relation (or all)");
    return 0;
}
