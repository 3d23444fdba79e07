/* kvfuzz export-fib: findings into a FlashInfer-Bench dataset that FIB replays (docs/fib.md).
 * Each finding is run again (its kernel, the oracle, the judge under strict, fa and fib) so
 * the trace records what FIB's own check, the fib rule, makes of it. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fib_dataset.h"
#include "kvfuzz/fib.h"
#include "kvfuzz/file.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/spec.h"

static const char *const cmd = "export-fib";

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
    fib_dataset ds;
} export_state;

/* One finding on its way into the dataset. */
typedef struct export_item {
    const char *path, *base;
    kvf_spec spec;
    kvf_case c;
    json_t *report, *wl;
    char *line;
    kvf_bf16 *o;
    float *lse;
    kvf_oracle_result oracle;
    int have_oracle;
    kernel_slot *ks;
    def_lines *dl;
    const solution_rec *sol;
    trace_file *tf;
    char uuid[KVF_ORIGIN_NAME_MAX + 1];
    kvf_run_result res;
    kvf_outcome out;
} export_item;

/* The finding's report and kernel, its place in the dataset and its uuid. */
static int prepare_item(export_state *st, export_item *x) {
    kvf_error err = {0};
    int rc;
    if (cli_read_report(x->path, &x->report, &err)) return cli_usage_error(cmd, "%s", err.msg);
    const char *kernel = st->kernel_override;
    if (!kernel && x->report) kernel = json_string_value(json_object_get(x->report, "kernel"));
    if (!kernel)
        return cli_usage_error(cmd, "%s has no report beside it naming its kernel; give --kernel",
                               x->path);
    if ((rc = get_runner(st->kernels, &st->nkernels, kernel, &st->limits, st->deadline, st->rules,
                         st->precision, &x->ks)))
        return rc;
    /* A case FIB cannot hold is refused before it is run. */
    if (kvf_fib_check_exportable(&x->c, &err))
        return cli_usage_error(cmd, "%s: %s", x->path, err.msg);
    x->dl = fib_dataset_def_for(&st->ds, &x->c);
    x->sol =
        x->dl ? fib_dataset_solution_for(&st->ds, x->ks->kernel, x->ks->solution, x->dl) : NULL;
    x->tf = x->sol ? fib_dataset_trace_file_for(x->dl, x->sol->author) : NULL;
    if (!x->dl || !x->sol || !x->tf)
        return cli_usage_error(cmd, "the findings have more than %d shapes", MAX_DEFS);
    fib_dataset_pick_uuid(&st->ds, &x->spec, x->base, x->report != NULL, x->uuid, sizeof x->uuid);
    return 0;
}

/* The run and the verdicts. */
static int run_item(export_state *st, export_item *x) {
    const kvf_case *c = &x->c;
    kvf_error err = {0};
    x->o = malloc((size_t)(kvf_case_o_elems(c) ? kvf_case_o_elems(c) : 1) * sizeof *x->o);
    x->lse = malloc((size_t)(kvf_case_lse_elems(c) ? kvf_case_lse_elems(c) : 1) * sizeof *x->lse);
    if (!x->o || !x->lse) return cli_usage_error(cmd, "out of memory for %s", x->path);
    kvf_run_result *res = &x->res;
    if (kvf_runner_run(x->ks->runner, c, x->o, x->lse, res, &err)) {
        res->status = KVF_RUN_KERNEL_ERROR;
        snprintf(res->message, sizeof res->message, "%s", err.msg);
    }
    if (res->status != KVF_RUN_OK) {
        kvf_outcome_from_run(&x->out, res->status, res->message);
        return 0;
    }
    if (kvf_oracle_run(&x->oracle, c, &st->oopts, &err))
        return cli_usage_error(cmd, "%s: the oracle failed: %s", x->path, err.msg);
    x->have_oracle = 1;
    if (kvf_outcome_judge(&x->out, x->ks->rules, 3, 0, c, &x->oracle, x->o, x->lse, NULL, NULL,
                          &err) ||
        kvf_outcome_attribute(&x->out, c, &x->oracle, x->o, x->lse, &err))
        return cli_usage_error(cmd, "%s: %s", x->path, err.msg);
    return 0;
}

/* The finding's workload, blob and trace into the dataset. */
static int add_item(export_state *st, export_item *x) {
    kvf_error err = {0};
    if (kvf_fib_export(st->out_dir, x->dl->name, x->uuid, &x->spec, &x->c, &x->line, &err))
        return cli_usage_error(cmd, "%s: %s", x->path, err.msg);
    json_error_t jerr;
    x->wl = json_loads(x->line, 0, &jerr);
    fib_run run = {x->base, x->ks->kernel->name, x->report, &x->spec, &x->c, &x->res,
                   &x->out, &x->oracle,          x->o,      x->lse};
    if (fib_dataset_add_trace(x->dl, x->tf, x->sol, x->wl, &run))
        return cli_usage_error(cmd, "out of memory writing %s", x->path);
    return 0;
}

/* The finding's line: the fib verdict beside strict's and fa's, and what FIB will make of it. */
static void print_item(const export_state *st, const export_item *x) {
    const kvf_outcome *out = &x->out;
    const kvf_case *c = &x->c;
    int ok = x->res.status == KVF_RUN_OK;
    const char *strict_word =
        ok ? verdict_word(&out->verdicts[0]) : kvf_finding_class_name(out->finding);
    const char *fib_word =
        ok ? verdict_word(&out->verdicts[2]) : kvf_finding_class_name(out->finding);
    const char *fa_word =
        ok ? verdict_word(&out->verdicts[1]) : kvf_finding_class_name(out->finding);
    int fib_fails = !ok || !out->verdicts[2].pass;
    int kvf_fails = !ok || !out->verdicts[0].pass || !out->verdicts[1].pass;
    /* fib fails only where the kernel is bit for bit right: the -inf lse of an empty sequence,
     * which FIB's check fails in every kernel. Its INCORRECT_NUMERICAL says nothing of a
     * defect. */
    int wrong_reason =
        ok && kvf_verdict_status_of(&out->verdicts[2], 0) == KVF_VERDICT_RULE_REJECTS_ROUNDED;
    int empty_seq = 0;
    for (int32_t b = 0; b < c->batch_size && !empty_seq; b++)
        empty_seq = c->kv_indptr[b + 1] == c->kv_indptr[b];
    const char *why = empty_seq ? "its check fails the -inf lse of an empty sequence, which is "
                                  "correct, in every kernel"
                                : "every element its check fails is one the kernel got bit for "
                                  "bit right";
    printf("%s (kernel %s): strict %s, fa %s, fib %s: ", x->base, x->ks->kernel->name, strict_word,
           fa_word, fib_word);
    if (wrong_reason)
        printf("FIB flags it for the wrong reason (%s)%s\n", why,
               kvf_fails ? "; the defect itself passes FIB's check" : "");
    else
        printf("%s\n", fib_fails   ? "FIB reproduces it"
                       : kvf_fails ? "FIB will not see it (fib passes)"
                                   : "nothing to reproduce (every rule passes)");
    if (ok && out->attribution.kind != KVF_ATTRIB_NONE)
        printf("  attribution (%s): %s\n", out->verdicts[out->rule].rule.name,
               out->attribution.text);
    printf("  workload %s -> %s/"
           "blob/workloads/" KVF_FIB_OP_TYPE "/%s/%s_%s.safetensors, trace of solution %s\n",
           x->uuid, st->shown_dir, x->dl->name, x->dl->name, x->uuid, x->sol->name);
}

static int export_one(export_state *st, const char *path) {
    export_item x = {.path = path, .base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path};
    kvf_error err = {0};
    if (kvf_case_load(path, &x.spec, &x.c, &st->limits, &err))
        return cli_usage_error(cmd, "%s: %s", path, err.msg);
    int rc = prepare_item(st, &x);
    if (rc == KVF_EXIT_OK) rc = run_item(st, &x);
    if (rc == KVF_EXIT_OK) rc = add_item(st, &x);
    if (rc == KVF_EXIT_OK) print_item(st, &x);
    free(x.line);
    json_decref(x.wl);
    json_decref(x.report);
    if (x.have_oracle) kvf_oracle_result_free(&x.oracle);
    free(x.o);
    free(x.lse);
    kvf_case_free(&x.c);
    kvf_spec_free(&x.spec);
    return rc;
}

/* The options into st; KVF_EXIT_OK after --help, KVF_EXIT_USAGE on an error, else -1. */
static int parse_options(export_state *st, cli_parser *p, int64_t *jobs) {
    const char *v;
    for (int key; (key = cli_next(p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            export_help();
            return KVF_EXIT_OK;
        case CLI_ERROR:
            return KVF_EXIT_USAGE;
        case 'o':
            st->out_dir = v;
            break;
        case EXPORT_KERNEL:
            st->kernel_override = v;
            break;
        case EXPORT_PRECISION:
            if (cli_precision_check(cmd, v)) return KVF_EXIT_USAGE;
            st->precision = v;
            break;
        case EXPORT_DEADLINE:
            if (cli_opt_seconds(cmd, "--deadline", v, 86400, &st->deadline)) return KVF_EXIT_USAGE;
            break;
        case EXPORT_JOBS:
            if (cli_opt_i64(cmd, "--jobs", v, 1, 1024, jobs)) return KVF_EXIT_USAGE;
            break;
        }
    }
    return -1;
}

/* The dataset is written into a folder beside -o and renamed to it at the end, so a run
 * that fails part way leaves no half dataset, and an existing dataset is never mixed with
 * or overwritten by this one (its workloads files would lose their earlier lines). */
static int make_partial(const char *final_dir, char *partial, size_t n) {
    struct stat sb;
    if (stat(final_dir, &sb) == 0 && (!S_ISDIR(sb.st_mode) || !folder_is_empty(final_dir)))
        return cli_usage_error(cmd,
                               "%s exists and is not an empty folder: export-fib writes a new "
                               "dataset (name another -o, or remove it)",
                               final_dir);
    if ((size_t)snprintf(partial, n, "%s.partial-%ld", final_dir, (long)getpid()) >= n ||
        mkdir(partial, 0777) != 0)
        return cli_usage_error(cmd, "cannot create the dataset folder %s", final_dir);
    return 0;
}

static void free_kernels(export_state *st) {
    for (size_t i = 0; i < st->nkernels; i++) {
        kvf_runner_destroy(st->kernels[i].runner);
        kvf_kernel_free(st->kernels[i].kernel);
        json_decref(st->kernels[i].solution);
    }
}

int kvf_cmd_export_fib(int argc, char **argv) {
    static export_state st;
    memset(&st, 0, sizeof st);
    st.deadline = 60;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t jobs = ncpu > 0 ? ncpu : 1;
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, export_options);
    int rc = parse_options(&st, &p, &jobs);
    if (rc >= 0) return rc;
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
    const char *final_dir = st.out_dir;
    char partial[PATH_MAX];
    if ((rc = make_partial(final_dir, partial, sizeof partial))) {
        cli_free_paths(paths, npaths);
        return rc;
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
    size_t refused = 0;
    for (size_t i = 0; i < npaths; i++) {
        if (export_one(&st, paths[i])) refused++;
        fflush(stdout);
    }
    size_t ndefs = 0;
    rc = fib_dataset_write(&st.ds, cmd, st.out_dir, &ndefs);
    fib_dataset_free(&st.ds);
    free_kernels(&st);
    cli_free_paths(paths, npaths);
    int written = rc == KVF_EXIT_OK && npaths > refused;
    /* An empty folder given as -o is replaced by the dataset. */
    struct stat sb;
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
