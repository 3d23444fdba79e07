/* kvfuzz gen / show / oracle / kernels / rules: making, reading and explaining cases. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"

/* ---- gen ---------------------------------------------------------------------------------- */

enum { GEN_SEED = 256, GEN_PRESET, GEN_RANDOM, GEN_EXPANSION };

static const cli_option gen_options[] = {
    {"seed", GEN_SEED, "N", "seed for the values (and, with --random, for the recipe); default 1"},
    {"preset", GEN_PRESET, "NAME", "one of the presets below (default seed-h20kv4)"},
    {"random", GEN_RANDOM, NULL, "a random recipe over every generator strategy, not a preset"},
    {"expansion", GEN_EXPANSION, "N",
     "1 or 2: how the recipe expands into tensors, written as the file's\n"
     "version (docs/case-format.md); default 2, the faster one. 1 writes\n"
     "the version 1 file of the recipe (what the shipped seeds are)"},
    {NULL, 'o', "FILE", "output path (written atomically)"},
    {0},
};

static void gen_help(void) {
    printf("usage: kvfuzz gen [--seed N] [--preset NAME | --random] [--expansion N] -o FILE\n\n"
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
    int random = 0;
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
        }
    }
    char **rest;
    if (cli_operands(&p, &rest))
        return cli_usage_error(cmd, "unexpected argument \"%s\" (see kvfuzz gen --help)", rest[0]);
    if (random && preset) return cli_usage_error(cmd, "give --preset or --random, not both");
    if (!preset) preset = "seed-h20kv4";
    if (!out) return cli_usage_error(cmd, "-o FILE is required");
    kvf_spec spec;
    kvf_error err = {0};
    kvf_random_opts ropts;
    kvf_random_opts_default(&ropts);
    ropts.expansion = (int)expansion;
    int rc = random ? kvf_spec_random(&spec, seed, &ropts, &err)
                    : kvf_spec_preset(&spec, preset, seed, &err);
    if (rc) return cli_usage_error(cmd, "%s", err.msg);
    spec.recipe.expansion = (uint8_t)expansion;
    kvf_limits limits;
    cli_limits(&limits);
    kvf_case c;
    if ((rc = kvf_case_build(&c, &spec, &limits, &err))) {
        kvf_spec_free(&spec);
        return cli_usage_error(cmd, "the recipe does not build: %s", err.msg);
    }
    kvf_case_free(&c);
    rc = kvf_spec_save(&spec, out, &err);
    kvf_spec_free(&spec);
    if (rc) return cli_usage_error(cmd, "%s", err.msg);
    return KVF_EXIT_OK;
}

/* ---- show --------------------------------------------------------------------------------- */

typedef struct value_summary {
    int64_t count, nan, inf, zero;
    double min, max, sum, sum_abs;
} value_summary;

static void summarize_add(value_summary *s, kvf_bf16 x) {
    s->count++;
    if (kvf_bf16_is_nan(x)) {
        s->nan++;
        return;
    }
    if (kvf_bf16_is_inf(x)) {
        s->inf++;
        return;
    }
    double v = kvf_bf16_to_f32(x);
    if (v == 0) s->zero++;
    if (s->count - s->nan - s->inf == 1 || v < s->min) s->min = v;
    if (s->count - s->nan - s->inf == 1 || v > s->max) s->max = v;
    s->sum += v;
    s->sum_abs += fabs(v);
}

/* The summary as JSON; min, max and the means are null when no value is finite (never a
 * number standing for "none"). */
static json_t *summary_json(const value_summary *s) {
    int64_t finite = s->count - s->nan - s->inf;
    json_t *o = json_object();
    if (!o) return NULL;
    int bad =
        kvf_json_set(o, "count", json_integer(s->count)) ||
        kvf_json_set(o, "nan", json_integer(s->nan)) ||
        kvf_json_set(o, "inf", json_integer(s->inf)) ||
        kvf_json_set(o, "zero", json_integer(s->zero)) ||
        kvf_json_set(o, "min", finite ? kvf_json_number(s->min) : json_null()) ||
        kvf_json_set(o, "max", finite ? kvf_json_number(s->max) : json_null()) ||
        kvf_json_set(o, "mean", finite ? kvf_json_number(s->sum / (double)finite) : json_null()) ||
        kvf_json_set(o, "mean_abs",
                     finite ? kvf_json_number(s->sum_abs / (double)finite) : json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* bf16 values as an array of 4-digit hex strings (their bits). */
static json_t *hex_array(const kvf_bf16 *x, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++) {
        char hex[8];
        snprintf(hex, sizeof hex, "%04x", x[i]);
        if (kvf_json_push(a, json_string(hex))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *i32_array(const int32_t *x, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++)
        if (kvf_json_push(a, json_integer(x[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

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

/* The case as a JSON object; NULL when memory ran out. */
static json_t *show_json(const char *path, const kvf_spec *spec, const kvf_case *c, int full) {
    const kvf_recipe *rp = &spec->recipe;
    json_t *root = json_object(), *shape = json_object(), *lens = json_array();
    json_t *recipe = json_object(), *overrides = json_array(), *values = json_object();
    char bits[16];
    snprintf(bits, sizeof bits, "%08x", kvf_f32_bits(c->sm_scale));
    int bad = !root || kvf_json_set(root, "file", json_string(path)) ||
              kvf_json_set(root, "format_version",
                           json_integer(rp->expansion == KVF_EXPANSION_2 ? 2 : 1)) ||
              kvf_json_set(root, "shape", shape) ||
              kvf_json_set(shape, "num_qo_heads", json_integer(c->num_qo_heads)) ||
              kvf_json_set(shape, "num_kv_heads", json_integer(c->num_kv_heads)) ||
              kvf_json_set(shape, "group", json_integer(c->num_qo_heads / c->num_kv_heads)) ||
              kvf_json_set(shape, "head_dim", json_integer(c->head_dim)) ||
              kvf_json_set(shape, "page_size", json_integer(c->page_size)) ||
              kvf_json_set(root, "batch_size", json_integer(c->batch_size)) ||
              kvf_json_set(root, "num_pages", json_integer(c->num_pages)) ||
              kvf_json_set(root, "sm_scale", kvf_json_number((double)c->sm_scale)) ||
              kvf_json_set(root, "sm_scale_bits", json_string(bits)) ||
              kvf_json_set(root, "total_tokens", json_integer(kvf_case_total_tokens(c))) ||
              kvf_json_set(root, "seq_lens", lens);
    shape = lens = NULL; /* owned by root now (or released) */
    json_t *seq = json_object_get(root, "seq_lens");
    for (int32_t b = 0; !bad && b < c->batch_size; b++)
        bad = kvf_json_push(seq, json_integer(kvf_case_seq_len(c, b)));
    bad = bad || kvf_json_set(root, "kv_indptr", i32_array(c->kv_indptr, c->batch_size + 1)) ||
          kvf_json_set(root, "kv_indices", i32_array(c->kv_indices, c->kv_indptr[c->batch_size])) ||
          kvf_json_set(root, "kv_last_page_len", i32_array(c->kv_last_page_len, c->batch_size));
    int rbad = kvf_json_set(root, "recipe", recipe);
    bad = bad || rbad || kvf_json_set(recipe, "table", json_string(kvf_table_name(rp->table))) ||
          kvf_json_set(recipe, "logits", json_string(kvf_logits_name(rp->logits))) ||
          kvf_json_set(recipe, "poison", json_integer(rp->poison)) ||
          kvf_json_set(recipe, "page_id_base", json_integer(rp->page_id_base)) ||
          kvf_json_set(recipe, "spare_pages", json_integer(rp->spare_pages)) ||
          /* A seed past 2^63 does not fit jansson's integer: its decimal digits then. */
          kvf_json_set(recipe, "seed",
                       rp->seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)rp->seed)
                                                       : json_real((double)rp->seed));
    const kvf_dist *dists[3] = {&rp->q, &rp->k, &rp->v};
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; !bad && i < 3; i++) {
        json_t *d = json_object();
        bad = kvf_json_set(recipe, names[i], d) ||
              kvf_json_set(d, "dist", json_string(kvf_dist_name(dists[i]->kind))) ||
              kvf_json_set(d, "log2_scale", json_integer(dists[i]->log2_scale)) ||
              kvf_json_set(d, "param", json_integer(dists[i]->param));
    }
    int obad = kvf_json_set(root, "overrides", overrides);
    bad = bad || obad;
    for (uint32_t i = 0; !bad && i < spec->num_overrides; i++) {
        json_t *ov = json_object();
        bad = kvf_json_push(overrides, ov) ||
              kvf_json_set(ov, "target", json_integer(spec->overrides[i].target)) ||
              kvf_json_set(ov, "index", json_integer((json_int_t)spec->overrides[i].index)) ||
              kvf_json_set(ov, "value", json_integer(spec->overrides[i].value));
    }
    bad = bad || kvf_json_set(root, "explicit_tensors", json_boolean(spec->has_explicit));
    if (!bad && spec->has_origin) { /* where an imported case came from (import-fib) */
        const kvf_origin *og = &spec->origin;
        json_t *origin = json_object(), *rnd = json_array();
        static const struct {
            unsigned bit;
            const char *name;
        } inputs[] = {{KVF_ORIGIN_RANDOM_Q, "q"},
                      {KVF_ORIGIN_RANDOM_K, "k_cache"},
                      {KVF_ORIGIN_RANDOM_V, "v_cache"}};
        bad = kvf_json_set(root, "origin", origin) ||
              kvf_json_set(origin, "definition", json_string(og->definition)) ||
              kvf_json_set(origin, "workload_uuid", json_string(og->workload_uuid)) ||
              kvf_json_set(origin, "random_inputs", rnd) ||
              kvf_json_set(origin, "random_seed", json_integer((json_int_t)og->random_seed));
        for (size_t i = 0; !bad && i < sizeof inputs / sizeof inputs[0]; i++)
            if (og->random_inputs & inputs[i].bit)
                bad = kvf_json_push(rnd, json_string(inputs[i].name));
    }
    value_summary sq = {0}, sk = {0}, sv = {0};
    for (int64_t i = 0; i < kvf_case_q_elems(c); i++)
        summarize_add(&sq, c->q[i]);
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++)
            for (int32_t g = 0; g < c->num_kv_heads; g++)
                for (int32_t d = 0; d < c->head_dim; d++) {
                    int64_t off = kvf_case_kv_offset(c, b, t, g, d);
                    summarize_add(&sk, c->k_cache[off]);
                    summarize_add(&sv, c->v_cache[off]);
                }
    int vbad = kvf_json_set(root, "values", values);
    bad = bad || vbad || kvf_json_set(values, "q", summary_json(&sq)) ||
          kvf_json_set(values, "k_used", summary_json(&sk)) ||
          kvf_json_set(values, "v_used", summary_json(&sv)) ||
          kvf_json_set(root, "resident_pages", json_integer(c->num_resident_pages));
    if (full && !bad) {
        int64_t pe = kvf_case_page_elems(c);
        json_t *pages = json_array();
        bad = kvf_json_set(root, "q", hex_array(c->q, kvf_case_q_elems(c))) ||
              kvf_json_set(root, "pages", pages);
        for (int64_t i = 0; !bad && i < c->num_resident_pages; i++) {
            int64_t page = c->resident_pages[i];
            json_t *pg = json_object();
            bad = kvf_json_push(pages, pg) || kvf_json_set(pg, "page", json_integer(page)) ||
                  kvf_json_set(pg, "k", hex_array(c->k_cache + page * pe, pe)) ||
                  kvf_json_set(pg, "v", hex_array(c->v_cache + page * pe, pe));
        }
    }
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
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
    json_t *root = show_json(path, &spec, &c, full);
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

/* The oracle's answer as JSON (jansson): per row its length, the overflow flag, the rounded
 * lse (bits and value) and the exact lse, and per o element [bits, rounded, exact]. The empty
 * sequence's -inf lse and any NaN are written as "-Infinity" / "NaN", never as bare tokens. */
static int print_oracle_json(const kvf_case *c, const kvf_oracle_result *r) {
    const int32_t hq = c->num_qo_heads, d = c->head_dim;
    json_t *root = json_object(), *rows = json_array();
    int bad = !root || !rows;
    bad = bad || kvf_json_set(root, "batch_size", json_integer(c->batch_size)) ||
          kvf_json_set(root, "num_qo_heads", json_integer(hq)) ||
          kvf_json_set(root, "head_dim", json_integer(d)) || json_object_set(root, "rows", rows);
    for (int32_t b = 0; !bad && b < c->batch_size; b++)
        for (int32_t h = 0; !bad && h < hq; h++) {
            int64_t row = (int64_t)b * hq + h;
            float l = r->lse_rounded[row];
            char bits[16];
            snprintf(bits, sizeof bits, "%08x", kvf_f32_bits(l));
            json_t *o = json_object(), *arr = json_array();
            bad = kvf_json_push(rows, o) || !arr || kvf_json_set(o, "b", json_integer(b)) ||
                  kvf_json_set(o, "h", json_integer(h)) ||
                  kvf_json_set(o, "length", json_integer(r->rows[row].length)) ||
                  kvf_json_set(o, "overflow", json_boolean(r->rows[row].overflow)) ||
                  kvf_json_set(o, "lse_bits", json_string(bits)) ||
                  kvf_json_set(o, "lse", kvf_json_number((double)l)) ||
                  kvf_json_set(o, "lse_exact", kvf_json_number(r->lse_exact[row])) ||
                  json_object_set(o, "o", arr);
            for (int32_t i = 0; !bad && i < d; i++) {
                kvf_bf16 ob = r->o_rounded[row * d + i];
                char obits[8];
                snprintf(obits, sizeof obits, "%04x", ob);
                json_t *e = json_array();
                bad = kvf_json_push(arr, e) || kvf_json_push(e, json_string(obits)) ||
                      kvf_json_push(e, kvf_json_number((double)kvf_bf16_to_f32(ob))) ||
                      kvf_json_push(e, kvf_json_number(r->o_exact[row * d + i]));
            }
            json_decref(arr);
        }
    json_decref(rows);
    if (!bad) bad = kvf_json_dump(root, stdout, 0) != 0;
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
