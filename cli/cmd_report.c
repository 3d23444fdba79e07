/* kvfuzz report: error-distribution reports from stats files (docs/reports.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "kvfuzz/report.h"
#include "kvfuzz/stats.h"

enum { REPORT_FINDINGS = 256, REPORT_MERGE, REPORT_TITLE, REPORT_QUIET };

static const cli_option report_options[] = {
    {NULL, 'o', "DIR",
     "write the report into DIR (created if missing; files replaced\natomically)"},
    {"findings", REPORT_FINDINGS, "DIR",
     "list the findings in DIR (<class>-<hash>.kvfz and .json) with\nlinks; default: the findings "
     "directories the stats recorded"},
    {"merge", REPORT_MERGE, "FILE",
     "merge every STATS into one stats file FILE (atomically); with -o\nthe report then draws the "
     "merged statistics as one input"},
    {"title", REPORT_TITLE, "TEXT", "the page's title (default \"kvfuzz error report\"; needs -o)"},
    {"quiet", REPORT_QUIET, NULL, "no terminal summary (needs -o or --merge: something to write)"},
    {0},
};

static void report_help(void) {
    printf("usage: kvfuzz report [-o DIR] [--findings DIR] [--merge FILE] [--title TEXT]\n"
           "                     [--quiet] [LABEL=]STATS...\n\n"
           "Reads stats files (written by `kvfuzz replay --stats FILE`, or by a fuzz campaign)\n"
           "and shows how each kernel's error is distributed: a short summary on the terminal\n"
           "and, with -o, a report directory:\n"
           "  DIR/index.html    one self-contained page of charts (inline SVG, no network)\n"
           "  DIR/summary.json  key figures per series and rule (keys: docs/reports.md)\n"
           "  DIR/errors.csv    the worst elements the stats kept, with their cases\n"
           "  DIR/cases/        those cases as .kvfz files, when the stats embedded them\n"
           "Every (stats file, kernel) pair is one series; all series are drawn side by side on\n"
           "shared axes. LABEL=STATS names a file's series (default: the label stored in the\n"
           "file, else its name). A STATS that is a folder (a campaign's findings folder) reads\n"
           "every stats*.json in it merged into one input: the campaigns that shared it, on\n"
           "one host or several, with each run's provenance and per-device rates.\n\n");
    cli_print_options(stdout, report_options);
    printf("\nExit status: 0 the report (or merge) was written, whatever it shows; 2 bad input or\n"
           "usage (an unreadable or malformed stats file, an output that cannot be written).\n");
}

int kvf_cmd_report(int argc, char **argv) {
    const char *cmd = "report", *out_dir = NULL, *findings = NULL, *merge_to = NULL;
    const char *title = NULL;
    int quiet = 0;
    int n = 0;
    kvf_report_input *inputs = calloc((size_t)argc, sizeof *inputs);
    kvf_stats **stats = calloc((size_t)argc, sizeof *stats);
    char **labels = calloc((size_t)argc, sizeof *labels);
    int rc = KVF_EXIT_USAGE;
    if (!inputs || !stats || !labels) {
        cli_usage_error(cmd, "out of memory");
        goto done;
    }
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, report_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            report_help();
            rc = KVF_EXIT_OK;
            goto done;
        case CLI_ERROR:
            goto done;
        case 'o':
            out_dir = v;
            break;
        case REPORT_FINDINGS:
            findings = v;
            break;
        case REPORT_MERGE:
            if (cli_opt_stats_path(cmd, "--merge", v)) goto done;
            merge_to = v;
            break;
        case REPORT_TITLE:
            title = v;
            break;
        case REPORT_QUIET:
            quiet = 1;
            break;
        }
    }
    char **rest;
    int nrest = cli_operands(&p, &rest);
    for (int i = 0; i < nrest; i++) {
        /* LABEL=PATH, unless the whole argument names an existing file. */
        const char *a = rest[i];
        struct stat st;
        const char *eq = strchr(a, '=');
        const char *path = a;
        if (eq && eq != a && stat(a, &st) != 0) {
            labels[n] = strndup(a, (size_t)(eq - a));
            path = eq + 1;
        }
        inputs[n].path = path;
        inputs[n].label = labels[n];
        n++;
    }
    /* --quiet with nothing to write would read the stats and show nothing. */
    if (quiet && !out_dir && !merge_to) {
        cli_usage_error(cmd, "--quiet leaves nothing to do without -o DIR or --merge FILE");
        goto done;
    }
    if (title && !out_dir) { /* the terminal summary has no title */
        cli_usage_error(cmd, "--title names the report page: give -o DIR too");
        goto done;
    }
    if (n == 0) {
        cli_usage_error(cmd, "no stats files given (see kvfuzz report --help)");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        kvf_error err = {0};
        if (kvf_stats_read(&stats[i], inputs[i].path, &err)) {
            cli_usage_error(cmd, "%s", err.msg);
            goto done;
        }
        inputs[i].stats = stats[i];
    }
    if (merge_to) {
        kvf_error err = {0};
        for (int i = 1; i < n; i++)
            if (kvf_stats_merge(stats[0], stats[i], &err)) {
                cli_usage_error(cmd, "%s", err.msg);
                goto done;
            }
        if (kvf_stats_write(stats[0], merge_to, &err) && err.code != KVF_ENOMEM) {
            cli_usage_error(cmd, "%s", err.msg);
            goto done;
        }
        if (!quiet) printf("merged %d stats file(s) into %s\n", n, merge_to);
        inputs[0].path = merge_to;
        inputs[0].label = NULL;
        n = 1;
    }
    if (!out_dir && merge_to && quiet) {
        rc = KVF_EXIT_OK;
        goto done;
    }
    kvf_report_opts ro = {out_dir, findings, title, quiet ? NULL : stdout};
    kvf_report_result res = {0};
    kvf_error err = {0};
    if (kvf_report_write(inputs, (size_t)n, &ro, &res, &err)) {
        cli_usage_error(cmd, "%s", err.msg);
        goto done;
    }
    if (out_dir)
        printf("report: %s/index.html (%.1f KiB, %zu series, %zu finding(s), %.2f s)\n", out_dir,
               res.html_bytes / 1024.0, res.series, res.findings, res.seconds);
    rc = KVF_EXIT_OK;
done:
    for (int i = 0; i < argc && stats; i++)
        kvf_stats_free(stats[i]);
    for (int i = 0; i < argc && labels; i++)
        free(labels[i]);
    free(stats);
    free(labels);
    free(inputs);
    return rc;
}
