/* One trial: run, oracle, rules, outcome (kvfuzz/trial.h). */
#include "kvfuzz/trial.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kvf_trial_explain(kvf_outcome *out, const kvf_trial_rules *tr, const kvf_case *c,
                       const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse) {
    if (out->status != KVF_RUN_OK || out->finding == KVF_FINDING_NONE) return;
    kvf_error ferr = {0};
    if (tr->with_fib && kvf_outcome_judge_fib(out, tr->require_overflow, c, oracle, o, lse, &ferr))
        out->fib = -1; /* said as not judged */
    if (tr->with_attribution &&
        (tr->attribute_class == KVF_FINDING_NONE || out->finding == tr->attribute_class) &&
        kvf_outcome_attribute(out, c, oracle, o, lse, &ferr))
        memset(&out->attribution, 0, sizeof out->attribution); /* not attributed */
}

int kvf_trial_judge(kvf_outcome *out, const kvf_trial_rules *tr, const kvf_case *c,
                    const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                    const kvf_judge_hooks *hooks, kvf_error *err) {
    int rc = kvf_outcome_judge_hooked(out, tr->rules, tr->nrules, tr->require_overflow, c, oracle,
                                      o, lse, hooks, err);
    if (rc == 0) kvf_trial_explain(out, tr, c, oracle, o, lse);
    return rc;
}

int kvf_trial_buffers_alloc(kvf_trial_buffers *b, const kvf_case *c, kvf_error *err) {
    b->o = malloc((size_t)(kvf_case_o_elems(c) + 1) * sizeof *b->o);
    b->lse = malloc((size_t)(kvf_case_lse_elems(c) + 1) * sizeof *b->lse);
    if (b->o && b->lse) return 0;
    kvf_trial_buffers_free(b);
    return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernel's outputs");
}

void kvf_trial_buffers_free(kvf_trial_buffers *b) {
    free(b->o);
    free(b->lse);
    b->o = NULL;
    b->lse = NULL;
}

void kvf_trial_outcome_of_run(kvf_outcome *out, const kvf_run_result *res, double deadline_s) {
    kvf_outcome_from_run(out, res->status, res->message);
    out->signal = res->signal;
    out->exit_code = res->exit_code;
    if (res->status == KVF_RUN_HANG) out->deadline = deadline_s;
    snprintf(out->plan, sizeof out->plan, "%s", res->plan);
}

int kvf_trial_run(kvf_outcome *out, kvf_runner *runner, const kvf_case *c,
                  const kvf_oracle_result *oracle, const kvf_oracle_opts *oo,
                  const kvf_trial_rules *tr, double deadline_s, kvf_trial_buffers *b,
                  kvf_run_result *res, kvf_error *err) {
    kvf_run_result local;
    if (!res) res = &local;
    int rc = kvf_runner_run(runner, c, b->o, b->lse, res, err);
    if (rc) return rc;
    if (res->status != KVF_RUN_OK) {
        kvf_trial_outcome_of_run(out, res, deadline_s);
        return 0;
    }
    kvf_oracle_result own;
    if (!oracle) {
        if ((rc = kvf_oracle_run(&own, c, oo, err))) return rc;
        oracle = &own;
    }
    rc = kvf_trial_judge(out, tr, c, oracle, b->o, b->lse, NULL, err);
    snprintf(out->plan, sizeof out->plan, "%s", res->plan);
    if (oracle == &own) kvf_oracle_result_free(&own);
    return rc;
}
