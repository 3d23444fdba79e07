/* A finding run again for a FlashInfer-Bench export (`kvfuzz export-fib`, docs/fib.md): the
 * kernel on the finding's case through its runner, the oracle, the judgement under strict, fa
 * and fib with the attribution, what FIB's own check (the fib rule) makes of it, and kvfuzz's
 * verdicts as the trace's correctness.extra.kvfuzz. The dataset itself is interop's
 * (kvfuzz/fib_dataset.h).
 *
 * Ownership: a kvf_finding_rerun owns its output buffers and oracle result
 * (kvf_finding_rerun_free releases them; a zeroed struct is fine); the case, runner and rules
 * are the caller's. A JSON value returned is a new reference, NULL when memory ran out.
 * Errors: 0 or a negative KVF_E* code with one sentence naming `what` (the finding): KVF_ENOMEM
 * ("out of memory for WHAT"), the oracle's ("WHAT: the oracle failed: ..."), the judge's and
 * the attribution's ("WHAT: ..."). A run that ends without outputs (crash, hang, kernel error) is
 * no error but the outcome; a runner that cannot run the case is a kernel error. */
#ifndef KVFUZZ_FINDING_FIB_H
#define KVFUZZ_FINDING_FIB_H

#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"

/* The rules of an export, in this order: strict, fa, fib. */
#define KVF_FINDING_FIB_RULES 3

/* strict, fa and fib under f32 (a kernel's model is the caller's to apply). */
void kvf_finding_fib_rules(kvf_rule rules[KVF_FINDING_FIB_RULES]);

typedef struct kvf_finding_rerun {
    kvf_run_result res;
    kvf_outcome out; /* verdicts[0..3): strict, fa, fib when res.status is KVF_RUN_OK */
    kvf_oracle_result oracle;
    int have_oracle;
    kvf_bf16 *o;
    float *lse;
} kvf_finding_rerun;

/* Runs c through runner, then (with outputs) the oracle under oo, judges under rules (strict,
 * fa, fib) and attributes the finding. */
int kvf_finding_rerun_run(kvf_finding_rerun *x, kvf_runner *runner, const kvf_case *c,
                          const kvf_rule rules[KVF_FINDING_FIB_RULES], const kvf_oracle_opts *oo,
                          const char *what, kvf_error *err);
void kvf_finding_rerun_free(kvf_finding_rerun *x);

/* What FIB will make of the finding: each rule's word ("pass", "benign" for a verdict that
 * rejects the correctly rounded value, else the finding class; a run without outputs its class
 * for all three), and which of the cases below holds. */
typedef struct kvf_finding_fib_view {
    const char *strict, *fa, *fib;
    int fib_fails;    /* FIB's check fails the run */
    int kvfuzz_fails; /* strict or fa fails it, or it gave no outputs */
    /* fib fails only where the kernel is bit for bit right: FIB flags it for the wrong reason.
     * empty_seq says whether that is the -inf lse of an empty sequence, which FIB's check
     * fails in every kernel. */
    int wrong_reason, empty_seq;
    /* The above as words: "FIB reproduces it", "FIB will not see it (fib passes)", "nothing to
     * reproduce (every rule passes)", or why FIB flags it for the wrong reason. */
    char sentence[200];
} kvf_finding_fib_view;

void kvf_finding_fib_view_of(const kvf_finding_rerun *x, const kvf_case *c,
                             kvf_finding_fib_view *v);

/* correctness.extra.kvfuzz: the finding's file name, its kernel, class and signature, the
 * class its report recorded (report may be NULL), the case's FIB origin, and for a run with
 * outputs each rule's verdict and metrics, the attribution and the ulp statistics. */
json_t *kvf_finding_fib_extra(const char *finding, const char *kernel, const json_t *report,
                              const kvf_spec *spec, const kvf_finding_rerun *x);

#endif
