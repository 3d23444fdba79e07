/* kvfuzz mutants: the bug-finding benchmark (docs/mutants.md). What it computes, the
 * campaigns, the seed table and the bench-style checks, is kvfuzz/mutant_bench.h, and its text
 * table kvfuzz/mutant_table.h; this file parses the options, chooses the kernels and their
 * precision models, and prints the table (or writes the JSON) as the benchmark goes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/mutant_bench.h"
#include "kvfuzz/mutant_table.h"

enum {
    MUT_CONTROL = 256,
    MUT_DEVICE,
    MUT_BUDGET,
    MUT_CONTROLS_BUDGET,
    MUT_SEED,
    MUT_JOBS,
    MUT_SEEDS,
    MUT_JSON,
    MUT_PRECISION,
    MUT_KERNEL
};

/* --help names the plugin kernel limit in words. */
_Static_assert(KVF_PLUGIN_MAX_KERNELS == 4096u, "--help states the plugin kernel limit");

static const cli_option mutants_options[] = {
    {"control", MUT_CONTROL, "K",
     "also run kernel K through (a) as a control (repeatable): a\n"
     "plugin's kernels of role reference for PATH.so (all of them;\n"
     "a plugin lists at most 4096 kernels), or the one named by\n"
     "PATH.so:NAME, python:MODULE:FUNCTION, a built-in"},
    {"kernel", MUT_KERNEL, "PATH.so",
     "a plugin's own benchmark instead of the built-in one: its\n"
     "kernels of role mutant are the mutants (their bug class from\n"
     "`models`), its kernels of role reference the controls, and\n"
     "the device theirs (docs/plugins.md)"},
    {"device", MUT_DEVICE, "D", "cpu (default) or cuda"},
    {"budget", MUT_BUDGET, "S", "seconds of (a) per mutant (default 60)"},
    {"controls-budget", MUT_CONTROLS_BUDGET, "S",
     "seconds of (a) per control kernel (default: --budget)"},
    {"seed", MUT_SEED, "N", "first generated case (default 1)"},
    {"jobs", MUT_JOBS, "N", "oracle threads (default: all cores)"},
    {"seeds", MUT_SEEDS, "DIR",
     "seed cases for the per-rule table (default corpus/seeds when\n"
     "that folder exists; none otherwise)"},
    {"json", MUT_JSON, NULL, "one JSON object instead of the table (progress on stderr)"},
    {"precision", MUT_PRECISION, "MODEL",
     CLI_PRECISION_HELP "\nHere it applies to every mutant and control; (b) and (c) are\n"
                        "unaffected."},
    {0},
};

static void mutants_help(void) {
    printf("usage: kvfuzz mutants [--kernel PATH.so] [--device cpu|cuda] [--budget S]\n"
           "                      [--controls-budget S] [--control K]... [--seed N] [--jobs N]\n"
           "                      [--seeds DIR]"
           " [--precision MODEL] [--json]\n\n"
           "The bug-finding benchmark. For every mutant kernel (a deliberate bug modelled on a\n"
           "real bug class; `kvfuzz kernels` lists them with the class) it reports whether it\n"
           "is caught by\n"
           "  (a) kvfuzz: generated cases (every strategy) judged by the default rules (strict,\n"
           "      fa) against the oracle, with the time and cases to the first finding, once\n"
           "      per rule (the kvfuzz column is the earlier of the two); every 8th case\n"
           "      also runs transformed by an invariance relation, and a broken relation\n"
           "      the kernel promises is an invariance finding (docs/invariance.md);\n"
           "  (b) FlashInfer-Bench-style testing: contiguous page tables, the seed shape,\n"
           "      N(0,1) values, 3 trials of 4 captured-style workloads, the fib rule against\n"
           "      an fp32 reference;\n"
           "  (c) FlashInfer-test-style testing: identity page table, equal lengths,\n"
           "      allclose(1e-3, 1e-3) against cpu-ref.\n"
           "The production kernels of the device run through (a) under both rules at once as\n"
           "controls. A second table lists, per rule (strict, fa, fib), the seed cases on which\n"
           "each mutant fails.\n"
           "strict and fa judge each mutant and control within the precision model it declares\n"
           "(f32 when none; `kvfuzz kernels` shows them), or --precision; a mutant that declares\n"
           "one gets a line naming it and the attribution of its finding (docs/precision.md).\n\n");
    cli_print_options(stdout, mutants_options);
    printf("\nExit status: 0 when kvfuzz catches every mutant and no control reports a finding,\n"
           "1 otherwise, 2 on usage errors or a kernel that cannot start.\n");
}

typedef struct mutants_args {
    const char *cmd, *device, *precision, *seeds_dir;
    double budget, controls_budget;
    uint64_t seed;
    int64_t jobs;
    int json;
    /* The controls --control adds: grows, as a plugin may list any number of references. */
    kvf_kernel_list extras;
    kvf_kernel_list own; /* --kernel: a plugin's mutants and references */
} mutants_args;

/* --control K: a whole plugin contributes its reference kernels; a named kernel is taken as
 * is. */
static int parse_control(mutants_args *a, const char *v) {
    const size_t before = a->extras.count;
    if (cli_add_kernel(a->cmd, v, &a->extras)) return KVF_EXIT_USAGE;
    if (kvf_mutant_keep_controls(&a->extras, before) == 0)
        return cli_usage_error(
            a->cmd, "%s lists no kernel of role reference; name one with PATH.so:NAME", v);
    return 0;
}

/* 0 to run, KVF_EXIT_USAGE, or -1 after --help. */
static int mutants_parse(mutants_args *a, int argc, char **argv) {
    cli_parser p;
    cli_parser_init(&p, a->cmd, argc, argv, mutants_options);
    cli_parser_repeatable(&p, MUT_CONTROL);
    cli_parser_repeatable(&p, MUT_KERNEL);
    const char *v;
    int bad = 0;
    for (int key; !bad && (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            mutants_help();
            return -1;
        case CLI_ERROR:
            bad = 1;
            break;
        case MUT_JSON:
            a->json = 1;
            break;
        case MUT_PRECISION:
            bad = cli_precision_check(a->cmd, v);
            a->precision = v;
            break;
        case MUT_CONTROL:
            bad = parse_control(a, v);
            break;
        case MUT_KERNEL:
            bad = cli_add_kernel(a->cmd, v, &a->own);
            break;
        case MUT_SEEDS:
            bad = cli_case_folder(a->cmd, "--seeds", v);
            a->seeds_dir = v;
            break;
        case MUT_DEVICE:
            if (strcmp(v, "cpu") && strcmp(v, "cuda"))
                bad = cli_usage_error(a->cmd, "--device must be cpu or cuda, got \"%s\"", v);
            else
                a->device = v;
            break;
        case MUT_SEED:
            bad = cli_opt_u64(a->cmd, "--seed", v, &a->seed);
            break;
        case MUT_JOBS:
            bad = cli_opt_i64(a->cmd, "--jobs", v, 1, 1024, &a->jobs);
            break;
        case MUT_BUDGET:
            bad = cli_opt_seconds(a->cmd, "--budget", v, 1e9, &a->budget);
            break;
        case MUT_CONTROLS_BUDGET:
            bad = cli_opt_seconds(a->cmd, "--controls-budget", v, 1e9, &a->controls_budget);
            break;
        }
    }
    char **rest;
    if (!bad && cli_operands(&p, &rest))
        bad = cli_usage_error(a->cmd, "unexpected argument \"%s\" (see kvfuzz mutants --help)",
                              rest[0]);
    if (a->controls_budget < 0) a->controls_budget = a->budget;
    return bad ? KVF_EXIT_USAGE : 0;
}

/* The kernels of the run, each with the model strict and fa judge it under, and for a mutant
 * where that model came from (its line in the table says so). */
typedef struct mutants_plan {
    kvf_mutant_entry *mutants, *controls;
    cli_precision_source *sources; /* per mutant */
    size_t nmutants, ncontrols;
    const mutants_args *args;
} mutants_plan;

/* The device's mutants and controls (kvf_mutant_bench_kernels), each with its precision model.
 * A control that cannot start, or a declared model kvfuzz cannot read, is found here, before
 * minutes of work rather than at its turn. 0 or KVF_EXIT_USAGE. */
static int mutants_choose(mutants_plan *pl, const mutants_args *a, kvf_device dev) {
    kvf_limits lim;
    cli_limits(&lim);
    kvf_error err = {0};
    for (size_t i = 0; i < a->extras.count + a->own.count; i++) {
        const kvf_kernel *k =
            i < a->extras.count ? a->extras.items[i] : a->own.items[i - a->extras.count];
        if (kvf_mutant_can_start(k, &lim, &err))
            return cli_kernel_cannot_start(a->cmd, k->name, err.msg);
    }
    int rc = a->own.count
                 ? kvf_mutant_plugin_kernels(&a->own, &a->extras, &pl->mutants, &pl->nmutants,
                                             &pl->controls, &pl->ncontrols, &err)
                 : kvf_mutant_bench_kernels(dev, &a->extras, &pl->mutants, &pl->nmutants,
                                            &pl->controls, &pl->ncontrols, &err);
    if (rc || !(pl->sources = calloc(pl->nmutants + 1, sizeof *pl->sources)))
        return cli_usage_error(a->cmd, "%s", rc ? err.msg : "out of memory");
    for (size_t i = 0; i < pl->nmutants + pl->ncontrols; i++) {
        const int mut = i < pl->nmutants;
        kvf_mutant_entry *e = mut ? &pl->mutants[i] : &pl->controls[i - pl->nmutants];
        cli_precision_source src;
        if (cli_kernel_precision(a->cmd, e->kernel, a->precision, &e->model, &src))
            return KVF_EXIT_USAGE;
        if (mut) pl->sources[i] = src;
    }
    return 0;
}

static void on_warn(void *ctx, const char *message) {
    fprintf(stderr, "kvfuzz mutants: %s\n", message);
}

/* The table's rows as the benchmark goes; with --json, one line per kernel on stderr. */
static void on_progress(void *ctx, kvf_mutant_event ev, const kvf_mutant_result *r) {
    const mutants_plan *pl = ctx;
    if (pl->args->json) {
        if (ev == KVF_MUTANT_MUTANT_DONE)
            fprintf(stderr, "kvfuzz mutants: %s %s\n", r->kernel->name,
                    r->kvfuzz.caught ? "caught" : "SURVIVED");
        else if (ev == KVF_MUTANT_CONTROL_DONE)
            fprintf(stderr, "kvfuzz mutants: control %s: %s\n", r->kernel->name,
                    r->kvfuzz.caught ? r->kvfuzz.finding : "no finding");
        return;
    }
    if (ev == KVF_MUTANT_MUTANT_DONE) {
        char text[96];
        cli_precision_text(&r->model, pl->sources[r->index], text, sizeof text);
        kvf_mutant_table_mutant(stdout, r, text);
    }
    if (ev == KVF_MUTANT_CONTROLS_BEGIN)
        kvf_mutant_table_controls(stdout, pl->args->controls_budget);
    if (ev == KVF_MUTANT_CONTROL_DONE) kvf_mutant_table_control(stdout, r);
    fflush(stdout);
}

/* The JSON answer, written once at the end (progress went to stderr). */
static int write_json(const kvf_mutant_bench *b, const mutants_args *a) {
    json_t *root = kvf_mutant_bench_json(b, a->device, a->budget);
    int rc = root ? kvf_json_dump(root, stdout, 1) : -1;
    if (rc)
        fprintf(stderr, "kvfuzz mutants: %s\n",
                root ? "cannot write the JSON" : "out of memory building the JSON");
    json_decref(root);
    return rc ? KVF_EXIT_USAGE : 0;
}

/* The benchmark over the chosen kernels: its exit status. */
static int mutants_run(mutants_plan *pl, const mutants_args *a) {
    kvf_mutant_opts o = {.mutants = pl->mutants,
                         .nmutants = pl->nmutants,
                         .controls = pl->controls,
                         .ncontrols = pl->ncontrols,
                         .budget = a->budget,
                         .controls_budget = a->controls_budget,
                         .seed = a->seed,
                         .threads = (int)a->jobs,
                         .warn = on_warn,
                         .progress = on_progress,
                         .ctx = pl};
    cli_limits(&o.limits);
    char **paths = NULL;
    size_t npaths = 0;
    char *dir = (char *)a->seeds_dir;
    /* A default folder that cannot be read leaves the seed table out, with its sentence. */
    if (dir && cli_collect_cases(a->cmd, &dir, 1, &paths, &npaths)) npaths = 0;
    o.seed_paths = paths;
    o.nseed_paths = npaths;
    if (!a->json) kvf_mutant_table_header(stdout);
    kvf_mutant_bench b;
    kvf_error err = {0};
    int rc = kvf_mutant_bench_run(&b, &o, &err);
    cli_free_paths(paths, npaths);
    if (rc && b.start_kernel)
        rc = cli_kernel_cannot_start(a->cmd, b.start_kernel, err.msg);
    else if (rc)
        rc = cli_usage_error(a->cmd, "%s", err.msg);
    else if (a->json)
        rc = write_json(&b, a);
    else
        kvf_mutant_table_summary(stdout, &b, a->seeds_dir);
    if (!rc) rc = (b.survivors || b.noisy_controls) ? KVF_EXIT_FINDINGS : KVF_EXIT_OK;
    kvf_mutant_bench_free(&b);
    return rc;
}

int kvf_cmd_mutants(int argc, char **argv) {
    mutants_args a = {"mutants", "cpu", NULL, NULL, 60, -1, 1, 1, 0, {0}, {0}};
    a.jobs = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    a.seeds_dir = access("corpus/seeds", R_OK) == 0 ? "corpus/seeds" : NULL;
    int rc = mutants_parse(&a, argc, argv);
    kvf_device dev = strcmp(a.device, "cuda") == 0 ? KVF_DEVICE_CUDA : KVF_DEVICE_CPU;
    if (a.own.count) dev = a.own.items[0]->device; /* a plugin's benchmark runs on its device */
    mutants_plan pl = {0};
    pl.args = &a;
    if (!rc) rc = mutants_choose(&pl, &a, dev);
    char why[256];
    if (!rc && dev == KVF_DEVICE_CUDA && !kvf_cuda_available(why, sizeof why))
        rc = cli_usage_error(a.cmd, "--device cuda needs a usable GPU: %s", why);
    if (!rc) rc = mutants_run(&pl, &a);
    free(pl.mutants);
    free(pl.controls);
    free(pl.sources);
    kvf_kernel_list_free(&a.extras);
    kvf_kernel_list_free(&a.own);
    return rc < 0 ? KVF_EXIT_OK : rc;
}
