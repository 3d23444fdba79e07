/* The FlashInfer-Bench dataset of kvfuzz export-fib (fib_dataset.h, docs/fib.md): definitions,
 * workloads, traces and solution records, in the layout FIB's validator reads. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "fib_dataset.h"
#include "kvfuzz/fib.h"
#include "kvfuzz/file.h"
#include "kvfuzz/judge.h"

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

def_lines *fib_dataset_def_for(fib_dataset *ds, const kvf_case *c) {
    char name[160];
    kvf_fib_definition_name(name, sizeof name, c->num_qo_heads, c->num_kv_heads, c->head_dim,
                            c->page_size);
    for (size_t i = 0; i < ds->ndefs; i++)
        if (strcmp(ds->defs[i].name, name) == 0) return &ds->defs[i];
    if (ds->ndefs == MAX_DEFS) return NULL;
    def_lines *d = &ds->defs[ds->ndefs++];
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
    python_escape(r->kernel->name, name, sizeof name);
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
                     r->kernel->device == KVF_DEVICE_CUDA ? "cuda" : "cpu", "entry_point",
                     "main.py::run", "dependencies", "destination_passing_style", 1, "sources",
                     "path", "main.py", "content", source, "description", desc);
}

/* A FIB solution kernel's own record, named and placed as this export holds it (its
 * definition is the one the export writes for the shape). */
static json_t *fib_solution(const solution_rec *r) {
    json_t *j = json_deep_copy(r->solution);
    if (j && (json_object_set_new(j, "name", json_string(r->name)) ||
              json_object_set_new(j, "definition", json_string(r->def->name)) ||
              json_object_set_new(j, "author", json_string(r->author)))) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The record for kernel kern's traces on definition dl, made on first use. Its name is unique in
 * the export (FIB's TraceSet refuses two solutions of one name): a FIB solution keeps its own
 * when it can, a kvfuzz kernel gets kvfuzz-<kernel>-<shape>. */
const solution_rec *fib_dataset_solution_for(fib_dataset *ds, const kvf_kernel *kern,
                                             const json_t *solution, const def_lines *dl) {
    for (size_t i = 0; i < ds->nsolutions; i++)
        if (ds->solutions[i].kernel == kern && ds->solutions[i].def == dl) return &ds->solutions[i];
    if (ds->nsolutions == sizeof ds->solutions / sizeof ds->solutions[0]) return NULL;
    solution_rec *r = &ds->solutions[ds->nsolutions];
    memset(r, 0, sizeof *r);
    r->kernel = kern, r->solution = solution, r->def = dl;
    const char *shape = dl->name + strlen(KVF_FIB_FAMILY "_");
    char want[KVF_ORIGIN_NAME_MAX + 1];
    const char *author = solution ? json_string_value(json_object_get(solution, "author")) : NULL;
    const char *own = solution ? json_string_value(json_object_get(solution, "name")) : NULL;
    snprintf(r->author, sizeof r->author, "%.100s", author && *author ? author : "kvfuzz");
    sanitize(r->author);
    /* A plugin kernel is PATH.so:NAME: its folders would only lengthen the name. */
    const char *kernel = kern->name, *lib = kvf_kernel_plugin_path(kern);
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
        for (size_t i = 0; i < ds->nsolutions && !used; i++)
            used = strcmp(ds->solutions[i].name, r->name) == 0;
        if (!used) break;
        if (k == 1)
            snprintf(r->name, sizeof r->name, "%.90s-%.30s", want, shape);
        else
            snprintf(r->name, sizeof r->name, "%.85s-%.30s-%d", want, shape, k);
    }
    ds->nsolutions++;
    return r;
}

/* The trace file of `author` for definition dl. */
trace_file *fib_dataset_trace_file_for(def_lines *dl, const char *author) {
    for (size_t i = 0; i < dl->ntraces; i++)
        if (strcmp(dl->traces[i].author, author) == 0) return &dl->traces[i];
    if (dl->ntraces == MAX_KERNELS) return NULL;
    trace_file *t = &dl->traces[dl->ntraces++];
    snprintf(t->author, sizeof t->author, "%s", author);
    return t;
}

/* A uuid not used yet in this export: the finding's name for a finding (a fuzzed case is a
 * workload of its own, whatever it was mutated from), the origin's for a case as imported. */
void fib_dataset_pick_uuid(fib_dataset *ds, const kvf_spec *spec, const char *base, int is_finding,
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
        for (size_t i = 0; i < ds->nuuids && !used; i++)
            used = strcmp(ds->uuids[i], out) == 0;
        if (!used) break;
        snprintf(out, n, "%.100s-%d", want, k);
    }
    char **u = realloc(ds->uuids, (ds->nuuids + 1) * sizeof *u);
    if (u) {
        ds->uuids = u;
        if ((u[ds->nuuids] = strdup(out))) ds->nuuids++;
    }
}

/* correctness.extra.kvfuzz: the finding, its kernel, class and signature and, for a run that
 * finished, each rule's verdict, the attribution and the ulp statistics. */
static json_t *trace_extra(const fib_run *run) {
    const kvf_outcome *out = run->out;
    char sig[512];
    uint64_t hash = kvf_outcome_signature(out, run->kernel, sig, sizeof sig);
    char hash_text[32];
    snprintf(hash_text, sizeof hash_text, "%016" PRIx64, hash);
    json_t *extra = json_pack("{s:s, s:s, s:s, s:s, s:s}", "finding", run->finding, "kernel",
                              run->kernel, "class", kvf_finding_class_name(out->finding),
                              "signature", sig, "signature_hash", hash_text);
    /* The class the finding's report recorded: a re-run cannot show every class again (a
     * nondeterminism finding needs two runs). */
    const char *report_class = json_string_value(json_object_get(run->report, "class"));
    if (report_class) json_object_set_new(extra, "report_class", json_string(report_class));
    if (run->spec->has_origin)
        json_object_set_new(extra, "origin",
                            json_pack("{s:s, s:s}", "definition", run->spec->origin.definition,
                                      "workload_uuid", run->spec->origin.workload_uuid));
    if (run->res->status != KVF_RUN_OK) return extra;
    json_t *verdicts = json_array();
    for (int r = 0; r < 3; r++) {
        const kvf_verdict *v = &out->verdicts[r];
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
    json_object_set_new(extra, "attribution", kvf_attribution_json(&out->attribution));
    json_object_set_new(extra, "ulp",
                        json_pack("{s:I, s:I, s:o, s:o}", "o_max_ulps",
                                  (json_int_t)out->verdicts[0].o.max_ulps, "lse_max_ulps",
                                  (json_int_t)out->verdicts[0].lse.max_ulps, "o_bits_of_error",
                                  fib_number(out->verdicts[0].o.bits_of_error), "lse_bits_of_error",
                                  fib_number(out->verdicts[0].lse.bits_of_error)));
    return extra;
}

/* The trace's evaluation: what FIB's evaluator would record for the run. */
static json_t *trace_evaluation(const fib_run *run) {
    const kvf_run_result *res = run->res;
    json_t *extra = trace_extra(run);
    const char *status;
    json_t *correctness = json_null();
    if (res->status == KVF_RUN_OK) {
        /* What FIB's evaluator records, with the correctly rounded result as its reference
         * (docs/fib.md, "Error figures"). */
        kvf_fib_evaluation ev;
        kvf_fib_evaluate(run->c, run->o, run->lse, run->oracle->o_rounded, run->oracle->lse_rounded,
                         &ev);
        status = ev.passed ? "PASSED" : "INCORRECT_NUMERICAL";
        correctness = json_pack("{s:o, s:o, s:{s:o}}", "max_relative_error",
                                fib_number(ev.max_relative_error), "max_absolute_error",
                                fib_number(ev.max_absolute_error), "extra", "kvfuzz", extra);
        extra = NULL;
    } else {
        status = res->status == KVF_RUN_HANG ? "TIMEOUT" : "RUNTIME_ERROR";
    }
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    /* FIB's schema: PASSED carries performance, INCORRECT_NUMERICAL only correctness, other
     * statuses neither (kvfuzz measures no latency: FIB's defaults, 0). */
    json_t *eval = json_pack("{s:s, s:{s:s, s:{}}, s:s, s:s}", "status", status, "environment",
                             "hardware", "kvfuzz", "libs", "timestamp", stamp, "log",
                             res->status == KVF_RUN_OK ? "" : res->message);
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
        json_object_set_new(eval, "log", json_string(x ? x : res->message));
        free(x);
        json_decref(extra);
    }
    return eval;
}

int fib_dataset_add_trace(def_lines *dl, trace_file *tf, const solution_rec *sol, json_t *wl,
                          const fib_run *run) {
    json_t *trace = json_pack("{s:s, s:O, s:s, s:o}", "definition", dl->name, "workload", wl,
                              "solution", sol->name, "evaluation", trace_evaluation(run));
    json_t *wtrace = json_pack("{s:s, s:n, s:O, s:n}", "definition", dl->name, "solution",
                               "workload", wl, "evaluation");
    char *wline = wtrace ? json_dumps(wtrace, JSON_COMPACT) : NULL;
    json_decref(wtrace);
    char *tline = trace ? json_dumps(trace, JSON_COMPACT) : NULL;
    json_decref(trace);
    int rc = !wline || !tline || append(&dl->workloads, &dl->wlen, wline) ||
                     append(&tf->text, &tf->len, tline)
                 ? -1
                 : 0;
    free(wline);
    free(tline);
    return rc;
}

/* Each definition that has workloads (the others' findings were refused): its definition,
 * workloads and traces files. */
static int write_definitions(const fib_dataset *ds, const char *cmd, const char *dir,
                             size_t *ndefs) {
    kvf_error err = {0};
    int rc = KVF_EXIT_OK;
    for (size_t i = 0; i < ds->ndefs && rc == KVF_EXIT_OK; i++) {
        const def_lines *d = &ds->defs[i];
        if (!d->wlen) continue; /* its findings were refused */
        (*ndefs)++;
        char *def = kvf_fib_definition_json(d->hq, d->hk, d->d, d->s);
        if (!def) {
            rc = cli_usage_error(cmd, "out of memory writing definition %s", d->name);
            break;
        }
        if (write_text(dir, "definitions/" KVF_FIB_OP_TYPE, d->name, ".json", def, strlen(def),
                       &err) ||
            write_text(dir, "workloads/" KVF_FIB_OP_TYPE, d->name, ".jsonl", d->workloads, d->wlen,
                       &err))
            rc = cli_usage_error(cmd, "%s", err.msg);
        for (size_t t = 0; t < d->ntraces && rc == KVF_EXIT_OK; t++) {
            char sub[512];
            snprintf(sub, sizeof sub, "traces/%s/" KVF_FIB_OP_TYPE, d->traces[t].author);
            if (d->traces[t].len &&
                write_text(dir, sub, d->name, ".jsonl", d->traces[t].text, d->traces[t].len, &err))
                rc = cli_usage_error(cmd, "%s", err.msg);
        }
        free(def);
    }
    return rc;
}

/* The solution records the traces name (only of definitions that went out). */
static int write_solutions(const fib_dataset *ds, const char *cmd, const char *dir) {
    kvf_error err = {0};
    int rc = KVF_EXIT_OK;
    for (size_t i = 0; i < ds->nsolutions && rc == KVF_EXIT_OK; i++) {
        const solution_rec *r = &ds->solutions[i];
        if (!r->def->wlen) continue;
        json_t *j = r->solution ? fib_solution(r) : kvfuzz_solution(r);
        char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        json_decref(j);
        char sub[512];
        snprintf(sub, sizeof sub, "solutions/%s/" KVF_FIB_OP_TYPE "/%s", r->author, r->def->name);
        if (!text)
            rc = cli_usage_error(cmd, "out of memory writing solution %s", r->name);
        else if (write_text(dir, sub, r->name, ".json", text, strlen(text), &err))
            rc = cli_usage_error(cmd, "%s", err.msg);
        free(text);
    }
    return rc;
}

int fib_dataset_write(const fib_dataset *ds, const char *cmd, const char *dir, size_t *ndefs) {
    *ndefs = 0;
    int rc = write_definitions(ds, cmd, dir, ndefs);
    if (rc == KVF_EXIT_OK) rc = write_solutions(ds, cmd, dir);
    return rc;
}

void fib_dataset_free(fib_dataset *ds) {
    for (size_t i = 0; i < ds->ndefs; i++) {
        free(ds->defs[i].workloads);
        for (size_t t = 0; t < ds->defs[i].ntraces; t++)
            free(ds->defs[i].traces[t].text);
    }
    for (size_t i = 0; i < ds->nuuids; i++)
        free(ds->uuids[i]);
    free(ds->uuids);
}
