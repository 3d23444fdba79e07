/* kvfuzz import-fib: FlashInfer-Bench workloads into .kvfz cases (docs/fib.md). */
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "kvfuzz/fib.h"
#include "kvfuzz/file.h"
#include "kvfuzz/spec.h"

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

typedef struct import_run {
    const char *out_dir;
    kvf_fib_import_opts opts;
    size_t written;
    char **names; /* files written in this run, to refuse a repeated uuid */
    size_t nnames;
} import_run;

static int already_written(import_run *r, const char *path) {
    for (size_t i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i], path) == 0) return 1;
    char **n = realloc(r->names, (r->nnames + 1) * sizeof *n);
    if (!n) return 0;
    r->names = n;
    r->names[r->nnames] = strdup(path);
    if (r->names[r->nnames]) r->nnames++;
    return 0;
}

static const char *random_list(uint8_t bits, char *buf, size_t n) {
    snprintf(buf, n, "%s%s%s", (bits & KVF_ORIGIN_RANDOM_Q) ? " q" : "",
             (bits & KVF_ORIGIN_RANDOM_K) ? " k_cache" : "",
             (bits & KVF_ORIGIN_RANDOM_V) ? " v_cache" : "");
    return buf;
}

/* Every line of one workloads file of one definition. */
static int import_file(import_run *r, const kvf_fib_definition *def, const char *path) {
    char *text;
    size_t n;
    kvf_error err = {0};
    if (kvf_read_file_max(path, (size_t)256 << 20, &text, &n, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    int rc = KVF_EXIT_OK;
    size_t lineno = 0;
    for (char *line = text; line < text + n && rc == KVF_EXIT_OK;) {
        char *end = memchr(line, '\n', (size_t)(text + n - line));
        size_t len = end ? (size_t)(end - line) : (size_t)(text + n - line);
        lineno++;
        char *next = line + len + (end ? 1 : 0);
        size_t blank = 0;
        while (blank < len && (line[blank] == ' ' || line[blank] == '\t' || line[blank] == '\r'))
            blank++;
        if (blank == len) {
            line = next;
            continue;
        }
        char what[PATH_MAX + 32];
        snprintf(what, sizeof what, "%s line %zu", path, lineno);
        kvf_spec spec;
        kvf_case c;
        if (kvf_fib_import(&spec, def, line, len, what, &r->opts, &err)) {
            /* A sentence about the line itself already starts with where it is. */
            rc = strncmp(err.msg, what, strlen(what)) == 0
                     ? cli_usage_error(cmd, "%s", err.msg)
                     : cli_usage_error(cmd, "%s: %s", what, err.msg);
            break;
        }
        if (kvf_case_build(&c, &spec, &r->opts.limits, &err)) {
            kvf_spec_free(&spec);
            rc = cli_usage_error(cmd, "%s: the workload is not a valid case: %s", what, err.msg);
            break;
        }
        char out[PATH_MAX];
        snprintf(out, sizeof out, "%s/%s_%s.kvfz", r->out_dir, def->name,
                 spec.origin.workload_uuid);
        if (already_written(r, out)) {
            rc = cli_usage_error(cmd, "%s: workload uuid %s appears twice for %s", what,
                                 spec.origin.workload_uuid, def->name);
        } else if (kvf_spec_save(&spec, out, &err)) {
            rc = cli_usage_error(cmd, "%s", err.msg);
        } else {
            char rnd[64];
            printf("%s workload %s: batch %d, %" PRId64 " tokens, pool of %" PRId64 " pages%s%s",
                   def->name, spec.origin.workload_uuid, c.batch_size, kvf_case_total_tokens(&c),
                   c.num_pages, spec.origin.random_inputs ? ", random" : "",
                   random_list(spec.origin.random_inputs, rnd, sizeof rnd));
            if (spec.origin.random_inputs) printf(" from seed %" PRIu64, spec.origin.random_seed);
            printf(" -> %s\n", out);
            r->written++;
        }
        kvf_case_free(&c);
        kvf_spec_free(&spec);
        line = next;
    }
    free(text);
    return rc;
}

/* The workloads files of a definition in a dataset: workloads/<op_type>/<def>.jsonl (FIB's
 * layout), or directly under workloads/. */
static int import_definition(import_run *r, const char *dataset, const kvf_fib_definition *def) {
    char pattern[PATH_MAX];
    glob_t g;
    size_t found = 0;
    int rc = KVF_EXIT_OK;
    const char *forms[2] = {"%s/workloads/*/%s.jsonl", "%s/workloads/%s.jsonl"};
    char literal[PATH_MAX]; /* the dataset's own name matches only itself */
    if (kvf_glob_escape(dataset, literal, sizeof literal))
        return cli_usage_error(cmd, "the dataset path %.80s... is too long", dataset);
    for (int f = 0; f < 2 && rc == KVF_EXIT_OK; f++) {
        snprintf(pattern, sizeof pattern, forms[f], literal, def->name);
        if (glob(pattern, 0, NULL, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc && rc == KVF_EXIT_OK; i++, found++)
                rc = import_file(r, def, g.gl_pathv[i]);
        globfree(&g);
    }
    if (rc == KVF_EXIT_OK && found == 0)
        fprintf(stderr, "kvfuzz import-fib: %s has no workloads file under %s/workloads\n",
                def->name, dataset);
    return rc;
}

static int import_dataset(import_run *r, const char *dataset, const char *only) {
    char pattern[PATH_MAX];
    glob_t g;
    int rc = KVF_EXIT_OK;
    size_t decode = 0, skipped = 0;
    const char *forms[2] = {"%s/definitions/*/*.json", "%s/definitions/*.json"};
    char literal[PATH_MAX]; /* a folder named "data[1]" is that folder, not "data1" */
    if (kvf_glob_escape(dataset, literal, sizeof literal))
        return cli_usage_error(cmd, "the dataset path %.80s... is too long", dataset);
    for (int f = 0; f < 2 && rc == KVF_EXIT_OK; f++) {
        snprintf(pattern, sizeof pattern, forms[f], literal);
        if (glob(pattern, 0, NULL, &g) != 0) {
            globfree(&g);
            continue;
        }
        for (size_t i = 0; i < g.gl_pathc && rc == KVF_EXIT_OK; i++) {
            const char *base = strrchr(g.gl_pathv[i], '/') + 1;
            size_t stem = strlen(base) - strlen(".json");
            if (only && (strlen(only) != stem || strncmp(base, only, stem) != 0)) continue;
            /* A dataset holds every kind of kernel; only paged decode is kvfuzz's. */
            if (!only && strncmp(base, KVF_FIB_FAMILY, strlen(KVF_FIB_FAMILY)) != 0) {
                skipped++;
                continue;
            }
            kvf_fib_definition def;
            kvf_error err = {0};
            if (kvf_fib_definition_load(&def, g.gl_pathv[i], &err)) {
                rc = cli_usage_error(cmd, "%s", err.msg);
                break;
            }
            decode++;
            rc = import_definition(r, dataset, &def);
        }
        globfree(&g);
    }
    if (rc) return rc;
    if (decode == 0)
        return only ? cli_usage_error(cmd, "%s has no definition %s under definitions/", dataset,
                                      only)
                    : cli_usage_error(cmd,
                                      "%s has no " KVF_FIB_FAMILY " definition under definitions/ "
                                      "(%zu other definitions)",
                                      dataset, skipped);
    if (skipped)
        fprintf(stderr,
                "kvfuzz import-fib: skipped %zu definitions that are not " KVF_FIB_FAMILY "\n",
                skipped);
    return KVF_EXIT_OK;
}

/* FIB paths are relative to the dataset root: <root>/workloads/<op_type>/<def>.jsonl. */
static void guess_root(const char *workloads, char *root, size_t n) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", workloads);
    char *parts[3] = {0};
    for (int i = 0; i < 3; i++) {
        char *s = strrchr(buf, '/');
        if (!s) break;
        *s = 0;
        parts[i] = s + 1;
    }
    /* buf is now three levels up when parts[2] == "workloads"; a relative path may start at
     * workloads/ itself. */
    if (parts[2] && strcmp(parts[2], "workloads") == 0) {
        snprintf(root, n, "%s", buf[0] ? buf : "/");
        return;
    }
    if (parts[1] && !parts[2] && strcmp(buf, "workloads") == 0) {
        snprintf(root, n, ".");
        return;
    }
    snprintf(buf, sizeof buf, "%s", workloads);
    char *s = strrchr(buf, '/');
    if (s)
        *s = 0, snprintf(root, n, "%s", buf[0] ? buf : "/");
    else
        snprintf(root, n, ".");
}

int kvf_cmd_import_fib(int argc, char **argv) {
    import_run r = {0};
    cli_limits(&r.opts.limits);
    const char *root = NULL, *only = NULL;
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, import_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            import_help();
            return KVF_EXIT_OK;
        case CLI_ERROR:
            return KVF_EXIT_USAGE;
        case 'o':
            r.out_dir = v;
            break;
        case IMPORT_SEED:
            if (cli_opt_u64(cmd, "--seed", v, &r.opts.seed)) return KVF_EXIT_USAGE;
            break;
        case IMPORT_ROOT:
            root = v;
            break;
        case IMPORT_DEFINITION:
            only = v;
            break;
        }
    }
    char **args;
    int npos = cli_operands(&p, &args);
    if (!r.out_dir)
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
    kvf_error err = {0};
    if (mkdir(r.out_dir, 0777) != 0 && (stat(r.out_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        return cli_usage_error(cmd, "cannot create the output folder %s", r.out_dir);
    int rc;
    char guessed[PATH_MAX];
    if (npos == 1) {
        r.opts.root = root ? root : args[0];
        rc = import_dataset(&r, args[0], only);
    } else {
        kvf_fib_definition def;
        if (kvf_fib_definition_load(&def, args[0], &err))
            return cli_usage_error(cmd, "%s", err.msg);
        if (!root) guess_root(args[1], guessed, sizeof guessed);
        r.opts.root = root ? root : guessed;
        rc = import_file(&r, &def, args[1]);
    }
    for (size_t i = 0; i < r.nnames; i++)
        free(r.names[i]);
    free(r.names);
    if (rc) return rc;
    if (r.written == 0) return cli_usage_error(cmd, "no workload found to import");
    printf("%zu case(s) written to %s\n", r.written, r.out_dir);
    return KVF_EXIT_OK;
}
