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

static void gen_help(void) {
    printf("usage: kvfuzz gen [--seed N] [--preset NAME | --random] -o FILE\n\n"
           "Writes a .kvfz case file (a recipe the generator expands deterministically).\n\n"
           "  --seed N      seed for the values (and, with --random, for the recipe); default 1\n"
           "  --preset NAME one of the presets below (default seed-h20kv4)\n"
           "  --random      a random recipe over every generator strategy instead of a preset\n"
           "  -o FILE       output path (written atomically)\n\npresets:\n");
    for (size_t i = 0; i < kvf_preset_count(); i++)
        printf("  %-22s %s\n", kvf_preset_name(i), kvf_preset_description(i));
}

int kvf_cmd_gen(int argc, char **argv) {
    const char *cmd = "gen", *preset = "seed-h20kv4", *out = NULL;
    uint64_t seed = 1;
    int random = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            gen_help();
            return KVF_EXIT_OK;
        } else if (strcmp(a, "--random") == 0) {
            random = 1;
        } else if (strcmp(a, "--seed") == 0 || strcmp(a, "--preset") == 0 || strcmp(a, "-o") == 0) {
            if (i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a);
            const char *v = argv[++i];
            if (a[1] == 'o')
                out = v;
            else if (a[2] == 'p')
                preset = v;
            else if (cli_parse_u64(v, &seed))
                return cli_usage_error(cmd, "--seed must be a non-negative integer, got \"%s\"", v);
        } else {
            return cli_usage_error(cmd, "unexpected argument \"%s\" (see kvfuzz gen --help)", a);
        }
    }
    if (!out) return cli_usage_error(cmd, "-o FILE is required");
    kvf_spec spec;
    kvf_error err = {0};
    kvf_random_opts ropts;
    kvf_random_opts_default(&ropts);
    int rc = random ? kvf_spec_random(&spec, seed, &ropts, &err)
                    : kvf_spec_preset(&spec, preset, seed, &err);
    if (rc) return cli_usage_error(cmd, "%s", err.msg);
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

static void print_summary(FILE *f, const char *name, const value_summary *s) {
    int64_t finite = s->count - s->nan - s->inf;
    fprintf(f,
            "    \"%s\": {\"count\": %" PRId64 ", \"nan\": %" PRId64 ", \"inf\": %" PRId64
            ", \"zero\": %" PRId64 ", \"min\": %.9g, \"max\": %.9g, \"mean\": %.9g, "
            "\"mean_abs\": %.9g}",
            name, s->count, s->nan, s->inf, s->zero, finite ? s->min : 0.0, finite ? s->max : 0.0,
            finite ? s->sum / (double)finite : 0.0, finite ? s->sum_abs / (double)finite : 0.0);
}

static void print_hex_array(FILE *f, const kvf_bf16 *x, int64_t n) {
    fputc('[', f);
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%s\"%04x\"", i ? "," : "", x[i]);
    fputc(']', f);
}

static void show_help(void) {
    printf("usage: kvfuzz show [--full] FILE\n\n"
           "Prints the case as JSON: shape, page table, lengths, the recipe it came from, and\n"
           "a summary of the values (q, and k/v over the tokens sequences use). With --full,\n"
           "also every tensor value as bf16 hex bits (k and v: the resident pages only).\n");
}

int kvf_cmd_show(int argc, char **argv) {
    const char *cmd = "show", *path = NULL;
    int full = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            show_help();
            return KVF_EXIT_OK;
        } else if (strcmp(argv[i], "--full") == 0) {
            full = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(cmd, "unknown option \"%s\" (see kvfuzz show --help)", argv[i]);
        } else if (path) {
            return cli_usage_error(cmd, "one FILE at a time, got \"%s\" and \"%s\"", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path) return cli_usage_error(cmd, "FILE is required");
    kvf_limits limits;
    cli_limits(&limits);
    kvf_spec spec;
    kvf_case c;
    kvf_error err = {0};
    if (kvf_case_load(path, &spec, &c, &limits, &err))
        return cli_usage_error(cmd, "%s: %s", path, err.msg);
    const kvf_recipe *rp = &spec.recipe;
    FILE *f = stdout;
    fprintf(f, "{\n  \"file\": ");
    cli_json_string(f, path);
    fprintf(f, ",\n  \"format_version\": %d,\n", KVF_FORMAT_VERSION);
    fprintf(f,
            "  \"shape\": {\"num_qo_heads\": %d, \"num_kv_heads\": %d, \"group\": %d, "
            "\"head_dim\": %d, \"page_size\": %d},\n",
            c.num_qo_heads, c.num_kv_heads, c.num_qo_heads / c.num_kv_heads, c.head_dim,
            c.page_size);
    fprintf(f,
            "  \"batch_size\": %d,\n  \"num_pages\": %" PRId64 ",\n  \"sm_scale\": %.9g,\n"
            "  \"sm_scale_bits\": \"%08x\",\n",
            c.batch_size, c.num_pages, (double)c.sm_scale, kvf_f32_bits(c.sm_scale));
    fprintf(f, "  \"total_tokens\": %" PRId64 ",\n  \"seq_lens\": [", kvf_case_total_tokens(&c));
    for (int32_t b = 0; b < c.batch_size; b++)
        fprintf(f, "%s%" PRId64, b ? ", " : "", kvf_case_seq_len(&c, b));
    fprintf(f, "],\n  \"kv_indptr\": [");
    for (int32_t b = 0; b <= c.batch_size; b++)
        fprintf(f, "%s%d", b ? ", " : "", c.kv_indptr[b]);
    fprintf(f, "],\n  \"kv_indices\": [");
    for (int32_t i = 0; i < c.kv_indptr[c.batch_size]; i++)
        fprintf(f, "%s%d", i ? ", " : "", c.kv_indices[i]);
    fprintf(f, "],\n  \"kv_last_page_len\": [");
    for (int32_t b = 0; b < c.batch_size; b++)
        fprintf(f, "%s%d", b ? ", " : "", c.kv_last_page_len[b]);
    fprintf(f,
            "],\n  \"recipe\": {\"table\": \"%s\", \"logits\": \"%s\", \"poison\": %u, "
            "\"page_id_base\": %u, \"spare_pages\": %u, \"seed\": %" PRIu64 ",\n",
            kvf_table_name(rp->table), kvf_logits_name(rp->logits), rp->poison, rp->page_id_base,
            rp->spare_pages, rp->seed);
    const kvf_dist *dists[3] = {&rp->q, &rp->k, &rp->v};
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        fprintf(f, "    \"%s\": {\"dist\": \"%s\", \"log2_scale\": %d, \"param\": %u}%s\n",
                names[i], kvf_dist_name(dists[i]->kind), dists[i]->log2_scale, dists[i]->param,
                i < 2 ? "," : "");
    fprintf(f, "  },\n  \"overrides\": [");
    for (uint32_t i = 0; i < spec.num_overrides; i++)
        fprintf(f, "%s{\"target\": %u, \"index\": %" PRIu64 ", \"value\": %u}", i ? ", " : "",
                spec.overrides[i].target, spec.overrides[i].index, spec.overrides[i].value);
    fprintf(f, "],\n  \"explicit_tensors\": %s,\n", spec.has_explicit ? "true" : "false");
    if (spec.has_origin) {
        const kvf_origin *o = &spec.origin;
        fprintf(f,
                "  \"origin\": {\"definition\": \"%s\", \"workload_uuid\": \"%s\", "
                "\"random_inputs\": [%s%s%s], \"random_seed\": %" PRIu64 "},\n",
                o->definition, o->workload_uuid,
                (o->random_inputs & KVF_ORIGIN_RANDOM_Q) ? "\"q\"" : "",
                (o->random_inputs & KVF_ORIGIN_RANDOM_K)
                    ? ((o->random_inputs & KVF_ORIGIN_RANDOM_Q) ? ", \"k_cache\"" : "\"k_cache\"")
                    : "",
                (o->random_inputs & KVF_ORIGIN_RANDOM_V)
                    ? ((o->random_inputs & 3) ? ", \"v_cache\"" : "\"v_cache\"")
                    : "",
                o->random_seed);
    }
    value_summary sq = {0}, sk = {0}, sv = {0};
    for (int64_t i = 0; i < kvf_case_q_elems(&c); i++)
        summarize_add(&sq, c.q[i]);
    for (int32_t b = 0; b < c.batch_size; b++)
        for (int64_t t = 0; t < kvf_case_seq_len(&c, b); t++)
            for (int32_t g = 0; g < c.num_kv_heads; g++)
                for (int32_t d = 0; d < c.head_dim; d++) {
                    int64_t off = kvf_case_kv_offset(&c, b, t, g, d);
                    summarize_add(&sk, c.k_cache[off]);
                    summarize_add(&sv, c.v_cache[off]);
                }
    fprintf(f, "  \"values\": {\n");
    print_summary(f, "q", &sq);
    fprintf(f, ",\n");
    print_summary(f, "k_used", &sk);
    fprintf(f, ",\n");
    print_summary(f, "v_used", &sv);
    fprintf(f, "\n  },\n  \"resident_pages\": %" PRId64, c.num_resident_pages);
    if (full) {
        int64_t pe = kvf_case_page_elems(&c);
        fprintf(f, ",\n  \"q\": ");
        print_hex_array(f, c.q, kvf_case_q_elems(&c));
        fprintf(f, ",\n  \"pages\": [");
        for (int64_t i = 0; i < c.num_resident_pages; i++) {
            int64_t page = c.resident_pages[i];
            fprintf(f, "%s\n    {\"page\": %" PRId64 ", \"k\": ", i ? "," : "", page);
            print_hex_array(f, c.k_cache + page * pe, pe);
            fprintf(f, ", \"v\": ");
            print_hex_array(f, c.v_cache + page * pe, pe);
            fputc('}', f);
        }
        fprintf(f, "\n  ]");
    }
    fprintf(f, "\n}\n");
    kvf_case_free(&c);
    kvf_spec_free(&spec);
    return KVF_EXIT_OK;
}

/* ---- oracle ------------------------------------------------------------------------------- */

static void oracle_help(void) {
    printf("usage: kvfuzz oracle [--json] [--jobs N] [--oracle fast|mpfr] FILE\n\n"
           "Prints the MPFR oracle's correctly rounded outputs for the case: o as bf16 (hex bits\n"
           "and decimal) per (sequence, q head, dim), lse as f32 (hex bits and decimal) per\n"
           "(sequence, q head), with the exact value rounded to double beside each, so the\n"
           "answer can be checked against any other arbitrary-precision implementation.\n\n"
           "  --oracle P  oracle path: fast (default: double arithmetic with a certified\n"
           "              bound, MPFR for what it cannot certify) or mpfr (MPFR for\n"
           "              every row); both give the same correctly rounded results.\n");
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
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            oracle_help();
            return KVF_EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--jobs") == 0) {
            if (i + 1 >= argc || cli_parse_i64(argv[i + 1], 1, 1024, &jobs))
                return cli_usage_error(cmd, "--jobs needs an integer in [1, 1024]");
            i++;
        } else if (strcmp(argv[i], "--oracle") == 0) {
            if (i + 1 >= argc || kvf_oracle_path_parse(argv[i + 1], &oracle_path))
                return cli_usage_error(cmd, "--oracle needs fast or mpfr");
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(cmd, "unknown option \"%s\" (see kvfuzz oracle --help)",
                                   argv[i]);
        } else if (path) {
            return cli_usage_error(cmd, "one FILE at a time, got \"%s\" and \"%s\"", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
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
        fprintf(stderr, "kvfuzz oracle: %s: %s\n", path, err.msg);
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

int kvf_cmd_rules(int argc, char **argv) {
    if (argc > 1 && cli_is_help(argv[1])) {
        printf("usage: kvfuzz rules\n\nLists the tolerance rules, one per line, with the syntax"
               " --rule accepts,\neach followed by what it is for and its known blind spots, and"
               " the default rule set.\n");
        return KVF_EXIT_OK;
    }
    if (argc > 1) return cli_usage_error("rules", "takes no arguments, got \"%s\"", argv[1]);
    for (int k = 0; k < KVF_RULE_KIND_COUNT; k++)
        printf("%s\n    %s\n", kvf_rule_help((kvf_rule_kind)k), kvf_rule_scope((kvf_rule_kind)k));
    kvf_rule set[KVF_DEFAULT_RULES];
    int n = kvf_rule_default_set(set, KVF_DEFAULT_RULES);
    printf("default set (replay, fuzz):");
    for (int i = 0; i < n; i++)
        printf(" %s", set[i].name);
    printf("\n");
    return KVF_EXIT_OK;
}
