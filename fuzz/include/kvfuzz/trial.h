/* One trial (docs/design.md §2): a kernel run on a case and its judgement, the same chain
 * case → kernel run → oracle → rules → outcome for every command that judges a kernel: replay,
 * mutants, the libFuzzer harness, the minimizer and the campaign's judge pool.
 *
 * A caller chooses the stages it needs: kvf_trial_run does the whole chain; kvf_trial_judge
 * only the judgement, for callers whose kernel ran elsewhere (the judge pool judges outputs a
 * worker process returned) or whose oracle result is shared between kernels (replay, mutants).
 *
 * Ownership: the caller owns every struct; kvf_trial_buffers_alloc allocates the output
 * buffers, kvf_trial_buffers_free releases them. Errors: KVF_ENOMEM (buffers, the oracle),
 * KVF_EINVAL (an oracle result that does not match the case), the oracle's errors, and a
 * runner's transport errors; a run that ends badly (crash, hang, kernel error) is not an error
 * but its outcome. */
#ifndef KVFUZZ_TRIAL_H
#define KVFUZZ_TRIAL_H

#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"

/* How a trial is judged and what a finding carries. */
typedef struct kvf_trial_rules {
    const kvf_rule *rules;
    int nrules;
    int require_overflow; /* overflow-class verdicts count as failures */
    int with_fib;         /* a finding says whether FlashInfer-Bench's rule catches it */
    int with_attribution; /* a finding carries its precision attribution */
    /* With attribution: only findings of this class are attributed (NONE: every class). The
     * attribution costs up to one judging per model of the ladder. */
    kvf_finding_class attribute_class;
} kvf_trial_rules;

/* Judges the kernel's o and lse for case c: the verdict under each rule and the finding
 * (kvf_outcome_judge_hooked; hooks may be NULL), then, for a finding, its fib verdict and its
 * attribution as `tr` asks. A fib verdict or attribution that cannot be computed is left
 * unknown (fib -1, attribution NONE) rather than failing the trial. */
int kvf_trial_judge(kvf_outcome *out, const kvf_trial_rules *tr, const kvf_case *c,
                    const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                    const kvf_judge_hooks *hooks, kvf_error *err);

/* For a finding of out: its fib verdict and its attribution as `tr` asks (what
 * kvf_trial_judge adds to the judgement; the judge pool asks for it only for findings it has not
 * saved yet, recurrences being many). */
void kvf_trial_explain(kvf_outcome *out, const kvf_trial_rules *tr, const kvf_case *c,
                       const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse);

/* A kernel's output buffers for one case, with room for an empty case. */
typedef struct kvf_trial_buffers {
    kvf_bf16 *o;
    float *lse;
} kvf_trial_buffers;

int kvf_trial_buffers_alloc(kvf_trial_buffers *b, const kvf_case *c, kvf_error *err);
void kvf_trial_buffers_free(kvf_trial_buffers *b);

/* The outcome of a run that gave no output (res->status != KVF_RUN_OK): its class, message,
 * signal or exit status, and for a hang the deadline it passed. */
void kvf_trial_outcome_of_run(kvf_outcome *out, const kvf_run_result *res, double deadline_s);

/* The whole chain: runs the kernel through `runner` on c into b, and when it gave output,
 * judges it against `oracle` (computed here with `oo` when NULL). The run's plan facts go into
 * out->plan; res (may be NULL) receives the run's result. */
int kvf_trial_run(kvf_outcome *out, kvf_runner *runner, const kvf_case *c,
                  const kvf_oracle_result *oracle, const kvf_oracle_opts *oo,
                  const kvf_trial_rules *tr, double deadline_s, kvf_trial_buffers *b,
                  kvf_run_result *res, kvf_error *err);

#endif
