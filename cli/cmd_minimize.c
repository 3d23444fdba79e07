/* kvfuzz minimize: shrink a failing case while it keeps failing the same way
 * (fuzz/include/kvfuzz/minimize.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "kvfuzz/minimize.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/test_kernels.h"

enum {
    MIN_KERNEL = 256,
    MIN_RULE,
    MIN_CLASS,
    MIN_JOBS,
    MIN_DEADLINE,
    MIN_MAX_TRIES,
    MIN_TIME,
    MIN_REQUIRE_OVERFLOW,
    MIN_IN_PROCESS,
    MIN_VERBOSE,
    MIN_PRECISION
};

static const cli_option minimize_options[] = {
    {NULL, 'o', "OUT", "where the minimized case goes (written atomically)."},
    {"kernel", MIN_KERNEL, "K",
     "kernel: a built-in name (`kvfuzz kernels`), PATH.so:NAME,\npython:MODULE:FUNCTION or a "
     "solution .json. Default: the\nkernel recorded in the finding's .json."},
    {"rule", MIN_RULE, "R", "the rule that must keep failing (`kvfuzz rules`)."},
    {"precision", MIN_PRECISION, "MODEL", CLI_PRECISION_HELP},
    {"class", MIN_CLASS, "C", "the class to keep (the classes are listed below)."},
    {"jobs", MIN_JOBS, "N", "oracle threads (default: all cores)."},
    {"deadline", MIN_DEADLINE, "SEC",
     "per-launch deadline for hangs (default 10; not with\n--in-process)."},
    {"max-tries", MIN_MAX_TRIES, "N", "candidate runs at most (default 2000)."},
    {"time", MIN_TIME, "SEC", "stop shrinking after SEC seconds (keeping the best so far)."},
    {"require-overflow", MIN_REQUIRE_OVERFLOW, NULL,
     "the overflow class counts (needed to keep it)."},
    {"in-process", MIN_IN_PROCESS, NULL,
     "run the kernel in this process (no deadline, and a crash\nends the run: not for crash or "
     "hang findings)."},
    {"verbose", MIN_VERBOSE, NULL, "print each step kept."},
    {0},
};

/* The classes --class takes, from the finding-class table, wrapped as the help text is. */
static void print_classes(void) {
    printf("\nClasses (--class, docs/design.md section 7):\n ");
    int col = 1;
    for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++) {
        const char *name = kvf_finding_class_name((kvf_finding_class)c);
        const int width = 1 + (int)strlen(name) + 1; /* " name," */
        if (col + width > 80) {
            printf("\n ");
            col = 1;
        }
        printf(" %s%c", name, c + 1 < KVF_FINDING_CLASS_COUNT ? ',' : '.');
        col += width;
    }
    printf("\n");
}

static void minimize_help(void) {
    printf("usage: kvfuzz minimize FILE -o OUT [--kernel K] [--rule R] [--precision MODEL]\n"
           "                       [--class C] [--jobs N] [--deadline SEC] [--max-tries N]\n"
           "                       [--time SEC] [--require-overflow] [--in-process] [--verbose]\n\n"
           "Shrinks a failing case while it keeps failing the same way (same finding class\n"
           "under the same rule, same kernel, and for a strict or fa tolerance finding the same\n"
           "precision attribution: a defect stays a defect, a finding within a looser model\n"
           "stays within that model): fewer sequences, fewer pages and tokens, a\n"
           "smaller shape, simpler values (constants, zeros, fewer distinct values), a simpler\n"
           "page table, fewer overrides. Prints the size before and after and writes OUT.\n"
           "The kernel runs in a worker process, so crashes and hangs minimize too.\n\n"
           "Kernel, rule and class default to those in the finding's report (FILE with .json\n"
           "for .kvfz) when it exists, else to cuda (when a GPU is usable) or cpu-splitkv,\n"
           "strict, and whatever class the case fails with. strict and fa judge under the\n"
           "model the kernel declares unless the rule names one (strict:bf16-p) or --precision\n"
           "is given. The attributions of the input and of the minimized case are printed.\n\n");
    cli_print_options(stdout, minimize_options);
    print_classes();
    printf("\nExit status: 0 written, 2 bad usage, or a case that does not fail as asked.\n");
}

/* The string member `key` of a finding's report, copied into out; NULL when absent. */
static const char *report_field(json_t *report, const char *key, char *out, size_t size) {
    const char *v = json_string_value(json_object_get(report, key));
    if (!v || strlen(v) >= size) return NULL;
    snprintf(out, size, "%s", v);
    return out;
}

/* A class to keep, by its name; "none" is no class to keep. */
static int parse_class(const char *name, kvf_finding_class *out) {
    int c = kvf_finding_class_parse(name);
    if (c <= KVF_FINDING_NONE) return -1;
    *out = (kvf_finding_class)c;
    return 0;
}

/* Whether class cls (may be NULL) is minimized only through a worker process: in this one a
 * crash ends the minimizer with the kernel, and there is no deadline to catch a hang. */
static int needs_worker(const char *cls) {
    const int c = cls ? kvf_finding_class_parse(cls) : -1;
    return c == KVF_FINDING_CRASH || c == KVF_FINDING_HANG;
}

/* The minimized case's size, what it still fails with, and the attribution kept constant. */
static void print_minimized(const kvf_spec *spec, const kvf_minimize_stats *st,
                            const kvf_outcome *outcome) {
    char after[256];
    kvf_spec_size_text(after, sizeof after, spec);
    printf("  after:  %s\n", after);
    printf("  kept %lld of %lld candidate run(s) in %.1f s; still fails: ", (long long)st->accepted,
           (long long)st->tries, st->elapsed_s);
    kvf_outcome_line(stdout, outcome);
    const char *none = "none (only strict and fa tolerance findings are attributed)";
    printf("  attribution of the input:         %s\n",
           st->attribution.kind != KVF_ATTRIB_NONE ? st->attribution.text : none);
    printf("  attribution of the minimized case: %s\n",
           outcome->attribution.kind != KVF_ATTRIB_NONE ? outcome->attribution.text : none);
}

int kvf_cmd_minimize(int argc, char **argv) {
    const char *cmd = "minimize";
    const char *in = NULL, *out = NULL, *kernel = NULL, *rule = NULL, *cls = NULL;
    const char *precision = NULL;
    kvf_minimize_opts o;
    kvf_minimize_opts_default(&o);
    cli_limits(&o.case_limits);
    int deadline_given = 0;
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, minimize_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        int64_t n;
        switch (key) {
        case CLI_HELP:
            minimize_help();
            return KVF_EXIT_OK;
        case CLI_ERROR:
            return KVF_EXIT_USAGE;
        case MIN_REQUIRE_OVERFLOW:
            o.require_overflow = 1;
            break;
        case MIN_IN_PROCESS:
            o.in_process = 1;
            break;
        case MIN_VERBOSE:
            o.verbose = 1;
            break;
        case 'o':
            out = v;
            break;
        case MIN_KERNEL:
            kernel = v;
            break;
        case MIN_RULE:
            rule = v;
            break;
        case MIN_CLASS:
            cls = v;
            break;
        case MIN_PRECISION:
            if (cli_precision_check(cmd, v)) return KVF_EXIT_USAGE;
            precision = v;
            break;
        case MIN_JOBS:
            if (cli_opt_i64(cmd, "--jobs", v, 1, 1024, &n)) return KVF_EXIT_USAGE;
            o.jobs = (int)n;
            break;
        case MIN_MAX_TRIES:
            if (cli_opt_i64(cmd, "--max-tries", v, 1, INT64_MAX, &n)) return KVF_EXIT_USAGE;
            o.max_tries = n;
            break;
        case MIN_DEADLINE:
            if (cli_opt_seconds(cmd, "--deadline", v, 1e9, &o.deadline_s)) return KVF_EXIT_USAGE;
            deadline_given = 1;
            break;
        case MIN_TIME:
            if (cli_opt_seconds(cmd, "--time", v, 1e9, &o.time_limit_s)) return KVF_EXIT_USAGE;
            break;
        }
    }
    char **rest;
    int nrest = cli_operands(&p, &rest);
    if (nrest > 1) return cli_usage_error(cmd, "one case file at a time, got \"%s\" too", rest[1]);
    if (nrest == 1) in = rest[0];
    if (!in) return cli_usage_error(cmd, "no case file given (see kvfuzz minimize --help)");
    if (!out) return cli_usage_error(cmd, "-o OUT is required");
    /* In this process there is no deadline, and a crash ends the minimizer with the kernel. */
    if (o.in_process && deadline_given)
        return cli_usage_error(cmd, "--deadline needs a worker process: not with --in-process");
    if (o.in_process && needs_worker(cls))
        return cli_usage_error(cmd, "a %s finding cannot be minimized --in-process", cls);

    /* Defaults from the finding's report beside the case. */
    char jkernel[4200], jrule[128], jclass[64];
    {
        json_t *report;
        kvf_error rerr = {0};
        if (cli_read_report(in, &report, &rerr)) return cli_usage_error(cmd, "%s", rerr.msg);
        if (report) {
            if (!kernel) {
                kernel = report_field(report, "kernel", jkernel, sizeof jkernel);
                if (kernel && cli_recorded_kernel_present(cmd, kernel)) {
                    json_decref(report);
                    return KVF_EXIT_USAGE;
                }
            }
            if (!rule) rule = report_field(report, "rule", jrule, sizeof jrule);
            if (!cls) cls = report_field(report, "class", jclass, sizeof jclass);
            json_decref(report);
        }
    }
    if (kernel) {
        if (cli_one_kernel(cmd, kernel, &o.kernel)) return KVF_EXIT_USAGE;
    } else {
        char why[256];
        o.kernel = kvf_runner_probe_cuda(why, sizeof why) ? kvf_kernel_find("cuda") : NULL;
        if (!o.kernel) o.kernel = kvf_kernel_find("cpu-splitkv");
    }
    kvf_error err = {0};
    if (rule && kvf_rule_parse(&o.rule, rule, &err)) return cli_usage_error(cmd, "%s", err.msg);
    /* strict and fa judge within the kernel's declared model (or --precision), unless the rule
     * names its own: a finding's report records "strict:bf16-p" when it was found so. */
    const int judges_model = kvf_rule_takes_precision(&o.rule);
    const int rule_names_model = judges_model && !kvf_precision_is_f32(&o.rule.precision);
    kvf_precision model;
    cli_precision_source model_source;
    if (cli_kernel_precision(cmd, o.kernel, precision, &model, &model_source))
        return KVF_EXIT_USAGE;
    kvf_rules_apply_precision(&o.rule, 1, &model);
    if (cls && parse_class(cls, &o.target))
        return cli_usage_error(cmd, "unknown class \"%s\" (see kvfuzz minimize --help)", cls);
    if (o.target == KVF_FINDING_OVERFLOW) o.require_overflow = 1;
    if (o.target == KVF_FINDING_INVARIANCE && cli_finding_relation(in, &o, &err))
        return cli_usage_error(cmd, "%s", err.msg);

    kvf_spec spec;
    if (kvf_case_load(in, &spec, NULL, &o.case_limits, &err))
        return cli_usage_error(cmd, "%s: %s", in, err.msg);
    char before[256];
    kvf_spec_size_text(before, sizeof before, &spec);
    printf("kvfuzz minimize: %s with kernel %s, rule %s\n", in, o.kernel->name, o.rule.name);
    if (judges_model) {
        char mtext[96], mname[KVF_PRECISION_NAME_MAX];
        kvf_precision_name(&o.rule.precision, mname, sizeof mname);
        if (rule_names_model)
            snprintf(mtext, sizeof mtext, "%s (named by the rule)", mname);
        else
            cli_precision_text(&model, model_source, mtext, sizeof mtext);
        printf("  precision model %s\n", mtext);
    }
    printf("  before: %s\n", before);
    fflush(stdout);
    kvf_outcome outcome;
    kvf_minimize_stats st;
    int rc = kvf_minimize(&spec, &o, &outcome, &st, &err);
    if (rc) {
        kvf_spec_free(&spec);
        return cli_usage_error(cmd, "%s: %s", in, err.msg);
    }
    print_minimized(&spec, &st, &outcome);
    rc = kvf_spec_save(&spec, out, &err);
    kvf_spec_free(&spec);
    if (rc) return cli_usage_error(cmd, "%s", err.msg);
    printf("  wrote %s\n", out);
    return KVF_EXIT_OK;
}
