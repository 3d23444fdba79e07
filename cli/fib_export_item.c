/* One finding into kvfuzz export-fib's dataset (fib_export.h): its kernel, started on first
 * use with strict and fa under its precision model, the run again (kvfuzz/finding_fib.h), its
 * place, workload, blob and trace in the dataset (kvfuzz/fib_dataset.h), and its line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fib_export.h"
#include "kvfuzz/fib.h"

/* The slot of kernel `spec`, started on first use. */
static int get_runner(cli_export_state *st, const char *spec, cli_export_kernel **out) {
    for (size_t i = 0; i < st->nkernels; i++)
        if (strcmp(st->kernels[i].spec, spec) == 0) {
            *out = &st->kernels[i];
            return 0;
        }
    if (st->nkernels == KVF_FIB_MAX_KERNELS)
        return cli_usage_error(CLI_EXPORT_CMD, "the findings name more than %d kernels",
                               KVF_FIB_MAX_KERNELS);
    cli_export_kernel *s = &st->kernels[st->nkernels];
    memset(s, 0, sizeof *s);
    snprintf(s->spec, sizeof s->spec, "%s", spec);
    if (cli_one_kernel(CLI_EXPORT_CMD, spec, &s->kernel)) return KVF_EXIT_USAGE;
    /* A FIB solution (FILE.json) goes into the dataset as it is, so FIB can run it there. */
    s->solution = kvf_fib_solution_record(spec);
    /* Each kernel's own copy: findings of several kernels may share one export. */
    if (cli_rules_for_kernel(CLI_EXPORT_CMD, s->kernel, st->precision, st->rules,
                             KVF_FINDING_FIB_RULES, s->rules, NULL, NULL)) {
        kvf_kernel_free(s->kernel);
        json_decref(s->solution);
        return KVF_EXIT_USAGE;
    }
    kvf_error err = {0};
    kvf_runner_opts ro = {s->kernel, st->limits, st->deadline, 0, 0, 1};
    if (kvf_runner_create(&s->runner, &ro, &err) || kvf_runner_start(s->runner, &err)) {
        kvf_runner_destroy(s->runner);
        kvf_kernel_free(s->kernel);
        json_decref(s->solution);
        return cli_usage_error(CLI_EXPORT_CMD, "kernel %s could not start: %s", spec, err.msg);
    }
    st->nkernels++;
    *out = s;
    return 0;
}

/* One finding on its way into the dataset. */
typedef struct export_item {
    const char *path, *base;
    kvf_spec spec;
    kvf_case c;
    json_t *report, *wl;
    char *line;
    kvf_finding_rerun rr;
    cli_export_kernel *ks;
    kvf_fib_def *def;
    const kvf_fib_solution *sol;
    kvf_fib_trace_file *tf;
    char uuid[KVF_ORIGIN_NAME_MAX + 1];
} export_item;

/* The finding's report and kernel, its place in the dataset and its uuid. */
static int prepare_item(cli_export_state *st, export_item *x) {
    kvf_error err = {0};
    int rc;
    if (cli_read_report(x->path, &x->report, &err))
        return cli_usage_error(CLI_EXPORT_CMD, "%s", err.msg);
    const char *kernel = st->kernel_override;
    if (!kernel && x->report) kernel = json_string_value(json_object_get(x->report, "kernel"));
    if (!kernel)
        return cli_usage_error(
            CLI_EXPORT_CMD, "%s has no report beside it naming its kernel; give --kernel", x->path);
    if ((rc = get_runner(st, kernel, &x->ks))) return rc;
    /* A case FIB cannot hold is refused before it is run. */
    if (kvf_fib_check_exportable(&x->c, &err))
        return cli_usage_error(CLI_EXPORT_CMD, "%s: %s", x->path, err.msg);
    const kvf_kernel *k = x->ks->kernel;
    kvf_fib_kernel_ref ref = {k, k->name, kvf_kernel_plugin_path(k), k->device == KVF_DEVICE_CUDA,
                              x->ks->solution};
    x->def = kvf_fib_dataset_def_for(&st->ds, &x->c);
    x->sol = x->def ? kvf_fib_dataset_solution_for(&st->ds, &ref, x->def) : NULL;
    x->tf = x->sol ? kvf_fib_dataset_trace_file_for(x->def, x->sol->author) : NULL;
    if (!x->def || !x->sol || !x->tf)
        return cli_usage_error(CLI_EXPORT_CMD, "the findings have more than %d shapes",
                               KVF_FIB_MAX_DEFS);
    kvf_fib_dataset_pick_uuid(&st->ds, &x->spec, x->base, x->report != NULL, x->uuid,
                              sizeof x->uuid);
    return 0;
}

/* The finding's workload, blob and trace into the dataset. */
static int add_item(cli_export_state *st, export_item *x) {
    kvf_error err = {0};
    if (kvf_fib_export(st->out_dir, x->def->name, x->uuid, &x->spec, &x->c, &x->line, &err))
        return cli_usage_error(CLI_EXPORT_CMD, "%s: %s", x->path, err.msg);
    x->wl = json_loads(x->line, 0, NULL);
    const kvf_run_result *res = &x->rr.res;
    const int ok = res->status == KVF_RUN_OK;
    kvf_fib_trace_run run = {ok                            ? KVF_FIB_RUN_OK
                             : res->status == KVF_RUN_HANG ? KVF_FIB_RUN_TIMEOUT
                                                           : KVF_FIB_RUN_ERROR,
                             res->message,
                             &x->c,
                             x->rr.o,
                             ok ? x->rr.oracle.o_rounded : NULL,
                             x->rr.lse,
                             ok ? x->rr.oracle.lse_rounded : NULL};
    json_t *extra =
        kvf_finding_fib_extra(x->base, x->ks->kernel->name, x->report, &x->spec, &x->rr);
    if (kvf_fib_dataset_add_trace(x->def, x->tf, x->sol, x->wl,
                                  kvf_fib_trace_evaluation(&run, extra), &err))
        return cli_usage_error(CLI_EXPORT_CMD, "out of memory writing %s", x->path);
    return 0;
}

/* The finding's line: the fib verdict beside strict's and fa's, and what FIB will make of it. */
static void print_item(const cli_export_state *st, const export_item *x) {
    const kvf_outcome *out = &x->rr.out;
    kvf_finding_fib_view v;
    kvf_finding_fib_view_of(&x->rr, &x->c, &v);
    printf("%s (kernel %s): strict %s, fa %s, fib %s: %s\n", x->base, x->ks->kernel->name, v.strict,
           v.fa, v.fib, v.sentence);
    if (x->rr.res.status == KVF_RUN_OK && out->attribution.kind != KVF_ATTRIB_NONE)
        printf("  attribution (%s): %s\n", out->verdicts[out->rule].rule.name,
               out->attribution.text);
    printf("  workload %s -> %s/"
           "blob/workloads/" KVF_FIB_OP_TYPE "/%s/%s_%s.safetensors, trace of solution %s\n",
           x->uuid, st->shown_dir, x->def->name, x->def->name, x->uuid, x->sol->name);
}

int cli_export_one(cli_export_state *st, const char *path) {
    export_item x = {.path = path, .base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path};
    kvf_error err = {0};
    if (kvf_case_load(path, &x.spec, &x.c, &st->limits, &err))
        return cli_usage_error(CLI_EXPORT_CMD, "%s: %s", path, err.msg);
    int rc = prepare_item(st, &x);
    if (rc == KVF_EXIT_OK &&
        kvf_finding_rerun_run(&x.rr, x.ks->runner, &x.c, x.ks->rules, &st->oopts, x.path, &err))
        rc = cli_usage_error(CLI_EXPORT_CMD, "%s", err.msg);
    if (rc == KVF_EXIT_OK) rc = add_item(st, &x);
    if (rc == KVF_EXIT_OK) print_item(st, &x);
    free(x.line);
    json_decref(x.wl);
    json_decref(x.report);
    kvf_finding_rerun_free(&x.rr);
    kvf_case_free(&x.c);
    kvf_spec_free(&x.spec);
    return rc;
}

void cli_export_free_kernels(cli_export_state *st) {
    for (size_t i = 0; i < st->nkernels; i++) {
        kvf_runner_destroy(st->kernels[i].runner);
        kvf_kernel_free(st->kernels[i].kernel);
        json_decref(st->kernels[i].solution);
    }
}
