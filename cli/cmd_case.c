/* kvfuzz gen / show / oracle / rules: making, reading and explaining cases. What they compute
 * lives in the libraries (a new spec: kvfuzz/spec_make.h; a case as JSON: kvfuzz/case_json.h;
 * the oracle's answer as JSON: kvfuzz/oracle_json.h); this file parses and prints. */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "kvfuzz/case_json.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/oracle_json.h"
#include "kvfuzz/spec.h"
#include "kvfuzz/spec_make.h"

/* ---- gen ---------------------------------------------------------------------------------- */

enum {
    GEN_SEED = 256,
    GEN_PRESET,
    GEN_RANDOM,
    GEN_EXPANSION,
    GEN_K_DTYPE,
    GEN_V_DTYPE,
    GEN_SCALES,
    GEN_K_SCALE,
    GEN_V_SCALE,
    GEN_SPREAD,
    GEN_FINE
};

static const cli_option gen_options[] = {
    {"seed", GEN_SEED, "N", "seed for the values (and, with --random, for the recipe); default 1"},
    {"preset", GEN_PRESET, "NAME", "one of the presets below (default seed-h20kv4)"},
    {"random", GEN_RANDOM, NULL, "a random recipe over every generator strategy, not a preset"},
    {"expansion", GEN_EXPANSION, "N",
     "1 or 2: how the recipe expands into tensors, written as the file's\n"
     "version (docs/case-format.md); default 2, the faster one. 1 writes\n"
     "the version 1 file of the recipe (what the shipped seeds are)"},
    {"k-dtype", GEN_K_DTYPE, "T",
     "bf16, e4m3 or e5m2: the k cache's element type (docs/design.md §1,\n"
     "\"KV dtypes and scales\"); FP8 values are the recipe's rounded to it"},
    {"v-dtype", GEN_V_DTYPE, "T", "the v cache's (with --k-dtype); default the k cache's"},
    {"scales", GEN_SCALES, "G",
     "none, tensor, head or token: the f32 scales' granularity (FP8\n"
     "caches only); default tensor for FP8 caches"},
    {"k-scale", GEN_K_SCALE, "X", "the base k scale (finite, > 0); default 1"},
    {"v-scale", GEN_V_SCALE, "X", "the base v scale; default 1"},
    {"scale-spread", GEN_SPREAD, "N",
     "per-head and per-token scales: the base times 2^u, u uniform in\n[-N, N] (0..64); default 0"},
    {"fine-scales", GEN_FINE, NULL, "per-head and per-token scales also get a random significand"},
    {NULL, 'o', "FILE", "output path (written atomically)"},
    {0},
};

static void gen_help(void) {
    printf("usage: kvfuzz gen [--seed N] [--preset NAME | --random] [--expansion N]\n"
           "                  [--k-dtype T [--v-dtype T] [--scales G] [--k-scale X]\n"
           "                  [--v-scale X] [--scale-spread N] [--fine-scales]] -o FILE\n\n"
           "Writes a .kvfz case file (a recipe the generator expands deterministically).\n\n");
    cli_print_options(stdout, gen_options);
    printf("\npresets:\n");
    for (size_t i = 0; i < kvf_preset_count(); i++)
        printf("  %-22s %s\n", kvf_preset_name(i), kvf_preset_description(i));
}

int kvf_cmd_gen(int argc, char **argv) {
    const char *cmd = "gen", *preset = NULL, *out = NULL;
    uint64_t seed = 1;
    int64_t expansion = KVF_EXPANSION_DEFAULT;
    int random = 0, kd = -1, vd = -1, gran = -1, fine = 0;
    int64_t spread = 0;
    double kscale = 1.0, vscale = 1.0;
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, gen_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            gen_help();
            return KVF_EXIT_OK;
        case CLI_ERROR:
            return KVF_EXIT_USAGE;
        case GEN_RANDOM:
            random = 1;
            break;
        case GEN_PRESET:
            preset = v;
            break;
        case 'o':
            out = v;
            break;
        case GEN_SEED:
            if (cli_opt_u64(cmd, "--seed", v, &seed)) return KVF_EXIT_USAGE;
            break;
        case GEN_EXPANSION:
            if (cli_opt_i64(cmd, "--expansion", v, KVF_EXPANSION_1, KVF_EXPANSION_2, &expansion))
                return KVF_EXIT_USAGE;
            break;
        case GEN_K_DTYPE:
        case GEN_V_DTYPE:
            if ((*(key == GEN_K_DTYPE ? &kd : &vd) = kvf_kv_dtype_parse(v)) < 0)
                return cli_usage_error(cmd, "%s \"%s\" is not bf16, e4m3 or e5m2",
                                       key == GEN_K_DTYPE ? "--k-dtype" : "--v-dtype", v);
            break;
        case GEN_SCALES:
            if ((gran = kvf_scale_granularity_parse(v)) < 0)
                return cli_usage_error(cmd, "--scales \"%s\" is not none, tensor, head or token",
                                       v);
            break;
        case GEN_K_SCALE:
        case GEN_V_SCALE:
            if (cli_opt_scale(cmd, key == GEN_K_SCALE ? "--k-scale" : "--v-scale", v,
                              key == GEN_K_SCALE ? &kscale : &vscale))
                return KVF_EXIT_USAGE;
            break;
        case GEN_SPREAD:
            if (cli_opt_i64(cmd, "--scale-spread", v, 0, KVF_QUANT_MAX_SPREAD, &spread))
                return KVF_EXIT_USAGE;
            break;
        case GEN_FINE:
            fine = 1;
            break;
        }
    }
    /* The quantization, from the options (kvf_quant_recipe_check says what is wrong). */
    kvf_quant_recipe quant = {0};
    const int quantized =
        kd >= 0 || vd >= 0 || gran >= 0 || kscale != 1.0 || vscale != 1.0 || spread || fine;
    /* The usage nests --v-dtype under --k-dtype: alone it would leave the k cache's type to a
     * guess (bf16, or the v cache's). */
    if (vd >= 0 && kd < 0)
        return cli_usage_error(cmd, "--v-dtype needs --k-dtype: give the k cache's type too "
                                    "(bf16, e4m3 or e5m2)");
    if (quantized) {
        quant.kv.k_dtype = (uint8_t)(kd >= 0 ? kd : KVF_KV_BF16);
        quant.kv.v_dtype = (uint8_t)(vd >= 0 ? vd : quant.kv.k_dtype);
        const int fp8 =
            kvf_kv_dtype_is_fp8(quant.kv.k_dtype) && kvf_kv_dtype_is_fp8(quant.kv.v_dtype);
        quant.kv.granularity = (uint8_t)(gran >= 0 ? gran : fp8 ? KVF_SCALE_TENSOR : 0);
        quant.k_scale = (float)kscale;
        quant.v_scale = (float)vscale;
        quant.spread = (uint8_t)spread;
        quant.fine = (uint8_t)fine;
        if (kvf_kv_quant_is_plain(&quant.kv) && (kscale != 1.0 || vscale != 1.0 || spread || fine))
            return cli_usage_error(cmd, "scale options need FP8 caches (--k-dtype e4m3 or e5m2)");
        if (kvf_kv_quant_is_plain(&quant.kv)) memset(&quant, 0, sizeof quant);
    }
    char **rest;
    if (cli_operands(&p, &rest))
        return cli_usage_error(cmd, "unexpected argument \"%s\" (see kvfuzz gen --help)", rest[0]);
    if (random && preset) return cli_usage_error(cmd, "give --preset or --random, not both");
    if (!preset) preset = "seed-h20kv4";
    if (!out) return cli_usage_error(cmd, "-o FILE is required");
    kvf_limits limits;
    cli_limits(&limits);
    kvf_spec spec;
    kvf_error err = {0};
    if (kvf_spec_make(&spec, random ? NULL : preset, seed, (int)expansion,
                      quantized ? &quant : NULL, &limits, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    int rc = kvf_spec_save(&spec, out, &err);
    kvf_spec_free(&spec);
    if (rc) return cli_usage_error(cmd, "%s", err.msg);
    return KVF_EXIT_OK;
}

/* ---- show --------------------------------------------------------------------------------- */

enum { SHOW_FULL = 256 };

static const cli_option show_options[] = {
    {"full", SHOW_FULL, NULL,
     "also every tensor value as bf16 hex bits (k and v: the resident\npages only), on one line"},
    {0},
};

static void show_help(void) {
    printf("usage: kvfuzz show [--full] FILE\n\n"
           "Prints the case as JSON: shape, page table, lengths, the recipe it came from, and\n"
           "a summary of the values (q, and k/v over the tokens sequences use; min, max and\n"
           "the means are null when no value is finite).\n\n");
    cli_print_options(stdout, show_options);
}

int kvf_cmd_show(int argc, char **argv) {
    const char *cmd = "show", *path = NULL;
    int full = 0;
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, show_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            show_help();
            return KVF_EXIT_OK;
        case CLI_ERROR:
            return KVF_EXIT_USAGE;
        case SHOW_FULL:
            full = 1;
            break;
        }
    }
    char **rest;
    int nrest = cli_operands(&p, &rest);
    if (nrest == 0) return cli_usage_error(cmd, "FILE is required");
    if (nrest > 1)
        return cli_usage_error(cmd, "one FILE at a time, got \"%s\" and \"%s\"", rest[0], rest[1]);
    path = rest[0];
    kvf_limits limits;
    cli_limits(&limits);
    kvf_spec spec;
    kvf_case c;
    kvf_error err = {0};
    if (kvf_case_load(path, &spec, &c, &limits, &err))
        return cli_usage_error(cmd, "%s: %s", path, err.msg);
    json_t *root = kvf_case_json(path, &spec, &c, full);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
    int rc = root ? kvf_json_dump(root, stdout, full ? 0 : 2) : -1;
    json_decref(root);
    if (rc) {
        fprintf(stderr, "kvfuzz show: %s\n", root ? "cannot write the JSON" : "out of memory");
        return KVF_EXIT_FINDINGS;
    }
    return KVF_EXIT_OK;
}

/* ---- oracle ------------------------------------------------------------------------------- */

enum { ORACLE_JSON = 256, ORACLE_JOBS, ORACLE_PATH };

static const cli_option oracle_options[] = {
    {"json", ORACLE_JSON, NULL,
     "JSON instead of text (non-finite numbers as \"NaN\",\n\"Infinity\", \"-Infinity\")"},
    {"jobs", ORACLE_JOBS, "N", "oracle threads (default 1)"},
    {"oracle", ORACLE_PATH, "P",
     "oracle path: fast (default: double arithmetic with a certified\nbound, MPFR for what it "
     "cannot certify) or mpfr (MPFR for\nevery row); both give the same correctly rounded "
     "results."},
    {0},
};

static void oracle_help(void) {
    printf("usage: kvfuzz oracle [--json] [--jobs N] [--oracle fast|mpfr] FILE\n\n"
           "Prints the MPFR oracle's correctly rounded outputs for the case: o as bf16 (hex bits\n"
           "and decimal) per (sequence, q head, dim), lse as f32 (hex bits and decimal) per\n"
           "(sequence, q head), with the exact value rounded to double beside each, so the\n"
           "answer can be checked against any other arbitrary-precision implementation.\n\n");
    cli_print_options(stdout, oracle_options);
}

/* The oracle's answer as JSON (kvfuzz/oracle_json.h) on stdout: 0, or -1 when memory ran out or
 * the JSON could not be written. */
static int print_oracle_json(const kvf_case *c, const kvf_oracle_result *r) {
    json_t *root = kvf_oracle_json(c, r);
    int bad = !root || kvf_json_dump(root, stdout, 0) != 0;
    json_decref(root);
    return bad ? -1 : 0;
}

int kvf_cmd_oracle(int argc, char **argv) {
    const char *cmd = "oracle", *path = NULL;
    int json = 0;
    int64_t jobs = 1;
    int oracle_path = kvf_oracle_default_path();
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, oracle_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        switch (key) {
        case CLI_HELP:
            oracle_help();
            return KVF_EXIT_OK;
        case CLI_ERROR:
            return KVF_EXIT_USAGE;
        case ORACLE_JSON:
            json = 1;
            break;
        case ORACLE_JOBS:
            if (cli_opt_i64(cmd, "--jobs", v, 1, 1024, &jobs)) return KVF_EXIT_USAGE;
            break;
        case ORACLE_PATH:
            if (kvf_oracle_path_parse(v, &oracle_path))
                return cli_usage_error(cmd, "--oracle needs fast or mpfr, got \"%s\"", v);
            break;
        }
    }
    char **rest;
    int nrest = cli_operands(&p, &rest);
    if (nrest > 1)
        return cli_usage_error(cmd, "one FILE at a time, got \"%s\" and \"%s\"", rest[0], rest[1]);
    if (nrest == 1) path = rest[0];
    if (!path) return cli_usage_error(cmd, "FILE is required");
    kvf_limits limits;
    cli_limits(&limits);
    kvf_case c;
    kvf_error err = {0};
    if (kvf_case_load(path, NULL, &c, &limits, &err))
        return cli_usage_error(cmd, "%s: %s", path, err.msg);
    kvf_oracle_opts opts;
    kvf_oracle_opts_default(&opts);
    opts.threads = (int)jobs;
    opts.path = oracle_path;
    kvf_oracle_result r;
    if (kvf_oracle_run(&r, &c, &opts, &err)) {
        cli_usage_error("oracle", "%s: %s", path, err.msg);
        kvf_case_free(&c);
        return KVF_EXIT_FINDINGS;
    }
    const int32_t hq = c.num_qo_heads, d = c.head_dim;
    if (json) {
        int rc = print_oracle_json(&c, &r);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
        if (rc) {
            fprintf(stderr, "kvfuzz oracle: out of memory writing JSON\n");
            return KVF_EXIT_FINDINGS;
        }
        return KVF_EXIT_OK;
    }
    for (int32_t b = 0; b < c.batch_size; b++)
        for (int32_t h = 0; h < hq; h++) {
            int64_t row = (int64_t)b * hq + h;
            float l = r.lse_rounded[row];
            printf("b=%d h=%d length=%" PRId64 "%s lse=%08x (%.9g) exact %.17g\n", b, h,
                   r.rows[row].length, r.rows[row].overflow ? " overflow" : "", kvf_f32_bits(l),
                   (double)l, r.lse_exact[row]);
            for (int32_t i = 0; i < d; i++) {
                kvf_bf16 ob = r.o_rounded[row * d + i];
                printf("  o[%d]=%04x (%.9g) exact %.17g\n", i, ob, (double)kvf_bf16_to_f32(ob),
                       r.o_exact[row * d + i]);
            }
        }
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
    return KVF_EXIT_OK;
}

/* ---- rules -------------------------------------------------------------------------------- */

static const cli_option rules_options[] = {{0}};

int kvf_cmd_rules(int argc, char **argv) {
    cli_parser p;
    cli_parser_init(&p, "rules", argc, argv, rules_options);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        if (key == CLI_ERROR) return KVF_EXIT_USAGE;
        if (key == CLI_HELP) {
            printf("usage: kvfuzz rules\n\nLists the tolerance rules, one per line, with the "
                   "syntax the --rule option of\nreplay, fuzz and minimize accepts, each "
                   "followed by what it is for and its known\nblind spots, and the default "
                   "rule set, then the precision models strict and fa take.\n\n");
            cli_print_options(stdout, rules_options);
            return KVF_EXIT_OK;
        }
    }
    char **rest;
    if (cli_operands(&p, &rest))
        return cli_usage_error("rules", "takes no arguments, got \"%s\"", rest[0]);
    for (int k = 0; k < KVF_RULE_KIND_COUNT; k++)
        printf("%s\n    %s\n", kvf_rule_help((kvf_rule_kind)k), kvf_rule_scope((kvf_rule_kind)k));
    printf("\n%s\n", kvf_precision_help());
    kvf_rule set[KVF_DEFAULT_RULES];
    int n = kvf_rule_default_set(set, KVF_DEFAULT_RULES);
    printf("default set (replay, fuzz):");
    for (int i = 0; i < n; i++)
        printf(" %s", set[i].name);
    printf("\n");
    return KVF_EXIT_OK;
}
