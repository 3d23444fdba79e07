/* kvfuzz export-fib: findings into a FlashInfer-Bench dataset that FIB replays (docs/fib.md).
 * Each finding is run again (its kernel, the oracle, the judge under strict, fa and fib:
 * kvfuzz/finding_fib.h) so the trace records what FIB's own check, the fib rule, makes of it;
 * the dataset is built and written by kvfuzz/fib_dataset.h. This file parses the options and
 * writes the dataset; fib_export_item.c takes each finding into it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fib_export.h"
#include "kvfuzz/file.h"

static const char *const cmd = CLI_EXPORT_CMD;

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

/* The options into st; KVF_EXIT_OK after --help, KVF_EXIT_USAGE on an error, else -1. */
static int parse_options(cli_export_state *st, cli_parser *p, int64_t *jobs) {
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

/* Every finding into the dataset folder `partial`, then the dataset written there and moved to
 * -o: the exit status. A finding that cannot be exported is reported and the others still go
 * out, as replay does with a file it cannot judge; the exit status then says so. */
static int export_all(cli_export_state *st, char **paths, size_t npaths, const char *partial) {
    const char *final_dir = st->out_dir;
    st->out_dir = partial;
    st->shown_dir = final_dir;
    size_t refused = 0, ndefs = 0;
    for (size_t i = 0; i < npaths; i++) {
        if (cli_export_one(st, paths[i])) refused++;
        fflush(stdout);
    }
    kvf_error err = {0};
    int rc = kvf_fib_dataset_write(&st->ds, partial, &ndefs, &err);
    if (rc) rc = cli_usage_error(cmd, "%s", err.msg);
    int written = rc == KVF_EXIT_OK && npaths > refused;
    /* An empty folder given as -o is replaced by the dataset. */
    if (written && kvf_fib_dataset_publish(partial, final_dir, &err)) {
        rc = cli_usage_error(cmd, "%s", err.msg);
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

int kvf_cmd_export_fib(int argc, char **argv) {
    static cli_export_state st;
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
    /* The dataset is written into a folder beside -o and renamed to it at the end, so a run
     * that fails part way leaves no half dataset, and an existing dataset is never mixed with
     * or overwritten by this one (its workloads files would lose their earlier lines). */
    char partial[PATH_MAX];
    kvf_error err = {0};
    if ((rc = kvf_fib_dataset_begin(st.out_dir, partial, sizeof partial, &err))) {
        cli_free_paths(paths, npaths);
        if (rc == KVF_EINVAL)
            return cli_usage_error(cmd,
                                   "%s: export-fib writes a new dataset (name another -o, or "
                                   "remove it)",
                                   err.msg);
        return cli_usage_error(cmd, "%s", err.msg);
    }
    cli_limits(&st.limits);
    kvf_oracle_opts_default(&st.oopts);
    st.oopts.threads = (int)jobs;
    kvf_finding_fib_rules(st.rules);
    rc = export_all(&st, paths, npaths, partial);
    kvf_fib_dataset_free(&st.ds);
    cli_export_free_kernels(&st);
    cli_free_paths(paths, npaths);
    return rc;
}
