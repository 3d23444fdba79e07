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

#define MAX_KERNELS 32 /* each holds a worker process while the export runs */
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
        "  solutions/<author>/gqa_paged/<def>/<name>.json\n"
        "                                          the kernel's solution record: a FIB solution\n"
        "                                          kernel's own (author and name its own), else\n"
        "                                          kvfuzz's, which names a kvfuzz kernel FIB\n"
        "                                          cannot run (author kvfuzz)\n"
        "  traces/<author>/gqa_paged/<def>.jsonl   one trace per finding, naming that record:\n"
        "                                          what FIB's evaluator would record for the run;\n"
        "                                          correctness.extra.kvfuzz holds kvfuzz's "
        "verdict\n"
        "                                          per rule, the ulp statistics and the signature\n"
        "A finding (a case with a report) goes out under its file name as the uuid; a case as\n"
        "imported from FIB under its workload's uuid. A case without a page-table entry (every\n"
        "sequence empty) is refused: FIB requires every axis, num_kv_indices too, positive.\n"
        "Each finding is run again on its kernel and judged under strict, fa and fib; the line\n"
        "printed for it puts the fib verdict beside strict's, so you know whether FIB's check\n"
        "(fail iff abs > 1e-2 and rel > 1e-2) will see the failure when it replays the dataset\n"
        "(`flashinfer-bench run --local DIR --solutions NAME` for a FIB solution kernel).\n"
        "strict and fa judge within the precision model the kernel declares, or --precision\n"
        "(a FlashInfer-Bench solution declares none); a failing one's attribution is printed\n"
        "and kept in the trace's extra.kvfuzz.attribution (docs/precision.md).\n\n");
    cli_print_options(stdout, export_options);
    printf("\nExit status: 0 the dataset was written, 2 bad input or usage.\n");
}

/* One author's traces of one definition: traces/<author>/gqa_paged/<def>.jsonl, the layout
 * FIB's add_traces writes and its validator reads (it skips any other). */
typedef struct trace_file {
    char author[KVF_ORIGIN_NAME_MAX + 1];
    char *text; /* JSONL so far */
    size_t len;
} trace_file;

typedef struct def_lines {
    char name[KVF_ORIGIN_NAME_MAX + 1];
    int32_t hq, hk, d, s;
    char *workloads; /* JSONL text so far */
    size_t wlen;
    trace_file traces[MAX_KERNELS]; /* one per author: at most one per kernel */
    size_t ntraces;
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

/* FIB writes non-finite errors as the strings "NaN" and "Infinity" (Correctness's
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
    json_t *solution;  /* a FIB solution kernel's own record, as its file holds it; else NULL */
} kernel_slot;

/* A solution record the traces of one kernel on one definition name (FIB resolves a trace's
 * solution by name among solutions/<author>/<op_type>/<def>/<name>.json). */
typedef struct solution_rec {
    const kernel_slot *kernel;
    const def_lines *def;
    char author[KVF_ORIGIN_NAME_MAX + 1];
    char name[KVF_ORIGIN_NAME_MAX + 1];
} solution_rec;

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
    /* A FIB solution (FILE.json) goes into the dataset as it is, so FIB can run it there. */
    size_t len = strlen(spec);
    if (len > 5 && strcmp(spec + len - 5, ".json") == 0) {
        json_t *j = json_load_file(spec, 0, NULL);
        if (json_is_object(j) && json_is_object(json_object_get(j, "spec")) &&
            json_is_array(json_object_get(j, "sources")))
            s->solution = j;
        else
            json_decref(j);
    }
    /* Each kernel's own copy: findings of several kernels may share one export. */
    if (cli_rules_for_kernel(cmd, s->kernel, precision, rules, 3, s->rules, NULL, NULL)) {
        kvf_kernel_free(s->kernel);
        json_decref(s->solution);
        return KVF_EXIT_USAGE;
    }
    kvf_error err = {0};
    kvf_runner_opts ro = {s->kernel, *lim, deadline, 0, 0, 1};
    if (kvf_runner_create(&s->runner, &ro, &err) || kvf_runner_start(s->runner, &err)) {
        kvf_runner_destroy(s->runner);
        kvf_kernel_free(s->kernel);
        json_decref(s->solution);
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

/* Writes root/<sub>/<name><ext> (sub a relative folder, created as needed). */
static int write_text(const char *root, const char *sub, const char *name, const char *ext,
                      const char *text, size_t len, kvf_error *err) {
    char dir[PATH_MAX], path[PATH_MAX + 160];
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, sub) >= sizeof dir)
        return kvf_error_set(err, KVF_EIO, "the dataset path %.80s is too long", root);
    int rc = kvf_mkdirs(dir, err);
    if (rc) return rc;
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
    solution_rec solutions[MAX_DEFS * MAX_KERNELS];
    size_t nsolutions;
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

/* s as a Python string literal's body: backslash and quote escaped, anything outside printable
 * ASCII as \xNN (the name only appears in a message, so a byte is as good as a character). */
static void python_escape(const char *s, char *out, size_t n) {
    size_t at = 0;
    for (; *s && at + 5 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\\' || ch == '"')
            at += (size_t)snprintf(out + at, n - at, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            at += (size_t)snprintf(out + at, n - at, "\\x%02x", ch);
        else
            out[at++] = (char)ch;
    }
    out[at] = 0;
}

/* The record kvfuzz writes for a kernel of its own (built in, or a plugin library): FIB cannot
 * run it, so its one source says so when called, with the definition's signature in
 * destination-passing style; it exists so that the traces name a solution FIB resolves. */
static json_t *kvfuzz_solution(const solution_rec *r) {
    char name[1100], source[2600], desc[1400];
    python_escape(r->kernel->kernel->name, name, sizeof name);
    snprintf(source, sizeof source,
             "# kvfuzz's traces name this solution for the kernel they were recorded on, "
             "KERNEL below.\n"
             "# It runs inside kvfuzz only (built in, or a plugin library kvfuzz loads), so\n"
             "# FlashInfer-Bench cannot run it: replay a finding with\n"
             "# `kvfuzz replay --kernel KERNEL FINDING.kvfz`.\n"
             "KERNEL = \"%s\"\n\n\n"
             "def run(q, k_cache, v_cache, kv_indptr, kv_indices, %ssm_scale, output, lse):\n"
             "    raise NotImplementedError(KERNEL + \" runs inside kvfuzz only; "
             "FlashInfer-Bench cannot run it\")\n",
             name, r->def->s == 1 ? "" : "kv_last_page_len, ");
    snprintf(desc, sizeof desc,
             "kvfuzz's kernel %s, which runs inside kvfuzz only: this record names the kernel "
             "kvfuzz's traces were recorded on (calling it raises NotImplementedError).",
             name);
    return json_pack("{s:s, s:s, s:s, s:{s:s, s:[s], s:s, s:[], s:b}, s:[{s:s, s:s}], s:s}", "name",
                     r->name, "definition", r->def->name, "author", r->author, "spec", "language",
                     "python", "target_hardware",
                     r->kernel->kernel->device == KVF_DEVICE_CUDA ? "cuda" : "cpu", "entry_point",
                     "main.py::run", "dependencies", "destination_passing_style", 1, "sources",
                     "path", "main.py", "content", source, "description", desc);
}

/* A FIB solution kernel's own record, named and placed as this export holds it (its
 * definition is the one the export writes for the shape). */
static json_t *fib_solution(const solution_rec *r) {
    json_t *j = json_deep_copy(r->kernel->solution);
    if (j && (json_object_set_new(j, "name", json_string(r->name)) ||
              json_object_set_new(j, "definition", json_string(r->def->name)) ||
              json_object_set_new(j, "author", json_string(r->author)))) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The record for kernel ks's traces on definition dl, made on first use. Its name is unique in
 * the export (FIB's TraceSet refuses two solutions of one name): a FIB solution keeps its own
 * when it can, a kvfuzz kernel gets kvfuzz-<kernel>-<shape>. */
static const solution_rec *solution_for(export_state *st, const kernel_slot *ks,
                                        const def_lines *dl) {
    for (size_t i = 0; i < st->nsolutions; i++)
        if (st->solutions[i].kernel == ks && st->solutions[i].def == dl) return &st->solutions[i];
    if (st->nsolutions == sizeof st->solutions / sizeof st->solutions[0]) return NULL;
    solution_rec *r = &st->solutions[st->nsolutions];
    memset(r, 0, sizeof *r);
    r->kernel = ks, r->def = dl;
    const char *shape = dl->name + strlen(KVF_FIB_FAMILY "_");
    char want[KVF_ORIGIN_NAME_MAX + 1];
    const char *author =
        ks->solution ? json_string_value(json_object_get(ks->solution, "author")) : NULL;
    const char *own =
        ks->solution ? json_string_value(json_object_get(ks->solution, "name")) : NULL;
    snprintf(r->author, sizeof r->author, "%.100s", author && *author ? author : "kvfuzz");
    sanitize(r->author);
    /* A plugin kernel is PATH.so:NAME: its folders would only lengthen the name. */
    const char *kernel = ks->kernel->name, *lib = kvf_kernel_plugin_path(ks->kernel);
    if (lib && strncmp(kernel, lib, strlen(lib)) == 0 && strrchr(lib, '/'))
        kernel += strrchr(lib, '/') - lib + 1;
    if (own && *own)
        snprintf(want, sizeof want, "%.100s", own);
    else
        snprintf(want, sizeof want, "kvfuzz-%.90s-%.30s", kernel, shape);
    sanitize(want);
    snprintf(r->name, sizeof r->name, "%s", want);
    for (int k = 1;; k++) {
        int used = 0;
        for (size_t i = 0; i < st->nsolutions && !used; i++)
            used = strcmp(st->solutions[i].name, r->name) == 0;
        if (!used) break;
        if (k == 1)
            snprintf(r->name, sizeof r->name, "%.90s-%.30s", want, shape);
        else
            snprintf(r->name, sizeof r->name, "%.85s-%.30s-%d", want, shape, k);
    }
    st->nsolutions++;
    return r;
}

/* The trace file of `author` for definition dl. */
static trace_file *trace_file_for(def_lines *dl, const char *author) {
    for (size_t i = 0; i < dl->ntraces; i++)
        if (strcmp(dl->traces[i].author, author) == 0) return &dl->traces[i];
    if (dl->ntraces == MAX_KERNELS) return NULL;
    trace_file *t = &dl->traces[dl->ntraces++];
    snprintf(t->author, sizeof t->author, "%s", author);
    return t;
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
    /* A case FIB cannot hold is refused before it is run. */
    if (kvf_fib_check_exportable(&c, &err)) {
        rc = cli_usage_error(cmd, "%s: %s", path, err.msg);
        goto done;
    }
    def_lines *dl = def_for(st, &c);
    const solution_rec *sol = dl ? solution_for(st, ks, dl) : NULL;
    trace_file *tf = sol ? trace_file_for(dl, sol->author) : NULL;
    if (!dl || !sol || !tf) {
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
    /* The class the finding's report recorded: a re-run cannot show every class again (a
     * nondeterminism finding needs two runs). */
    const char *report_class = json_string_value(json_object_get(report, "class"));
    if (report_class) json_object_set_new(extra, "report_class", json_string(report_class));
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
        /* What FIB's evaluator records, with the correctly rounded result as its reference
         * (docs/fib.md, "Error figures"). */
        kvf_fib_evaluation ev;
        kvf_fib_evaluate(&c, o, lse, oracle.o_rounded, oracle.lse_rounded, &ev);
        status = ev.passed ? "PASSED" : "INCORRECT_NUMERICAL";
        correctness = json_pack("{s:o, s:o, s:{s:o}}", "max_relative_error",
                                fib_number(ev.max_relative_error), "max_absolute_error",
                                fib_number(ev.max_absolute_error), "extra", "kvfuzz", extra);
        extra = NULL;
    } else {
        status = res.status == KVF_RUN_HANG ? "TIMEOUT" : "RUNTIME_ERROR";
    }
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
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
                      sol->name, "evaluation", eval);
    json_t *wtrace = json_pack("{s:s, s:n, s:O, s:n}", "definition", dl->name, "solution",
                               "workload", wl, "evaluation");
    char *wline = wtrace ? json_dumps(wtrace, JSON_COMPACT) : NULL;
    json_decref(wtrace);
    tline = trace ? json_dumps(trace, JSON_COMPACT) : NULL;
    if (!wline || !tline || append(&dl->workloads, &dl->wlen, wline) ||
        append(&tf->text, &tf->len, tline)) {
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
    /* fib fails only where the kernel is bit for bit right: the -inf lse of an empty sequence,
     * which FIB's check fails in every kernel. Its INCORRECT_NUMERICAL says nothing of a
     * defect. */
    int wrong_reason = res.status == KVF_RUN_OK && kvf_verdict_status_of(&out.verdicts[2], 0) ==
                                                       KVF_VERDICT_RULE_REJECTS_ROUNDED;
    int empty_seq = 0;
    for (int32_t b = 0; b < c.batch_size && !empty_seq; b++)
        empty_seq = c.kv_indptr[b + 1] == c.kv_indptr[b];
    const char *why = empty_seq ? "its check fails the -inf lse of an empty sequence, which is "
                                  "correct, in every kernel"
                                : "every element its check fails is one the kernel got bit for "
                                  "bit right";
    printf("%s (kernel %s): strict %s, fa %s, fib %s: ", base, ks->kernel->name, strict_word,
           fa_word, fib_word);
    if (wrong_reason)
        printf("FIB flags it for the wrong reason (%s)%s\n", why,
               kvf_fails ? "; the defect itself passes FIB's check" : "");
    else
        printf("%s\n", fib_fails   ? "FIB reproduces it"
                       : kvf_fails ? "FIB will not see it (fib passes)"
                                   : "nothing to reproduce (every rule passes)");
    if (res.status == KVF_RUN_OK && out.attribution.kind != KVF_ATTRIB_NONE)
        printf("  attribution (%s): %s\n", out.verdicts[out.rule].rule.name, out.attribution.text);
    printf("  workload %s -> %s/"
           "blob/workloads/" KVF_FIB_OP_TYPE "/%s/%s_%s.safetensors, trace of solution %s\n",
           uuid, st->shown_dir, dl->name, dl->name, uuid, sol->name);
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
        if (write_text(st.out_dir, "definitions/" KVF_FIB_OP_TYPE, d->name, ".json", def,
                       strlen(def), &err) ||
            write_text(st.out_dir, "workloads/" KVF_FIB_OP_TYPE, d->name, ".jsonl", d->workloads,
                       d->wlen, &err))
            rc = cli_usage_error(cmd, "%s", err.msg);
        for (size_t t = 0; t < d->ntraces && rc == KVF_EXIT_OK; t++) {
            char sub[512];
            snprintf(sub, sizeof sub, "traces/%s/" KVF_FIB_OP_TYPE, d->traces[t].author);
            if (d->traces[t].len && write_text(st.out_dir, sub, d->name, ".jsonl",
                                               d->traces[t].text, d->traces[t].len, &err))
                rc = cli_usage_error(cmd, "%s", err.msg);
        }
        free(def);
    }
    /* The solution records the traces name (only of definitions that went out). */
    for (size_t i = 0; i < st.nsolutions && rc == KVF_EXIT_OK; i++) {
        const solution_rec *r = &st.solutions[i];
        if (!r->def->wlen) continue;
        json_t *j = r->kernel->solution ? fib_solution(r) : kvfuzz_solution(r);
        char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        json_decref(j);
        char sub[512];
        snprintf(sub, sizeof sub, "solutions/%s/" KVF_FIB_OP_TYPE "/%s", r->author, r->def->name);
        if (!text)
            rc = cli_usage_error(cmd, "out of memory writing solution %s", r->name);
        else if (write_text(st.out_dir, sub, r->name, ".json", text, strlen(text), &err))
            rc = cli_usage_error(cmd, "%s", err.msg);
        free(text);
    }
    for (size_t i = 0; i < st.ndefs; i++) {
        free(st.defs[i].workloads);
        for (size_t t = 0; t < st.defs[i].ntraces; t++)
            free(st.defs[i].traces[t].text);
    }
    for (size_t i = 0; i < st.nuuids; i++)
        free(st.uuids[i]);
    free(st.uuids);
    for (size_t i = 0; i < st.nkernels; i++) {
        kvf_runner_destroy(st.kernels[i].runner);
        kvf_kernel_free(st.kernels[i].kernel);
        json_decref(st.kernels[i].solution);
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
        printf("\n%zu finding(s) written to %s (%zu definition(s)); FIB's validate_dataset reads "
               "it, and `flashinfer-bench run --local %s --solutions NAME` replays a FIB "
               "solution's findings (kvfuzz's own kernels run only in kvfuzz)\n",
               npaths - refused, final_dir, ndefs, final_dir);
    return refused ? KVF_EXIT_USAGE : rc;
}
