/* A finding's JSON report (kvfuzz/outcome.h: kvf_outcome_to_json, kvf_outcome_json), built
 * with jansson through kvfuzz/json_io.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/file.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/prng.h"

/* Built with jansson through kvfuzz/json_io.h: one escaper, one number writer, and the strings
 * "NaN", "Infinity" and "-Infinity" for what JSON cannot spell (docs/design.md §8). Every
 * builder returns NULL when memory ran out (kvf_json_set and kvf_json_push then fail too). */

static json_t *hex_bits(unsigned bits, int digits) {
    char text[16];
    snprintf(text, sizeof text, "0x%0*x", digits, bits);
    return json_string(text);
}

static json_t *dist_json(const kvf_dist *d) {
    json_t *j = json_object();
    if (!j) return NULL;
    int bad = kvf_json_set(j, "dist", json_string(kvf_dist_name(d->kind))) |
              kvf_json_set(j, "log2_scale", json_integer(d->log2_scale)) |
              kvf_json_set(j, "param", json_integer(d->param));
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

static json_t *element_json(const kvf_element_error *e) {
    int is_o = e->output == KVF_OUTPUT_O;
    json_t *j = json_object();
    if (!j) return NULL;
    char exact_hex[64];
    snprintf(exact_hex, sizeof exact_hex, "%a", e->exact_value);
    int bad = kvf_json_set(j, "output", json_string(is_o ? "o" : "lse")) |
              kvf_json_set(j, "b", json_integer(e->b)) | kvf_json_set(j, "h", json_integer(e->h)) |
              kvf_json_set(j, "d", json_integer(e->d)) |
              kvf_json_set(j, "kernel", kvf_json_number(e->kernel_value)) |
              kvf_json_set(j, "kernel_bits", hex_bits(e->kernel_bits, is_o ? 4 : 8)) |
              kvf_json_set(j, "oracle", kvf_json_number(e->rounded_value)) |
              kvf_json_set(j, "oracle_bits", hex_bits(e->rounded_bits, is_o ? 4 : 8)) |
              kvf_json_set(j, "exact", kvf_json_number(e->exact_value)) |
              kvf_json_set(j, "exact_hex", json_string(exact_hex)) |
              kvf_json_set(j, "abs_error", kvf_json_number(e->abs_error)) |
              kvf_json_set(j, "rel_error", kvf_json_number(e->rel_error)) |
              /* a NaN/inf mismatch has no distance */
              kvf_json_set(j, "ulps", e->ulps < 0 ? json_null() : json_integer(e->ulps)) |
              kvf_json_set(j, "allowed", kvf_json_number(e->allowed)) |
              kvf_json_set(j, "margin", kvf_json_number(e->margin)) |
              kvf_json_set(j, "excess_margin", kvf_json_number(e->excess_margin)) |
              kvf_json_set(j, "fails", json_boolean(e->fails)) |
              kvf_json_set(j, "out_of_model", json_boolean(e->out_of_model));
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

static json_t *metrics_json(const kvf_output_metrics *m) {
    json_t *j = json_object(), *worst = json_array();
    if (!j || !worst) {
        json_decref(j);
        json_decref(worst);
        return NULL;
    }
    int bad = 0;
    for (int i = 0; i < m->worst_count; i++)
        bad |= kvf_json_push(worst, element_json(&m->worst[i]));
    bad |= kvf_json_set(j, "elements", json_integer(m->elements)) |
           kvf_json_set(j, "violations", json_integer(m->violations)) |
           kvf_json_set(j, "max_abs", kvf_json_number(m->max_abs)) |
           kvf_json_set(j, "max_rel_fib", kvf_json_number(m->max_rel_fib)) |
           kvf_json_set(j, "max_rel_sol", kvf_json_number(m->max_rel_sol)) |
           kvf_json_set(j, "max_ulps", json_integer(m->max_ulps)) |
           kvf_json_set(j, "bits_of_error", kvf_json_number(m->bits_of_error)) |
           kvf_json_set(j, "max_margin", kvf_json_number(m->max_margin)) |
           kvf_json_set(j, "max_excess_margin", kvf_json_number(m->max_excess_margin)) |
           kvf_json_set(j, "nonfinite_mismatch", json_integer(m->nonfinite_mismatch)) |
           kvf_json_set(j, "out_of_model", json_integer(m->out_of_model)) |
           kvf_json_set(j, "violations_out_of_model", json_integer(m->violations_out_of_model)) |
           kvf_json_set(j, "violations_rounded", json_integer(m->violations_rounded)) |
           kvf_json_set(j, "worst", worst);
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

/* A 64-bit seed: a JSON integer, or past INT64_MAX (jansson's integers are signed) its decimal
 * digits as a string, so it stays exact. */
static json_t *seed_json(uint64_t seed) {
    if (seed <= (uint64_t)INT64_MAX) return json_integer((json_int_t)seed);
    char text[32];
    snprintf(text, sizeof text, "%" PRIu64, seed);
    return json_string(text);
}

static json_t *case_json(const kvf_spec *s, const kvf_case *c) {
    const kvf_recipe *rp = &s->recipe;
    json_t *j = json_object(), *lens = json_array(), *pages = json_array(), *last = json_array();
    if (!j || !lens || !pages || !last) {
        json_decref(j);
        json_decref(lens);
        json_decref(pages);
        json_decref(last);
        return NULL;
    }
    int bad = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        bad |= kvf_json_push(lens, json_integer(kvf_recipe_seq_len(rp, b)));
        bad |= kvf_json_push(pages, json_integer(rp->num_pages[b]));
        bad |= kvf_json_push(last, json_integer(rp->last_page_len[b]));
    }
    char bits[16];
    snprintf(bits, sizeof bits, "0x%08x", kvf_f32_bits(rp->sm_scale));
    bad |= kvf_json_set(j, "num_qo_heads", json_integer(rp->num_qo_heads)) |
           kvf_json_set(j, "num_kv_heads", json_integer(rp->num_kv_heads)) |
           kvf_json_set(j, "head_dim", json_integer(rp->head_dim)) |
           kvf_json_set(j, "page_size", json_integer(rp->page_size)) |
           kvf_json_set(j, "batch_size", json_integer(rp->batch_size)) |
           kvf_json_set(j, "seq_lens", lens) | kvf_json_set(j, "num_pages", pages) |
           kvf_json_set(j, "last_page_len", last) |
           kvf_json_set(j, "table", json_string(kvf_table_name(rp->table))) |
           kvf_json_set(j, "page_id_base", json_integer(rp->page_id_base)) |
           kvf_json_set(j, "spare_pages", json_integer(rp->spare_pages)) |
           kvf_json_set(j, "logits", json_string(kvf_logits_name(rp->logits))) |
           kvf_json_set(j, "poison", json_integer(rp->poison)) |
           kvf_json_set(j, "seed", seed_json(rp->seed)) |
           kvf_json_set(j, "sm_scale", kvf_json_number(rp->sm_scale)) |
           kvf_json_set(j, "sm_scale_bits", json_string(bits)) |
           kvf_json_set(j, "q", dist_json(&rp->q)) | kvf_json_set(j, "k", dist_json(&rp->k)) |
           kvf_json_set(j, "v", dist_json(&rp->v)) |
           kvf_json_set(j, "overrides", json_integer(s->num_overrides)) |
           kvf_json_set(j, "explicit_tensors", json_boolean(s->has_explicit));
    if (c)
        bad |= kvf_json_set(j, "pool_pages", json_integer(c->num_pages)) |
               kvf_json_set(j, "total_tokens", json_integer(kvf_case_total_tokens(c)));
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

json_t *kvf_attribution_json(const kvf_attribution *a) {
    if (a->kind == KVF_ATTRIB_NONE) return json_null();
    char declared[KVF_PRECISION_NAME_MAX], model[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(&a->declared, declared, sizeof declared);
    kvf_precision_name(&a->model, model, sizeof model);
    const int within = a->kind == KVF_ATTRIB_PRECISION;
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:s}", "kind", kvf_attribution_kind_name(a->kind),
                     "declared", declared, "within", within ? json_string(model) : json_null(),
                     "margin", within ? kvf_json_number(a->margin) : json_null(), "also",
                     within && a->also[0] ? json_string(a->also) : json_null(), "text", a->text);
}

/* A plugin kernel's library ("PATH.so:NAME"): where it was and a hash of its bytes, so that a
 * finding names the build it came from apart from the folder it was in. */
static int library_json(json_t *j, const char *kernel) {
    const char *end = strstr(kernel, ".so:");
    if (!end) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%.*s", (int)(end + 3 - kernel), kernel);
    char *bytes = NULL, hash[24] = "";
    size_t n = 0;
    if (kvf_read_file_max(path, (size_t)1 << 30, &bytes, &n, NULL) == 0)
        snprintf(hash, sizeof hash, "%016" PRIx64, kvf_hash64(bytes, n));
    free(bytes);
    return kvf_json_set(
        j, "library",
        json_pack("{s:s, s:o}", "path", path, "hash", hash[0] ? json_string(hash) : json_null()));
}

json_t *kvf_outcome_to_json(const kvf_outcome *out, const char *kernel, const kvf_spec *s,
                            const kvf_case *c, const json_t *extra) {
    char sig[512], hash[32];
    uint64_t h = kvf_outcome_signature(out, kernel, sig, sizeof sig);
    snprintf(hash, sizeof hash, "%016" PRIx64, h);
    json_t *j = json_object();
    if (!j) return NULL;
    char identity[512];
    int bad = kvf_json_set(j, "class", json_string(kvf_finding_class_name(out->finding))) |
              kvf_json_set(j, "kernel", json_string(kernel)) |
              kvf_json_set(j, "kernel_identity",
                           json_string(kvf_kernel_identity(kernel, identity, sizeof identity)));
    bad |= library_json(j, kernel);
    if (out->plan[0]) bad |= kvf_json_set(j, "plan", json_string(out->plan));
    bad |= kvf_json_set(j, "rule",
                        out->rule >= 0 ? json_string(out->verdicts[out->rule].rule.name)
                                       : json_null()) |
           /* Whether FlashInfer-Bench's rule would have caught it (null: not judged, the run
            * gave no output) */
           kvf_json_set(j, "fib_catches", out->fib < 0 ? json_null() : json_boolean(out->fib)) |
           kvf_json_set(j, "attribution", kvf_attribution_json(&out->attribution)) |
           kvf_json_set(j, "signature", json_string(sig)) |
           kvf_json_set(j, "signature_hash", json_string(hash)) |
           kvf_json_set(j, "status", json_string(kvf_run_status_name(out->status))) |
           kvf_json_set(j, "message", json_string(out->message)) |
           kvf_json_set(j, "signal", json_integer(out->signal)) |
           kvf_json_set(j, "exit_code", json_integer(out->exit_code)) |
           kvf_json_set(j, "deadline_s", kvf_json_number(out->deadline));
    if (s) bad |= kvf_json_set(j, "case", case_json(s, c));
    if (out->relation_broken) {
        json_t *rj = json_object();
        if (!rj) bad = 1;
        if (rj) {
            char seed[24];
            snprintf(seed, sizeof seed, "%" PRIu64, out->relation_seed);
            int rbad = kvf_json_set(rj, "name",
                                    json_string(kvf_relation_name((kvf_relation)out->relation))) |
                       kvf_json_set(rj, "seed", json_string(seed)) |
                       kvf_json_set(rj, "promised", json_boolean(out->relation_promised)) |
                       kvf_json_set(rj, "what", json_string(out->relation_what));
            bad |= rbad | kvf_json_set(j, "relation", rj);
        }
    }
    if (out->nondeterministic || out->relation_broken) {
        const kvf_difference *d = &out->difference;
        json_t *dj = json_object();
        if (!dj) bad = 1;
        if (dj) {
            int dbad =
                kvf_json_set(dj, "output", json_string(d->output == KVF_OUTPUT_O ? "o" : "lse")) |
                kvf_json_set(dj, "b", json_integer(d->b)) |
                kvf_json_set(dj, "h", json_integer(d->h)) |
                kvf_json_set(dj, "d", json_integer(d->d)) |
                kvf_json_set(dj, "first_bits", hex_bits(d->first_bits, 1)) |
                kvf_json_set(dj, "second_bits", hex_bits(d->second_bits, 1)) |
                kvf_json_set(dj, "count", json_integer(d->count));
            bad |= dbad | kvf_json_set(j, "difference", dj);
        }
    }
    json_t *verdicts = json_array();
    for (int r = 0; verdicts && r < out->nrules && out->status == KVF_RUN_OK; r++) {
        const kvf_verdict *v = &out->verdicts[r];
        json_t *vj = json_object();
        if (!vj) {
            bad = 1;
            break;
        }
        bad |= kvf_json_set(vj, "rule", json_string(v->rule.name)) |
               kvf_json_set(vj, "pass", json_boolean(v->pass)) |
               kvf_json_set(vj, "finding", json_string(kvf_finding_class_name(v->finding))) |
               kvf_json_set(vj, "o", metrics_json(&v->o)) |
               kvf_json_set(vj, "lse", metrics_json(&v->lse)) | kvf_json_push(verdicts, vj);
    }
    bad |= kvf_json_set(j, "verdicts", verdicts);
    if (extra && json_is_object(extra)) bad |= json_object_update(j, (json_t *)extra) != 0;
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

int kvf_outcome_json(FILE *f, const kvf_outcome *out, const char *kernel, const kvf_spec *s,
                     const kvf_case *c, const json_t *extra) {
    json_t *j = kvf_outcome_to_json(out, kernel, s, c, extra);
    if (!j) {
        errno = ENOMEM;
        return -1;
    }
    int rc = kvf_json_dump(j, f, 2);
    json_decref(j);
    return rc;
}
