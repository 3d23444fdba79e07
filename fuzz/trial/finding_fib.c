/* A finding run again for a FlashInfer-Bench export (kvfuzz/finding_fib.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvfuzz/finding_fib.h"

void kvf_finding_fib_rules(kvf_rule rules[KVF_FINDING_FIB_RULES]) {
    kvf_rule_parse(&rules[0], "strict", NULL);
    kvf_rule_parse(&rules[1], "fa", NULL);
    kvf_rule_parse(&rules[2], "fib", NULL);
}

int kvf_finding_rerun_run(kvf_finding_rerun *x, kvf_runner *runner, const kvf_case *c,
                          const kvf_rule rules[KVF_FINDING_FIB_RULES], const kvf_oracle_opts *oo,
                          const char *what, kvf_error *err) {
    kvf_error e = {0};
    x->o = malloc((size_t)(kvf_case_o_elems(c) ? kvf_case_o_elems(c) : 1) * sizeof *x->o);
    x->lse = malloc((size_t)(kvf_case_lse_elems(c) ? kvf_case_lse_elems(c) : 1) * sizeof *x->lse);
    if (!x->o || !x->lse) return kvf_error_set(err, KVF_ENOMEM, "out of memory for %s", what);
    kvf_run_result *res = &x->res;
    if (kvf_runner_run(runner, c, x->o, x->lse, res, &e)) {
        res->status = KVF_RUN_KERNEL_ERROR;
        snprintf(res->message, sizeof res->message, "%s", e.msg);
    }
    if (res->status != KVF_RUN_OK) {
        kvf_outcome_from_run(&x->out, res->status, res->message);
        return 0;
    }
    int rc = kvf_oracle_run(&x->oracle, c, oo, &e);
    if (rc) return kvf_error_set(err, rc, "%s: the oracle failed: %s", what, e.msg);
    x->have_oracle = 1;
    if ((rc = kvf_outcome_judge(&x->out, rules, KVF_FINDING_FIB_RULES, 0, c, &x->oracle, x->o,
                                x->lse, NULL, NULL, &e)) ||
        (rc = kvf_outcome_attribute(&x->out, c, &x->oracle, x->o, x->lse, &e)))
        return kvf_error_set(err, rc, "%s: %s", what, e.msg);
    return 0;
}

void kvf_finding_rerun_free(kvf_finding_rerun *x) {
    if (x->have_oracle) kvf_oracle_result_free(&x->oracle);
    free(x->o);
    free(x->lse);
    x->o = NULL, x->lse = NULL, x->have_oracle = 0;
}

static const char *verdict_word(const kvf_verdict *v) {
    kvf_verdict_status st = kvf_verdict_status_of(v, 0);
    return st == KVF_VERDICT_PASS                   ? "pass"
           : st == KVF_VERDICT_RULE_REJECTS_ROUNDED ? "benign"
                                                    : kvf_finding_class_name(v->finding);
}

void kvf_finding_fib_view_of(const kvf_finding_rerun *x, const kvf_case *c,
                             kvf_finding_fib_view *v) {
    const kvf_outcome *out = &x->out;
    const int ok = x->res.status == KVF_RUN_OK;
    const char *run_word = kvf_finding_class_name(out->finding);
    v->strict = ok ? verdict_word(&out->verdicts[0]) : run_word;
    v->fa = ok ? verdict_word(&out->verdicts[1]) : run_word;
    v->fib = ok ? verdict_word(&out->verdicts[2]) : run_word;
    v->fib_fails = !ok || !out->verdicts[2].pass;
    v->kvfuzz_fails = !ok || !out->verdicts[0].pass || !out->verdicts[1].pass;
    /* Its INCORRECT_NUMERICAL then says nothing of a defect. */
    v->wrong_reason =
        ok && kvf_verdict_status_of(&out->verdicts[2], 0) == KVF_VERDICT_RULE_REJECTS_ROUNDED;
    v->empty_seq = 0;
    for (int32_t b = 0; b < c->batch_size && !v->empty_seq; b++)
        v->empty_seq = c->kv_indptr[b + 1] == c->kv_indptr[b];
    const char *why = v->empty_seq ? "its check fails the -inf lse of an empty sequence, which "
                                     "is correct, in every kernel"
                                   : "every element its check fails is one the kernel got bit "
                                     "for bit right";
    if (v->wrong_reason)
        snprintf(v->sentence, sizeof v->sentence, "FIB flags it for the wrong reason (%s)%s", why,
                 v->kvfuzz_fails ? "; the defect itself passes FIB's check" : "");
    else
        snprintf(v->sentence, sizeof v->sentence, "%s",
                 v->fib_fails      ? "FIB reproduces it"
                 : v->kvfuzz_fails ? "FIB will not see it (fib passes)"
                                   : "nothing to reproduce (every rule passes)");
}

static json_t *metrics_json(const kvf_output_metrics *m) {
    return json_pack("{s:I, s:I, s:o, s:o, s:I, s:o, s:o, s:i}", "elements",
                     (json_int_t)m->elements, "violations", (json_int_t)m->violations, "max_abs",
                     kvf_json_number(m->max_abs), "max_rel", kvf_json_number(m->max_rel_fib),
                     "max_ulps", (json_int_t)m->max_ulps, "bits_of_error",
                     kvf_json_number(m->bits_of_error), "max_margin",
                     kvf_json_number(m->max_margin), "nonfinite_mismatch", m->nonfinite_mismatch);
}

/* Each rule's verdict, the attribution and the ulp statistics of a run with outputs. */
static void verdicts_json(json_t *extra, const kvf_outcome *out) {
    json_t *verdicts = json_array();
    for (int r = 0; r < KVF_FINDING_FIB_RULES; r++) {
        const kvf_verdict *v = &out->verdicts[r];
        json_array_append_new(verdicts,
                              json_pack("{s:s, s:b, s:s, s:s, s:o, s:o}", "rule", v->rule.name,
                                        "pass", v->pass, "status",
                                        kvf_verdict_status_name(kvf_verdict_status_of(v, 0)),
                                        "finding", kvf_finding_class_name(v->finding), "o",
                                        metrics_json(&v->o), "lse", metrics_json(&v->lse)));
    }
    json_object_set_new(extra, "verdicts", verdicts);
    /* The failing strict or fa verdict's precision attribution, as a finding's report holds it
     * (null when there is none). */
    json_object_set_new(extra, "attribution", kvf_attribution_json(&out->attribution));
    json_object_set_new(
        extra, "ulp",
        json_pack("{s:I, s:I, s:o, s:o}", "o_max_ulps", (json_int_t)out->verdicts[0].o.max_ulps,
                  "lse_max_ulps", (json_int_t)out->verdicts[0].lse.max_ulps, "o_bits_of_error",
                  kvf_json_number(out->verdicts[0].o.bits_of_error), "lse_bits_of_error",
                  kvf_json_number(out->verdicts[0].lse.bits_of_error)));
}

json_t *kvf_finding_fib_extra(const char *finding, const char *kernel, const json_t *report,
                              const kvf_spec *spec, const kvf_finding_rerun *x) {
    const kvf_outcome *out = &x->out;
    char sig[512];
    uint64_t hash = kvf_outcome_signature(out, kernel, sig, sizeof sig);
    char hash_text[32];
    snprintf(hash_text, sizeof hash_text, "%016" PRIx64, hash);
    json_t *extra = json_pack("{s:s, s:s, s:s, s:s, s:s}", "finding", finding, "kernel", kernel,
                              "class", kvf_finding_class_name(out->finding), "signature", sig,
                              "signature_hash", hash_text);
    /* The class the finding's report recorded: a re-run cannot show every class again (a
     * nondeterminism finding needs two runs). */
    const char *report_class = json_string_value(json_object_get(report, "class"));
    if (report_class) json_object_set_new(extra, "report_class", json_string(report_class));
    if (spec->has_origin)
        json_object_set_new(extra, "origin",
                            json_pack("{s:s, s:s}", "definition", spec->origin.definition,
                                      "workload_uuid", spec->origin.workload_uuid));
    if (x->res.status == KVF_RUN_OK) verdicts_json(extra, out);
    return extra;
}
