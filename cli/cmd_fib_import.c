/* kvfuzz import-fib: FlashInfer-Bench workloads into .kvfz cases (docs/fib.md). Reading the
 * dataset and writing the cases is kvfuzz/fib.h's importer; this file parses the options and
 * prints a line per case written. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "kvfuzz/fib.h"

static const char *const cmd = "import-fib";

enum { IMPORT_SEED = 256, IMPORT_DEFINITION, IMPORT_ROOT };

static const cli_option import_options[] = {
    {"output", 'o', "DIR", "folder for the cases (created when absent)"},
    {"seed", IMPORT_SEED, "N", "seed of the random inputs' values (default 0)"},
    {"definition", IMPORT_DEFINITION, "NAME", "import only this definition of the dataset"},
    {"root", IMPORT_ROOT, "DIR",
     "the dataset root that blob paths start from (default: the folder\nholding workloads/, else "
     "the workload file's folder)"},
    {0},
};

static void import_help(void) {
    printf(
        "usage: kvfuzz import-fib [--seed N] [--definition NAME] -o DIR DATASET\n"
        "       kvfuzz import-fib [--seed N] [--root DIR] -o DIR DEFINITION.json "
        "WORKLOADS.jsonl\n\n"
        "Reads FlashInfer-Bench workloads of gqa_paged_decode definitions and writes one .kvfz\n"
        "case per workload into DIR, named <definition>_<uuid>.kvfz. DATASET is a FIB dataset\n"
        "folder (definitions/<op_type>/<def>.json, workloads/<op_type>/<def>.jsonl, blobs under\n"
        "blob/); its definitions whose names do not start with gqa_paged_decode are skipped.\n"
        "Stored tensors become explicit tensors, bit for bit; q, k_cache and v_cache left\n"
        "`random` are drawn by kvfuzz's generator from the seed (normal, variance 1, rounded to\n"
        "bf16), and the case records the definition name, the workload uuid, which inputs were\n"
        "drawn and the seed (`kvfuzz show` prints them). The head counts, head dim and page size\n"
        "come from the definition's const axes. An axis or input without \"type\" (FIB's own\n"
        "writer leaves a defaulted one out) is read as FIB's models read it: {\"value\": N} a\n"
        "const axis, {} a var one; an input with path and tensor_key safetensors, with a\n"
        "numeric value scalar, else random.\n\n");
    cli_print_options(stdout, import_options);
    printf(
        "\nA workload kvfuzz cannot replay faithfully is refused with one sentence and exit 2: a\n"
        "Git LFS pointer where a blob should be, a tensor whose shape or dtype disagrees with the\n"
        "definition, a random kv_indptr, kv_indices or kv_last_page_len, a kv_indptr whose last\n"
        "entry is not the number of kv_indices, a kv_last_page_len outside 1..page_size (FIB\n"
        "would clamp it), an unknown dtype, a malformed safetensors blob.\n\n"
        "Exit status: 0 every workload imported, 2 bad input or usage.\n");
}

static const char *random_list(uint8_t bits, char *buf, size_t n) {
    snprintf(buf, n, "%s%s%s", (bits & KVF_ORIGIN_RANDOM_Q) ? " q" : "",
             (bits & KVF_ORIGIN_RANDOM_K) ? " k_cache" : "",
             (bits & KVF_ORIGIN_RANDOM_V) ? " v_cache" : "");
    return buf;
}

static void print_case(void *ctx, const kvf_fib_imported *x) {
    const kvf_origin *o = &x->spec->origin;
    char rnd[64];
    printf("%s workload %s: batch %d, %" PRId64 " tokens, pool of %" PRId64 " pages%s%s",
           x->def->name, o->workload_uuid, x->c->batch_size, kvf_case_total_tokens(x->c),
           x->c->num_pages, o->random_inputs ? ", random" : "",
           random_list(o->random_inputs, rnd, sizeof rnd));
    if (o->random_inputs) printf(" from seed %" PRIu64, o->random_seed);
    printf(" -> %s\n", x->path);
}

static void warn(void *ctx, const char *message) {
    fprintf(stderr, "kvfuzz import-fib: %s\n", message);
}

/* The options into im, *root and *only, the operands into *args: their count, or -1 - the exit
 * status (after --help or a bad option). */
static int import_parse(kvf_fib_importer *im, const char **root, const char **only, int argc,
                        char **argv, char ***args) {
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, import_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            import_help();
            return -1 - KVF_EXIT_OK;
        case CLI_ERROR:
            return -1 - KVF_EXIT_USAGE;
        case 'o':
            im->out_dir = v;
            break;
        case IMPORT_SEED:
            if (cli_opt_u64(cmd, "--seed", v, &im->opts.seed)) return -1 - KVF_EXIT_USAGE;
            break;
        case IMPORT_ROOT:
            if (!v[0]) { /* an empty path would read as the working folder */
                cli_usage_error(cmd, "--root is empty; give the dataset's folder");
                return -1 - KVF_EXIT_USAGE;
            }
            *root = v;
            break;
        case IMPORT_DEFINITION:
            *only = v;
            break;
        }
    }
    return cli_operands(&p, args);
}

/* The operands' checks and the output folder: 0, or the exit status after one sentence. */
static int import_check(const kvf_fib_importer *im, const char *only, int npos, char **args) {
    if (!im->out_dir)
        return cli_usage_error(cmd, "-o DIR is required (see kvfuzz import-fib --help)");
    if (npos < 1 || npos > 2)
        return cli_usage_error(cmd, "give a dataset folder, or a definition and a workloads file "
                                    "(see kvfuzz import-fib --help)");
    struct stat st;
    for (int i = 0; i < npos; i++)
        if (stat(args[i], &st) != 0) return cli_usage_error(cmd, "cannot read %s", args[i]);
    if (npos == 1 && !S_ISDIR(st.st_mode))
        return cli_usage_error(cmd,
                               "%s is not a dataset folder; a definition file needs its "
                               "workloads file after it",
                               args[0]);
    if (npos == 2 && only)
        return cli_usage_error(cmd, "--definition picks from a dataset folder; with files, the "
                                    "definition file says which");
    if (mkdir(im->out_dir, 0777) != 0 && (stat(im->out_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        return cli_usage_error(cmd, "cannot create the output folder %s", im->out_dir);
    return 0;
}

int kvf_cmd_import_fib(int argc, char **argv) {
    kvf_fib_importer im = {0};
    cli_limits(&im.opts.limits);
    im.on_case = print_case;
    im.warn = warn;
    const char *root = NULL, *only = NULL;
    char **args;
    int npos = import_parse(&im, &root, &only, argc, argv, &args);
    if (npos < 0) return -1 - npos;
    int rc = import_check(&im, only, npos, args);
    if (rc) return rc;
    kvf_error err = {0};
    char guessed[PATH_MAX];
    if (npos == 1) {
        im.opts.root = root ? root : args[0];
        rc = kvf_fib_import_dataset(&im, args[0], only, &err);
    } else {
        kvf_fib_definition def;
        if (kvf_fib_definition_load(&def, args[0], &err))
            return cli_usage_error(cmd, "%s", err.msg);
        if (!root) kvf_fib_guess_root(args[1], guessed, sizeof guessed);
        im.opts.root = root ? root : guessed;
        rc = kvf_fib_import_workloads(&im, &def, args[1], &err);
    }
    kvf_fib_importer_free(&im);
    if (rc) return cli_usage_error(cmd, "%s", err.msg);
    if (im.skipped)
        fprintf(stderr,
                "kvfuzz import-fib: skipped %zu definitions that are not " KVF_FIB_FAMILY "\n",
                im.skipped);
    if (im.written == 0) return cli_usage_error(cmd, "no workload found to import");
    printf("%zu case(s) written to %s\n", im.written, im.out_dir);
    return KVF_EXIT_OK;
}
