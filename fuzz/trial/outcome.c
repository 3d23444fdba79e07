/* The outcome of one run (outcome.h): how the run ended, its verdict under each rule, and the
 * finding class that counts. The signature, the features, the text report, the JSON report and
 * the findings folder each have a file of their own. */
#include "kvfuzz/outcome.h"

#include <stdlib.h>
#include <string.h>

/* The finding class a run status stands for; NONE for a run with output and for a case the
 * kernel declined. (A kernel error may still be filed as a crash: kvf_outcome_from_run.) */
static kvf_finding_class status_class(kvf_run_status s) {
    switch (s) {
    case KVF_RUN_KERNEL_ERROR:
        return KVF_FINDING_KERNEL_ERROR;
    case KVF_RUN_CRASH:
        return KVF_FINDING_CRASH;
    case KVF_RUN_HANG:
        return KVF_FINDING_HANG;
    case KVF_RUN_UNWRITTEN:
        return KVF_FINDING_UNWRITTEN_OUTPUT;
    case KVF_RUN_OOB_WRITE:
        return KVF_FINDING_OOB_WRITE;
    case KVF_RUN_INPUT_MODIFIED:
        return KVF_FINDING_INPUT_MODIFIED;
    default:
        return KVF_FINDING_NONE;
    }
}

/* A failed run is named by its class, so the two never spell a failure differently. */
const char *kvf_run_status_name(kvf_run_status s) {
    if (s == KVF_RUN_OK) return "ok";
    if (s == KVF_RUN_UNSUPPORTED) return "unsupported";
    kvf_finding_class c = status_class(s);
    return c == KVF_FINDING_NONE ? "unknown" : kvf_finding_class_name(c);
}

/* CUDA reports a kernel that faulted (an illegal address, a trap) as an error code from the
 * next API call, not as a signal; those are crashes (docs/design.md §7), the rest of the launch
 * and API errors are kernel errors. */
int kvf_message_is_device_fault(const char *message) {
    static const char *const faults[] = {"cudaErrorIllegalAddress",
                                         "cudaErrorMisalignedAddress",
                                         "cudaErrorLaunchFailure",
                                         "cudaErrorIllegalInstruction",
                                         "cudaErrorHardwareStackError",
                                         "cudaErrorInvalidPc",
                                         "cudaErrorInvalidAddressSpace",
                                         "cudaErrorAssert",
                                         NULL};
    for (int i = 0; message && faults[i]; i++)
        if (strstr(message, faults[i])) return 1;
    return 0;
}

kvf_run_status kvf_run_status_from_code(int rc) {
    switch (rc) {
    case 0:
        return KVF_RUN_OK;
    case KVF_EUNSUPPORTED:
        return KVF_RUN_UNSUPPORTED;
    case KVF_EUNWRITTEN:
        return KVF_RUN_UNWRITTEN;
    case KVF_EOOBWRITE:
        return KVF_RUN_OOB_WRITE;
    case KVF_EINPUTMOD:
        return KVF_RUN_INPUT_MODIFIED;
    default:
        return KVF_RUN_KERNEL_ERROR;
    }
}

void kvf_outcome_from_run(kvf_outcome *out, kvf_run_status status, const char *message) {
    memset(out, 0, sizeof *out);
    out->status = status;
    out->rule = -1;
    out->fib = -1;
    if (message) snprintf(out->message, sizeof out->message, "%s", message);
    out->finding = status_class(status);
    if (status == KVF_RUN_KERNEL_ERROR && kvf_message_is_device_fault(message))
        out->finding = KVF_FINDING_CRASH;
}

typedef struct plain_hooks {
    kvf_element_observer observer;
    void *ctx;
} plain_hooks;

static void *plain_begin(void *ctx, int rule) {
    (void)rule;
    return ((plain_hooks *)ctx)->ctx;
}

int kvf_outcome_judge(kvf_outcome *out, const kvf_rule *rules, int nrules, int require_overflow,
                      const kvf_case *c, const kvf_oracle_result *oracle, const kvf_bf16 *o,
                      const float *lse, kvf_element_observer observer, void *observer_ctx,
                      kvf_error *err) {
    plain_hooks ph = {observer, observer_ctx};
    kvf_judge_hooks h = {plain_begin, observer, NULL, &ph, NULL};
    return kvf_outcome_judge_hooked(out, rules, nrules, require_overflow, c, oracle, o, lse,
                                    observer ? &h : NULL, err);
}

int kvf_outcome_judge_hooked(kvf_outcome *out, const kvf_rule *rules, int nrules,
                             int require_overflow, const kvf_case *c,
                             const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                             const kvf_judge_hooks *hooks, kvf_error *err) {
    kvf_outcome_from_run(out, KVF_RUN_OK, NULL);
    if (nrules > KVF_MAX_RULES) nrules = KVF_MAX_RULES;
    out->nrules = nrules;
    for (int r = 0; r < nrules; r++) {
        void *scope = hooks && hooks->begin ? hooks->begin(hooks->ctx, r) : NULL;
        int rc = scope && hooks->element
                     ? kvf_judge_observe_runs(&out->verdicts[r], &rules[r], c, oracle, o, lse,
                                              hooks->element, hooks->exact_run, scope, err)
                     : kvf_judge(&out->verdicts[r], &rules[r], c, oracle, o, lse, err);
        if (scope && hooks->end) hooks->end(hooks->ctx, scope, rc ? NULL : &out->verdicts[r]);
        if (rc) return rc;
        const kvf_verdict *v = &out->verdicts[r];
        /* Only a kernel failure is a finding, decided where replay and the statistics decide
         * it: not a verdict failing only on rows out of the input model (unless overflow is
         * required, docs/design.md §4), nor one whose every violation is the correctly rounded
         * value (the rule, not the kernel, fails: fib on an empty sequence's -inf lse). */
        int counts = kvf_verdict_status_of(v, require_overflow) == KVF_VERDICT_FAIL;
        if (counts && out->finding == KVF_FINDING_NONE) {
            out->finding = v->finding;
            out->rule = r;
        }
    }
    return 0;
}

int kvf_outcome_judge_fib(kvf_outcome *out, int require_overflow, const kvf_case *c,
                          const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                          kvf_error *err) {
    if (out->status != KVF_RUN_OK) return 0;
    for (int r = 0; r < out->nrules; r++)
        if (strcmp(out->verdicts[r].rule.name, "fib") == 0) {
            out->fib =
                kvf_verdict_status_of(&out->verdicts[r], require_overflow) == KVF_VERDICT_FAIL;
            return 0;
        }
    kvf_rule fib;
    int rc = kvf_rule_parse(&fib, "fib", err);
    if (rc) return rc;
    /* A verdict is large (its worst elements); this runs once per new finding. */
    kvf_verdict *v = malloc(sizeof *v);
    if (!v) return kvf_error_set(err, KVF_ENOMEM, "out of memory judging under fib");
    rc = kvf_judge(v, &fib, c, oracle, o, lse, err);
    if (!rc) out->fib = kvf_verdict_status_of(v, require_overflow) == KVF_VERDICT_FAIL;
    free(v);
    return rc;
}

int kvf_outcome_attribute(kvf_outcome *out, const kvf_case *c, const kvf_oracle_result *oracle,
                          const kvf_bf16 *o, const float *lse, kvf_error *err) {
    memset(&out->attribution, 0, sizeof out->attribution);
    if (out->status != KVF_RUN_OK || out->rule < 0 || out->rule >= out->nrules) return 0;
    return kvf_attribute(&out->attribution, &out->verdicts[out->rule], c, oracle, o, lse, err);
}

int kvf_outcome_compare(kvf_outcome *out, const kvf_case *c, const kvf_bf16 *o1, const float *lse1,
                        const kvf_bf16 *o2, const float *lse2) {
    kvf_difference d = {0};
    int64_t n_o = kvf_case_o_elems(c), n_lse = kvf_case_lse_elems(c);
    const int32_t hq = c->num_qo_heads, dim = c->head_dim;
    for (int64_t i = 0; i < n_o; i++)
        if (o1[i] != o2[i] && d.count++ == 0) {
            d.output = KVF_OUTPUT_O;
            d.b = (int32_t)(i / ((int64_t)hq * dim));
            d.h = (int32_t)(i / dim % hq);
            d.d = (int32_t)(i % dim);
            d.first_bits = o1[i];
            d.second_bits = o2[i];
        }
    for (int64_t i = 0; i < n_lse; i++) {
        uint32_t a = kvf_f32_bits(lse1[i]), b = kvf_f32_bits(lse2[i]);
        if (a != b && d.count++ == 0) {
            d.output = KVF_OUTPUT_LSE;
            d.b = (int32_t)(i / hq);
            d.h = (int32_t)(i % hq);
            d.d = -1;
            d.first_bits = a;
            d.second_bits = b;
        }
    }
    if (d.count == 0) return 0;
    out->nondeterministic = 1;
    out->difference = d;
    if (out->finding == KVF_FINDING_NONE) {
        out->finding = KVF_FINDING_NONDETERMINISM;
        out->rule = -1;
    }
    return 1;
}
