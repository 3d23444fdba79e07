/* kvfuzz export-fib: findings into a FlashInfer-Bench dataset that FIB replays (docs/fib.md).
 * Each finding is run again (its kernel, the oracle, the judge under strict, fa and fib) so
 * the trace records what FIB's own check, the fib rule, makes of it. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "kvfuzz/fib.h"
#include "kvfuzz/file.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/spec.h"

static const char *const cmd = "export-fib";

#define MAX_KERNELS 8
#define MAX_DEFS 64

enum { EXPORT_KERNEL = 256, EXPORT_DEADLINE, EXPORT_JOBS, EXPORT_PRECISION };

static const cli_option export_options[] = {
    {"output", 'o', "DIR",
     "the dataset folder (created when absent; files of the same\ndefinitions are replaced)"},
    {"kernel", EXPORT_KERNEL, "K",
     "the kernel to run (default: the one each finding's report names)"},
    {"deadline", EXPORT_DEADLINE, "SEC", "per launch (default 60)"},
    {"jobs", EXPORT_JOBS, "N", "oracle threads (default: all cores)"},
    {"precision", EXPORT_PRECISION, "MODEL", CLI_PRECISION_HELP},
    {0},
};

static void export_help(void) {
    printf(
        "usage: kvfuzz export-fib [--kernel K] [--precision MODEL] [--deadline SEC] [--jobs N]\n"
        "                         -o DIR FINDING...\n\n"
        "Writes findings (.kvfz files, or folders of them, with the .json report `kvfuzz fuzz`\n"
        "saves beside each) as a FlashInfer-Bench dataset in DIR:\n"
        "  definitions/gqa_paged/<def>.json        the definition of the finding's shape\n"
        "  workloads/gqa_paged/<def>.jsonl         one workload per finding\n"
        "  blob/workloads/gqa_paged/<def>/<def>_<uuid>.safetensors\n"
        "                                          every input tensor, q, k_cache and v_cache\n"
        "                                          included (FIB's random inputs are unseeded)\n"
        "  traces/gqa_paged/<def>.jsonl            one trace per finding: its evaluation's\n"
        "                                          correctness.extra.kvfuzz holds kvfuzz's "
        "verdict\n"
        "                                          per rule, the ulp statistics and the signature\n"
        "A finding (a case with a report) goes out under its file name as the uuid; a case as\n"
        "imported from FIB under its workload's uuid.\n"
        "Each finding is run again on its kernel and judged under strict, fa and fib; the line\n"
        "printed for it puts the fib verdict beside strict's, so you know whether FIB's check\n"
        "(fail iff abs > 1e-2 and rel > 1e-2) will see the failure when it replays the dataset\n"
        "(`flashinfer-bench run --local DIR`, with your solution under DIR/solutions/).\n"
        "strict and fa judge within the precision model the kernel declares, or --precision\n"
        "(a FlashInfer-Bench solution declares none); a failing one's attribution is printed\n"
        "and kept in the trace's extra.kvfuzz.attribution (docs/precision.md).\n\n");
    cli_print_options(stdout, export_options);
    printf("\nExit status: 0 the dataset was written, 2 bad input or usage.\n");
}

typedef struct def_lines {
    char name[KVF_ORIGIN_NAME_MAX + 1];
    int32_t hq, hk, d, s;
    char *workloads, *traces; /* JSONL text so far */
    size_t wlen, tlen;
} def_lines;

static int append(char **buf, size_t *len, const char *line) {
    size_t n = strlen(line);
    char *p = realloc(*buf, *len + n + 2);
    if (!p) return -1;
    memcpy(p + *len, line, n);
    p[*len + n] = '\n';
    p[*len + n + 1] = 0;
    *buf = p;
    *len += n + 1;
    return 0;
}

/* FIB writes non-finite errors as the strings "NaN" and "Infinity" (pydantic's
 * ser_json_inf_nan="strings"). */
static json_t *fib_number(double x) {
    if (isnan(x)) return json_string("NaN");
    if (isinf(x)) return json_string(x > 0 ? "Infinity" : "-Infinity");
    return json_real(x);
}

static json_t *metrics_json(const kvf_output_metrics *m) {
    return json_pack("{s:I, s:I, s:o, s:o, s:I, s:o, s:o, s:i}", "elements",
                     (json_int_t)m->elements, "violations", (json_int_t)m->violations, "max_abs",
                     fib_number(m->max_abs), "max_rel", fib_number(m->max_rel_fib), "max_ulps",
                     (json_int_t)m->max_ulps, "bits_of_error", fib_number(m->bits_of_error),
                     "max_margin", fib_number(m->max_margin), "nonfinite_mismatch",
                     m->nonfinite_mismatch);
}

/* What FIB's max errors become when a NaN or an infinity is involved: |a - r| over all
 * elements is NaN when either side is NaN, else infinite. */
static double worst_nonfinite(const kvf_output_metrics *m) {
    for (int i = 0; i < m->worst_count; i++)
        if (isnan(m->worst[i].kernel_value) || isnan(m->worst[i].rounded_value)) return NAN;
    return INFINITY;
}

static const char *verdict_word(const kvf_verdict *v) {
    kvf_verdict_status st = kvf_verdict_status_of(v, 0);
    return st == KVF_VERDICT_PASS                   ? "pass"
           : st == KVF_VERDICT_RULE_REJECTS_ROUNDED ? "benign"
                                                    : kvf_finding_class_name(v->finding);
}

typedef struct kernel_slot {
    const kvf_kernel *kernel;
    kvf_runner *runner;
    char spec[512];
    kvf_rule rules[3]; /* strict and fa within the kernel's precision model, and fib */
} kernel_slot;

static int get_runner(kernel_slot *slots, size_t *n, const char *spec, const kvf_limits *lim,
                      double deadline, const kvf_rule *rules, const char *precision,
                      kernel_slot **out) {
    for (size_t i = 0; i < *n; i++)
        if (strcmp(slots[i].spec, spec) == 0) {
            *out = &slots[i];
            return 0;
        }
    if (*n == MAX_KERNELS)
        return cli_usage_error(cmd, "the findings name more than %d kernels", MAX_KERNELS);
    kernel_slot *s = &slots[*n];
    memset(s, 0, sizeof *s);
    snprintf(s->spec, sizeof s->spec, "%s", spec);
    if (cli_one_kernel(cmd, spec, &s->kernel)) return KVF_EXIT_USAGE;
    /* Each kernel's own copy: findings of several kernels may share one export. */
    if (cli_rules_for_kernel(cmd, s->kernel, precision, rules, 3, s->rules, NULL, NULL)) {
        kvf_kernel_free(s->kernel);
        return KVF_EXIT_USAGE;
    }
    kvf_error err = {0};
    kvf_runner_opts ro = {s->kernel, *lim, deadline, 0, 0, 1};
    if (kvf_runner_create(&s->runner, &ro, &err) || kvf_runner_start(s->runner, &err)) {
        kvf_runner_destroy(s->runner);
        kvf_kernel_free(s->kernel);
        return cli_usage_error(cmd, "kernel %s could not start: %s", spec, err.msg);
    }
    (*n)++;
    *out = s;
    return 0;
}

static void sanitize(char *s) {
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            *s = '-';
}

static int write_text(const char *root, const char *sub, const char *name, const char *ext,
                      const char *text, size_t len, kvf_error *err) {
    char dir[PATH_MAX], path[PATH_MAX + 160];
    snprintf(dir, sizeof dir, "%s/%s/" KVF_FIB_OP_TYPE, root, sub);
    char top[PATH_MAX];
    snprintf(top, sizeof top, "%s/%s", root, sub);
    mkdir(top, 0777);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
    return kvf_write_atomic_bytes(path, text, len, err);
}

/* Whether dir holds no entry but . and .. (1), or cannot be read (0). */
static int folder_is_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

typedef struct export_state {
    const char *out_dir;   /* where files are written: the partial folder */
    const char *shown_dir; /* the dataset folder named by -o, for messages */
    const char *kernel_override;
    const char *precision; /* --precision, or NULL: each kernel's declared model */
    double deadline;
    kvf_limits limits;
    kvf_oracle_opts oopts;
    kvf_rule rules[3]; /* strict, fa, fib, as given (each kernel_slot holds its own) */
    kernel_slot kernels[MAX_KERNELS];
    size_t nkernels;
    def_lines defs[MAX_DEFS];
    size_t ndefs;
    char **uuids;
    size_t nuuids;
} export_state;

static def_lines *def_for(export_state *st, const kvf_case *c) {
    char name[160];
    kvf_fib_definition_name(name, sizeof name, c->num_qo_heads, c->num_kv_heads, c->head_dim,
                            c->page_size);
    for (size_t i = 0; i < st->ndefs; i++)
        if (strcmp(st->defs[i].name, name) == 0) return &st->defs[i];
    if (st->ndefs == MAX_DEFS) return NULL;
    def_lines *d = &st->defs[st->ndefs++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%.128s", name);
    d->hq = c->num_qo_heads, d->hk = c->num_kv_heads, d->d = c->head_dim, d->s = c->page_size;
    return d;
}

/* A uuid not used yet in this export: the finding's name for a finding (a fuzzed case is a
 * workload of its own, whatever it was mutated from), the origin's for a case as imported. */
static void pick_uuid(export_state *st, const kvf_spec *spec, const char *base, int is_finding,
                      char *out, size_t n) {
    char want[KVF_ORIGIN_NAME_MAX + 1];
    if (spec->has_origin && !is_finding) {
        snprintf(want, sizeof want, "%s", spec->origin.workload_uuid);
    } else {
        snprintf(want, sizeof want, "%.*s", (int)(strlen(base) > 5 ? strlen(base) - 5 : 0), base);
        sanitize(want);
        if (!want[0]) snprintf(want, sizeof want, "finding");
    }
    snprintf(out, n, "%s", want);
    for (int k = 2;; k++) {
        int used = 0;
        for (size_t i = 0; i < st->nuuids && !used; i++)
            used = strcmp(st->uuids[i], out) == 0;
        if (!used) break;
        snprintf(out, n, "%.100s-%d", want, k);
    }
    char **u = realloc(st->uuids, (st->nuuids + 1) * sizeof *u);
    if (u) {
        st->uuids = u;
        if ((u[st->nuuids] = strdup(out))) st->nuuids++;
    }
}

static int export_one(export_state *st, const char *path) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    kvf_spec spec;
    kvf_case c;
    kvf_error err = {0};
    if (kvf_case_load(path, &spec, &c, &st->limits, &err))
        return cli_usage_error(cmd, "%s: %s", path, err.msg);
    int rc = KVF_EXIT_OK;
    json_t *report = NULL, *trace = NULL, *wl = NULL;
    char *line = NULL, *tline = NULL;
    kvf_bf16 *o = NULL;
    float *lse = NULL;
    kvf_oracle_result oracle;
    int have_oracle = 0;
    if (cli_read_report(path, &report, &err)) {
        rc = cli_usage_error(cmd, "%s", err.msg);
        goto done;
    }
    const char *kernel = st->kernel_override;
    if (!kernel && report) kernel = json_string_value(json_object_get(report, "kernel"));
    if (!kernel) {
        rc = cli_usage_error(cmd, "%s has no report beside it naming its kernel; give --kernel",
                             path);
        goto done;
    }
    kernel_slot *ks = NULL;
    if ((rc = get_runner(st->kernels, &st->nkernels, kernel, &st->limits, st->deadline, st->rules,
                         st->precision, &ks)))
        goto done;
    def_lines *dl = def_for(st, &c);
    if (!dl) {
        rc = cli_usage_error(cmd, "the findings have more than %d shapes", MAX_DEFS);
        goto done;
    }
    char uuid[KVF_ORIGIN_NAME_MAX + 1];
    pick_uuid(st, &spec, base, report != NULL, uuid, sizeof uuid);
    /* The run and the verdicts. */
    o = malloc((size_t)(kvf_case_o_elems(&c) ? kvf_case_o_elems(&c) : 1) * sizeof *o);
    lse = malloc((size_t)(kvf_case_lse_elems(&c) ? kvf_case_lse_elems(&c) : 1) * sizeof *lse);
    if (!o || !lse) {
        rc = cli_usage_error(cmd, "out of memory for %s", path);
        goto done;
    }
    kvf_run_result res;
    if (kvf_runner_run(ks->runner, &c, o, lse, &res, &err)) {
        res.status = KVF_RUN_KERNEL_ERROR;
        snprintf(res.message, sizeof res.message, "%s", err.msg);
    }
    kvf_outcome out;
    if (res.status == KVF_RUN_OK) {
        if (kvf_oracle_run(&oracle, &c, &st->oopts, &err)) {
            rc = cli_usage_error(cmd, "%s: the oracle failed: %s", path, err.msg);
            goto done;
        }
        have_oracle = 1;
        if (kvf_outcome_judge(&out, ks->rules, 3, 0, &c, &oracle, o, lse, NULL, NULL, &err) ||
            kvf_outcome_attribute(&out, &c, &oracle, o, lse, &err)) {
            rc = cli_usage_error(cmd, "%s: %s", path, err.msg);
            goto done;
        }
    } else {
        kvf_outcome_from_run(&out, res.status, res.message);
    }
    if (kvf_fib_export(st->out_dir, dl->name, uuid, &spec, &c, &line, &err)) {
        rc = cli_usage_error(cmd, "%s: %s", path, err.msg);
        goto done;
    }

    char sig[512];
    uint64_t hash = kvf_outcome_signature(&out, ks->kernel->name, sig, sizeof sig);
    char hash_text[32];
    snprintf(hash_text, sizeof hash_text, "%016" PRIx64, hash);

    json_error_t jerr;
    wl = json_loads(line, 0, &jerr);
    json_t *extra = json_pack("{s:s, s:s, s:s, s:s, s:s}", "finding", base, "kernel",
                              ks->kernel->name, "class", kvf_finding_class_name(out.finding),
                              "signature", sig, "signature_hash", hash_text);
    if (spec.has_origin)
        json_object_set_new(extra, "origin",
                            json_pack("{s:s, s:s}", "definition", spec.origin.definition,
                                      "workload_uuid", spec.origin.workload_uuid));
    const char *status;
    json_t *correctness = json_null();
    if (res.status == KVF_RUN_OK) {
        json_t *verdicts = json_array();
        for (int r = 0; r < 3; r++) {
            const kvf_verdict *v = &out.verdicts[r];
            json_array_append_new(verdicts,
                                  json_pack("{s:s, s:b, s:s, s:s, s:o, s:o}", "rule", v->rule.name,
                                            "pass", v->pass, "status",
                                            kvf_verdict_status_name(kvf_verdict_status_of(v, 0)),
                                            "finding", kvf_finding_class_name(v->finding), "o",
                                            metrics_json(&v->o), "lse", metrics_json(&v->lse)));
        }
        json_object_set_new(extra, "verdicts", verdicts);
        /* The failing strict or fa verdict's precision attribution, as a finding's report
         * holds it (null when there is none). */
        json_object_set_new(extra, "attribution", kvf_attribution_json(&out.attribution));
        json_object_set_new(
            extra, "ulp",
            json_pack("{s:I, s:I, s:o, s:o}", "o_max_ulps", (json_int_t)out.verdicts[0].o.max_ulps,
                      "lse_max_ulps", (json_int_t)out.verdicts[0].lse.max_ulps, "o_bits_of_error",
                      fib_number(out.verdicts[0].o.bits_of_error), "lse_bits_of_error",
                      fib_number(out.verdicts[0].lse.bits_of_error)));
        const kvf_verdict *fib = &out.verdicts[2];
        double abs = fmax(fib->o.max_abs, fib->lse.max_abs);
        double rel = fmax(fib->o.max_rel_fib, fib->lse.max_rel_fib);
        if (fib->o.nonfinite_mismatch || fib->lse.nonfinite_mismatch) {
            abs = rel =
                fib->o.nonfinite_mismatch ? worst_nonfinite(&fib->o) : worst_nonfinite(&fib->lse);
        }
        status = fib->pass ? "PASSED" : "INCORRECT_NUMERICAL";
        correctness = json_pack("{s:o, s:o, s:{s:o}}", "max_relative_error", fib_number(rel),
                                "max_absolute_error", fib_number(abs), "extra", "kvfuzz", extra);
        extra = NULL;
    } else {
        status = res.status == KVF_RUN_HANG ? "TIMEOUT" : "RUNTIME_ERROR";
    }
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char solution[600];
    snprintf(solution, sizeof solution, "kvfuzz:%s", ks->kernel->name);
    /* FIB's schema: PASSED carries performance, INCORRECT_NUMERICAL only correctness, other
     * statuses neither (kvfuzz measures no latency: FIB's defaults, 0). */
    json_t *eval = json_pack("{s:s, s:{s:s, s:{}}, s:s, s:s}", "status", status, "environment",
                             "hardware", "kvfuzz", "libs", "timestamp", stamp, "log",
                             res.status == KVF_RUN_OK ? "" : res.message);
    if (!json_is_null(correctness))
        json_object_set_new(eval, "correctness", correctness);
    else
        json_decref(correctness);
    if (strcmp(status, "PASSED") == 0)
        json_object_set_new(eval, "performance",
                            json_pack("{s:f, s:f, s:f}", "latency_ms", 0.0, "reference_latency_ms",
                                      0.0, "speedup_factor", 0.0));
    if (extra) { /* a run-level finding: the verdict goes into the log's place of extra */
        char *x = json_dumps(extra, JSON_COMPACT);
        json_object_set_new(eval, "log", json_string(x ? x : res.message));
        free(x);
        json_decref(extra);
    }
    trace = json_pack("{s:s, s:O, s:s, s:o}", "definition", dl->name, "workload", wl, "solution",
                      solution, "evaluation", eval);
    json_t *wtrace = json_pack("{s:s, s:n, s:O, s:n}", "definition", dl->name, "solution",
                               "workload", wl, "evaluation");
    char *wline = wtrace ? json_dumps(wtrace, JSON_COMPACT) : NULL;
    json_decref(wtrace);
    tline = trace ? json_dumps(trace, JSON_COMPACT) : NULL;
    if (!wline || !tline || append(&dl->workloads, &dl->wlen, wline) ||
        append(&dl->traces, &dl->tlen, tline)) {
        free(wline);
        rc = cli_usage_error(cmd, "out of memory writing %s", path);
        goto done;
    }
    free(wline);

    const char *strict_word = res.status == KVF_RUN_OK ? verdict_word(&out.verdicts[0])
                                                       : kvf_finding_class_name(out.finding);
    const char *fib_word = res.status == KVF_RUN_OK ? verdict_word(&out.verdicts[2])
                                                    : kvf_finding_class_name(out.finding);
    const char *fa_word = res.status == KVF_RUN_OK ? verdict_word(&out.verdicts[1])
                                                   : kvf_finding_class_name(out.finding);
    int fib_fails = res.status != KVF_RUN_OK || !out.verdicts[2].pass;
    int kvf_fails = res.status != KVF_RUN_OK || !out.verdicts[0].pass || !out.verdicts[1].pass;
    printf("%s (kernel %s): strict %s, fa %s, fib %s: %s\n", base, ks->kernel->name, strict_word,
           fa_word, fib_word,
           fib_fails   ? "FIB reproduces it"
           : kvf_fails ? "FIB will not see it (fib passes)"
                       : "nothing to reproduce (every rule passes)");
    if (res.status == KVF_RUN_OK && out.attribution.kind != KVF_ATTRIB_NONE)
        printf("  attribution (%s): %s\n", out.verdicts[out.rule].rule.name, out.attribution.text);
    printf("  workload %s -> %s/"
           "blob/workloads/" KVF_FIB_OP_TYPE "/%s/%s_%s.safetensors\n",
           uuid, st->shown_dir, dl->name, dl->name, uuid);
done:
    free(line);
    free(tline);
    json_decref(trace);
    json_decref(wl);
    json_decref(report);
    if (have_oracle) kvf_oracle_result_free(&oracle);
    free(o);
    free(lse);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
    return rc;
}

int kvf_cmd_export_fib(int argc, char **argv) {
    static export_state st;
    memset(&st, 0, sizeof st);
    st.deadline = 60;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t jobs = ncpu > 0 ? ncpu : 1;
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, export_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            export_help();
            return KVF_EXIT_OK;
        case CLI_ERROR:
            return KVF_EXIT_USAGE;
        case 'o':
            st.out_dir = v;
            break;
        case EXPORT_KERNEL:
            st.kernel_override = v;
            break;
        case EXPORT_PRECISION:
            if (cli_precision_check(cmd, v)) return KVF_EXIT_USAGE;
            st.precision = v;
            break;
        case EXPORT_DEADLINE:
            if (cli_opt_seconds(cmd, "--deadline", v, 86400, &st.deadline)) return KVF_EXIT_USAGE;
            break;
        case EXPORT_JOBS:
            if (cli_opt_i64(cmd, "--jobs", v, 1, 1024, &jobs)) return KVF_EXIT_USAGE;
            break;
        }
    }
    char **rest;
    int nrest = cli_operands(&p, &rest);
    if (!st.out_dir)
        return cli_usage_error(cmd, "-o DIR is required (see kvfuzz export-fib --help)");
    if (nrest == 0) return cli_usage_error(cmd, "no findings given (see kvfuzz export-fib --help)");
    char **paths;
    size_t npaths;
    if (cli_collect_cases(cmd, rest, nrest, &paths, &npaths)) return KVF_EXIT_USAGE;
    if (npaths == 0) {
        cli_free_paths(paths, npaths);
        return cli_usage_error(cmd, "no .kvfz files found in the given paths");
    }
    /* The dataset is written into a folder beside -o and renamed to it at the end, so a run
     * that fails part way leaves no half dataset, and an existing dataset is never mixed with
     * or overwritten by this one (its workloads files would lose their earlier lines). */
    const char *final_dir = st.out_dir;
    struct stat sb;
    if (stat(final_dir, &sb) == 0 && (!S_ISDIR(sb.st_mode) || !folder_is_empty(final_dir))) {
        cli_free_paths(paths, npaths);
        return cli_usage_error(cmd,
                               "%s exists and is not an empty folder: export-fib writes a new "
                               "dataset (name another -o, or remove it)",
                               final_dir);
    }
    char partial[PATH_MAX];
    if ((size_t)snprintf(partial, sizeof partial, "%s.partial-%ld", final_dir, (long)getpid()) >=
            sizeof partial ||
        mkdir(partial, 0777) != 0) {
        cli_free_paths(paths, npaths);
        return cli_usage_error(cmd, "cannot create the dataset folder %s", final_dir);
    }
    st.out_dir = partial;
    st.shown_dir = final_dir;
    cli_limits(&st.limits);
    kvf_oracle_opts_default(&st.oopts);
    st.oopts.threads = (int)jobs;
    kvf_rule_parse(&st.rules[0], "strict", NULL);
    kvf_rule_parse(&st.rules[1], "fa", NULL);
    kvf_rule_parse(&st.rules[2], "fib", NULL);
    /* A finding that cannot be exported is reported and the others still go out, as replay
     * does with a file it cannot judge; the exit status then says so. */
    int rc = KVF_EXIT_OK;
    size_t refused = 0;
    for (size_t i = 0; i < npaths; i++) {
        if (export_one(&st, paths[i])) refused++;
        fflush(stdout);
    }
    kvf_error err = {0};
    size_t ndefs = 0;
    for (size_t i = 0; i < st.ndefs && rc == KVF_EXIT_OK; i++) {
        def_lines *d = &st.defs[i];
        if (!d->wlen) continue; /* its findings were refused */
        ndefs++;
        char *def = kvf_fib_definition_json(d->hq, d->hk, d->d, d->s);
        if (!def) {
            rc = cli_usage_error(cmd, "out of memory writing definition %s", d->name);
            break;
        }
        if (write_text(st.out_dir, "definitions", d->name, ".json", def, strlen(def), &err) ||
            write_text(st.out_dir, "workloads", d->name, ".jsonl", d->workloads, d->wlen, &err) ||
            write_text(st.out_dir, "traces", d->name, ".jsonl", d->traces, d->tlen, &err))
            rc = cli_usage_error(cmd, "%s", err.msg);
        free(def);
    }
    for (size_t i = 0; i < st.ndefs; i++) {
        free(st.defs[i].workloads);
        free(st.defs[i].traces);
    }
    for (size_t i = 0; i < st.nuuids; i++)
        free(st.uuids[i]);
    free(st.uuids);
    for (size_t i = 0; i < st.nkernels; i++) {
        kvf_runner_destroy(st.kernels[i].runner);
        kvf_kernel_free(st.kernels[i].kernel);
    }
    cli_free_paths(paths, npaths);
    int written = rc == KVF_EXIT_OK && npaths > refused;
    /* An empty folder given as -o is replaced by the dataset. */
    if (written &&
        ((stat(final_dir, &sb) == 0 && rmdir(final_dir) != 0) || rename(partial, final_dir) != 0)) {
        rc =
            cli_usage_error(cmd, "cannot move the dataset into %s: %s", final_dir, strerror(errno));
        written = 0;
    }
    if (!written) (void)kvf_remove_tree(partial);
    if (written)
        printf("\n%zu finding(s) written to %s (%zu definition(s)); replay in FIB with "
               "`flashinfer-bench run --local %s`\n",
               npaths - refused, final_dir, ndefs, final_dir);
    return refused ? KVF_EXIT_USAGE : rc;
}
