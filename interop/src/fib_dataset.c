/* A FlashInfer-Bench dataset built in memory (kvfuzz/fib_dataset.h, docs/fib.md): its
 * definitions, solution records, uuids, workloads and traces. Writing it is fib_dataset_write.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvfuzz/fib_dataset.h"
#include "kvfuzz/file.h"
#include "kvfuzz/json_io.h"

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

/* Names that become file names keep letters, digits, '_', '.' and '-'; anything else is '-'. */
static void sanitize(char *s) {
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            *s = '-';
}

kvf_fib_def *kvf_fib_dataset_def_for(kvf_fib_dataset *ds, const kvf_case *c) {
    char name[160];
    const int kv_dtype = kvf_kv_quant_is_plain(&c->quant) ? KVF_KV_BF16 : c->quant.k_dtype;
    kvf_fib_definition_name(name, sizeof name, c->num_qo_heads, c->num_kv_heads, c->head_dim,
                            c->page_size, kv_dtype);
    for (size_t i = 0; i < ds->ndefs; i++)
        if (strcmp(ds->defs[i].name, name) == 0) return &ds->defs[i];
    if (ds->ndefs == KVF_FIB_MAX_DEFS) return NULL;
    kvf_fib_def *d = &ds->defs[ds->ndefs++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%.128s", name);
    d->hq = c->num_qo_heads, d->hk = c->num_kv_heads, d->d = c->head_dim, d->s = c->page_size;
    d->kv_dtype = kv_dtype;
    return d;
}

const kvf_fib_solution *kvf_fib_dataset_solution_for(kvf_fib_dataset *ds,
                                                     const kvf_fib_kernel_ref *k,
                                                     const kvf_fib_def *def) {
    for (size_t i = 0; i < ds->nsolutions; i++)
        if (ds->solutions[i].kernel.id == k->id && ds->solutions[i].def == def)
            return &ds->solutions[i];
    if (ds->nsolutions == sizeof ds->solutions / sizeof ds->solutions[0]) return NULL;
    kvf_fib_solution *r = &ds->solutions[ds->nsolutions];
    memset(r, 0, sizeof *r);
    r->kernel = *k, r->def = def;
    const char *shape = def->name + strlen(KVF_FIB_FAMILY "_");
    char want[KVF_ORIGIN_NAME_MAX + 1];
    const json_t *sol = k->solution;
    const char *author = sol ? json_string_value(json_object_get(sol, "author")) : NULL;
    const char *own = sol ? json_string_value(json_object_get(sol, "name")) : NULL;
    snprintf(r->author, sizeof r->author, "%.100s", author && *author ? author : "kvfuzz");
    sanitize(r->author);
    /* A plugin kernel is PATH.so:NAME: its folders would only lengthen the name. */
    const char *kernel = k->name, *lib = k->plugin_path;
    if (lib && strncmp(kernel, lib, strlen(lib)) == 0 && strrchr(lib, '/'))
        kernel += strrchr(lib, '/') - lib + 1;
    if (own && *own)
        snprintf(want, sizeof want, "%.100s", own);
    else
        snprintf(want, sizeof want, "kvfuzz-%.90s-%.30s", kernel, shape);
    sanitize(want);
    snprintf(r->name, sizeof r->name, "%s", want);
    for (int n = 1;; n++) {
        int used = 0;
        for (size_t i = 0; i < ds->nsolutions && !used; i++)
            used = strcmp(ds->solutions[i].name, r->name) == 0;
        if (!used) break;
        if (n == 1)
            snprintf(r->name, sizeof r->name, "%.90s-%.30s", want, shape);
        else
            snprintf(r->name, sizeof r->name, "%.85s-%.30s-%d", want, shape, n);
    }
    ds->nsolutions++;
    return r;
}

kvf_fib_trace_file *kvf_fib_dataset_trace_file_for(kvf_fib_def *def, const char *author) {
    for (size_t i = 0; i < def->ntraces; i++)
        if (strcmp(def->traces[i].author, author) == 0) return &def->traces[i];
    if (def->ntraces == KVF_FIB_MAX_KERNELS) return NULL;
    kvf_fib_trace_file *t = &def->traces[def->ntraces++];
    snprintf(t->author, sizeof t->author, "%s", author);
    return t;
}

void kvf_fib_dataset_pick_uuid(kvf_fib_dataset *ds, const kvf_spec *spec, const char *base,
                               int is_finding, char *out, size_t n) {
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

int kvf_fib_dataset_add_trace(kvf_fib_def *def, kvf_fib_trace_file *tf, const kvf_fib_solution *sol,
                              const json_t *workload, json_t *evaluation, kvf_error *err) {
    json_t *wl = (json_t *)workload; /* "O" only adds a reference */
    json_t *trace = json_pack("{s:s, s:O, s:s, s:o}", "definition", def->name, "workload", wl,
                              "solution", sol->name, "evaluation", evaluation);
    json_t *wtrace = json_pack("{s:s, s:n, s:O, s:n}", "definition", def->name, "solution",
                               "workload", wl, "evaluation");
    char *wline = wtrace ? json_dumps(wtrace, JSON_COMPACT) : NULL;
    json_decref(wtrace);
    char *tline = trace ? json_dumps(trace, JSON_COMPACT) : NULL;
    json_decref(trace);
    int bad = !wline || !tline || append(&def->workloads, &def->wlen, wline) ||
              append(&tf->text, &tf->len, tline);
    free(wline);
    free(tline);
    return bad ? kvf_error_set(err, KVF_ENOMEM, "out of memory for the trace") : 0;
}

json_t *kvf_fib_trace_evaluation(const kvf_fib_trace_run *run, json_t *extra) {
    const char *status;
    json_t *correctness = NULL;
    if (run->end == KVF_FIB_RUN_OK) {
        /* What FIB's evaluator records, with the correctly rounded result as its reference
         * (docs/fib.md, "Error figures"). */
        kvf_fib_evaluation ev;
        kvf_fib_evaluate(run->c, run->o, run->lse, run->ref_o, run->ref_lse, &ev);
        status = ev.passed ? "PASSED" : "INCORRECT_NUMERICAL";
        correctness = json_pack("{s:o, s:o, s:{s:o}}", "max_relative_error",
                                kvf_json_number(ev.max_relative_error), "max_absolute_error",
                                kvf_json_number(ev.max_absolute_error), "extra", "kvfuzz",
                                extra ? extra : json_null());
        extra = NULL;
    } else {
        status = run->end == KVF_FIB_RUN_TIMEOUT ? "TIMEOUT" : "RUNTIME_ERROR";
    }
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    /* FIB's schema: PASSED carries performance, INCORRECT_NUMERICAL only correctness, other
     * statuses neither (kvfuzz measures no latency: FIB's defaults, 0). */
    json_t *eval = json_pack("{s:s, s:{s:s, s:{}}, s:s, s:s}", "status", status, "environment",
                             "hardware", "kvfuzz", "libs", "timestamp", stamp, "log",
                             run->end == KVF_FIB_RUN_OK ? "" : run->log);
    if (correctness) json_object_set_new(eval, "correctness", correctness);
    if (strcmp(status, "PASSED") == 0)
        json_object_set_new(eval, "performance",
                            json_pack("{s:f, s:f, s:f}", "latency_ms", 0.0, "reference_latency_ms",
                                      0.0, "speedup_factor", 0.0));
    if (extra) { /* a run-level finding: the verdict goes into the log's place of extra */
        char *x = json_dumps(extra, JSON_COMPACT);
        json_object_set_new(eval, "log", json_string(x ? x : run->log));
        free(x);
        json_decref(extra);
    }
    return eval;
}

json_t *kvf_fib_solution_record(const char *kernel) {
    size_t len = strlen(kernel);
    if (len <= 5 || strcmp(kernel + len - 5, ".json") != 0) return NULL;
    /* Through the bounded reader: a FIFO of that name must not block. */
    char *text = NULL;
    size_t n = 0;
    kvf_error err = {0};
    if (kvf_read_file_max(kernel, (size_t)64 << 20, &text, &n, &err)) return NULL;
    json_t *j = json_loadb(text, n, 0, NULL);
    free(text);
    if (json_is_object(j) && json_is_object(json_object_get(j, "spec")) &&
        json_is_array(json_object_get(j, "sources")))
        return j;
    json_decref(j);
    return NULL;
}

void kvf_fib_dataset_free(kvf_fib_dataset *ds) {
    for (size_t i = 0; i < ds->ndefs; i++) {
        free(ds->defs[i].workloads);
        for (size_t t = 0; t < ds->defs[i].ntraces; t++)
            free(ds->defs[i].traces[t].text);
    }
    for (size_t i = 0; i < ds->nuuids; i++)
        free(ds->uuids[i]);
    free(ds->uuids);
    ds->uuids = NULL;
    ds->nuuids = 0;
}
