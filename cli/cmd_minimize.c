/* kvfuzz minimize: shrink a failing case while it keeps failing the same way
 * (fuzz/include/kvfuzz/minimize.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvfuzz/file.h"
#include "kvfuzz/minimize.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/test_kernels.h"

static void minimize_help(void) {
    printf("usage: kvfuzz minimize FILE -o OUT [--kernel K] [--rule R] [--class C] [--jobs N]\n"
           "                       [--deadline SEC] [--max-tries N] [--time SEC]\n"
           "                       [--require-overflow] [--in-process] [--verbose]\n\n"
           "Shrinks a failing case while it keeps failing the same way (same finding class\n"
           "under the same rule, same kernel): fewer sequences, fewer pages and tokens, a\n"
           "smaller shape, simpler values (constants, zeros, fewer distinct values), a simpler\n"
           "page table, fewer overrides. Prints the size before and after and writes OUT.\n"
           "The kernel runs in a worker process, so crashes and hangs minimize too.\n\n"
           "Kernel, rule and class default to those in the finding's report (FILE with .json\n"
           "for .kvfz) when it exists, else to cuda (when a GPU is usable) or cpu-splitkv,\n"
           "strict, and whatever class the case fails with.\n\n"
           "  -o OUT              where the minimized case goes (written atomically).\n"
           "  --kernel K          kernel: a built-in name (`kvfuzz kernels`), PATH.so:NAME,\n"
           "                      python:MODULE:FUNCTION or a solution .json. Default: the\n"
           "                      kernel recorded in the finding's .json.\n"
           "  --rule R            the rule that must keep failing (`kvfuzz rules`).\n"
           "  --class C           the class to keep: nonfinite, o-tolerance, lse-tolerance,\n"
           "                      overflow, kernel-error, crash, hang, nondeterminism.\n"
           "  --jobs N            oracle threads (default: all cores).\n"
           "  --deadline SEC      per-launch deadline for hangs (default 10).\n"
           "  --max-tries N       candidate runs at most (default 2000).\n"
           "  --time SEC          stop shrinking after SEC seconds (keeping the best so far).\n"
           "  --require-overflow  the overflow class counts (needed to keep it).\n"
           "  --in-process        run the kernel in this process.\n"
           "  --verbose           print each step kept.\n\n"
           "Exit status: 0 written, 2 bad usage, or a case that does not fail as asked.\n");
}

/* The value of "key": "..." in a small JSON report; NULL when absent or null. */
static char *json_field(const char *json, const char *key, char *out, size_t size) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(json, pat);
    if (!p) return NULL;
    p += strlen(pat);
    const char *end = strchr(p, '"');
    if (!end || (size_t)(end - p) >= size) return NULL;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = 0;
    return out;
}

static int parse_class(const char *name, kvf_finding_class *out) {
    for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
        if (strcmp(name, kvf_finding_class_name((kvf_finding_class)c)) == 0) {
            *out = (kvf_finding_class)c;
            return 0;
        }
    return -1;
}

int kvf_cmd_minimize(int argc, char **argv) {
    const char *cmd = "minimize";
    const char *in = NULL, *out = NULL, *kernel = NULL, *rule = NULL, *cls = NULL;
    kvf_minimize_opts o;
    kvf_minimize_opts_default(&o);
    cli_limits(&o.case_limits);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            minimize_help();
            return KVF_EXIT_OK;
        } else if (strcmp(a, "--require-overflow") == 0) {
            o.require_overflow = 1;
        } else if (strcmp(a, "--in-process") == 0) {
            o.in_process = 1;
        } else if (strcmp(a, "--verbose") == 0) {
            o.verbose = 1;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--kernel") == 0 || strcmp(a, "--rule") == 0 ||
                   strcmp(a, "--class") == 0 || strcmp(a, "--jobs") == 0 ||
                   strcmp(a, "--deadline") == 0 || strcmp(a, "--max-tries") == 0 ||
                   strcmp(a, "--time") == 0) {
            if (i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a);
            const char *v = argv[++i];
            int64_t n;
            if (strcmp(a, "-o") == 0) {
                out = v;
            } else if (strcmp(a, "--kernel") == 0) {
                kernel = v;
            } else if (strcmp(a, "--rule") == 0) {
                rule = v;
            } else if (strcmp(a, "--class") == 0) {
                cls = v;
            } else if (strcmp(a, "--jobs") == 0) {
                if (cli_parse_i64(v, 1, 1024, &n))
                    return cli_usage_error(cmd,
                                           "--jobs must be an integer in [1, 1024], got \"%s\"", v);
                o.jobs = (int)n;
            } else if (strcmp(a, "--max-tries") == 0) {
                if (cli_parse_i64(v, 1, INT64_MAX, &n))
                    return cli_usage_error(cmd,
                                           "--max-tries must be a positive integer, got \"%s\"", v);
                o.max_tries = n;
            } else {
                double s;
                if (cli_parse_double(v, &s) || !(s > 0) || s > 1e9)
                    return cli_usage_error(
                        cmd, "%s must be a positive number of seconds, got \"%s\"", a, v);
                if (strcmp(a, "--deadline") == 0)
                    o.deadline_s = s;
                else
                    o.time_limit_s = s;
            }
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error(cmd, "unknown option \"%s\" (see kvfuzz minimize --help)", a);
        } else if (!in) {
            in = a;
        } else {
            return cli_usage_error(cmd, "one case file at a time, got \"%s\" too", a);
        }
    }
    if (!in) return cli_usage_error(cmd, "no case file given (see kvfuzz minimize --help)");
    if (!out) return cli_usage_error(cmd, "-o OUT is required");

    /* Defaults from the finding's report beside the case. */
    char jpath[4096], jkernel[4200], jrule[128], jclass[64];
    size_t len = strlen(in);
    if (len > 5 && strcmp(in + len - 5, ".kvfz") == 0 && len < sizeof jpath) {
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)(len - 5), in);
        char *json;
        size_t json_size;
        if (kvf_read_file(jpath, &json, &json_size) == 0) {
            if (!kernel) kernel = json_field(json, "kernel", jkernel, sizeof jkernel);
            if (!rule) rule = json_field(json, "rule", jrule, sizeof jrule);
            if (!cls) cls = json_field(json, "class", jclass, sizeof jclass);
            free(json);
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
    if (cls && parse_class(cls, &o.target))
        return cli_usage_error(cmd, "unknown class \"%s\" (see kvfuzz minimize --help)", cls);
    if (o.target == KVF_FINDING_OVERFLOW) o.require_overflow = 1;

    kvf_spec spec;
    if (kvf_case_load(in, &spec, NULL, &o.case_limits, &err))
        return cli_usage_error(cmd, "%s: %s", in, err.msg);
    char before[256], after[256];
    kvf_spec_size_text(before, sizeof before, &spec);
    printf("kvfuzz minimize: %s with kernel %s, rule %s\n", in, o.kernel->name, o.rule.name);
    printf("  before: %s\n", before);
    fflush(stdout);
    kvf_outcome outcome;
    kvf_minimize_stats st;
    int rc = kvf_minimize(&spec, &o, &outcome, &st, &err);
    if (rc) {
        kvf_spec_free(&spec);
        return cli_usage_error(cmd, "%s: %s", in, err.msg);
    }
    kvf_spec_size_text(after, sizeof after, &spec);
    printf("  after:  %s\n", after);
    printf("  kept %lld of %lld candidate run(s) in %.1f s; still fails: ", (long long)st.accepted,
           (long long)st.tries, st.elapsed_s);
    kvf_outcome_line(stdout, &outcome);
    rc = kvf_spec_save(&spec, out, &err);
    kvf_spec_free(&spec);
    if (rc) return cli_usage_error(cmd, "%s", err.msg);
    printf("  wrote %s\n", out);
    return KVF_EXIT_OK;
}
