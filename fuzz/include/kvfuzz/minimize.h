/* Shrinking a failing case (`kvfuzz minimize`): fewer sequences, fewer pages and tokens, a
 * smaller shape, simpler values (constants, zeros, fewer distinct values), a simpler page table
 * and fewer overrides, keeping every step that still fails the same way: the same finding class
 * under the same rule, with the same kernel, and the same explanation: a tolerance finding's
 * precision attribution (kvfuzz/attribution.h: defect, or the tightest looser model that
 * accepts it) must not change, so a defect never shrinks into a case that only shows the
 * kernel's precision policy, nor the reverse. The kernel runs in a worker process (runner.h),
 * so crashes and hangs minimize too.
 *
 * Ownership: kvf_minimize edits the caller's spec in place. Errors: KVF_ENOTFOUND when the
 * input does not fail as asked (nothing to keep failing), KVF_EDEVICE when the kernel cannot
 * start, KVF_ENOMEM; one sentence in err. */
#ifndef KVFUZZ_MINIMIZE_H
#define KVFUZZ_MINIMIZE_H

#include <stdint.h>
#include <stdio.h>

#include "kvfuzz/kernel.h"
#include "kvfuzz/outcome.h"

typedef struct kvf_minimize_opts {
    const kvf_kernel *kernel;
    kvf_rule rule; /* a strict or fa rule carries the precision model it judges under (the
                      caller applies the kernel's declared one: kvf_rule_set_precision) */
    kvf_finding_class target; /* the class to keep; NONE: whatever the input fails with */
    /* With target INVARIANCE: the relation (kvf_relation) kept broken, and the seed that
     * derives its second case (the finding's report names both). */
    int relation;
    uint64_t relation_seed;
    int require_overflow; /* the overflow class counts (and can be kept) */
    int jobs;             /* oracle threads; 0: all cores */
    double deadline_s;    /* per launch; 0: 10 s */
    int in_process;
    int64_t max_tries;   /* candidate runs; 0: 2000 */
    double time_limit_s; /* 0: none */
    kvf_limits case_limits;
    FILE *log; /* one line per accepted step when verbose; NULL: stderr */
    int verbose;
} kvf_minimize_opts;

void kvf_minimize_opts_default(kvf_minimize_opts *opts);

typedef struct kvf_minimize_stats {
    int64_t tries, accepted;
    kvf_finding_class found;     /* the class kept */
    kvf_attribution attribution; /* the input's attribution, kept by every accepted step (kind
                                    NONE for a class or rule that has none) */
    double elapsed_s;
} kvf_minimize_stats;

/* Runs the spec once to learn (or confirm) its failure and its attribution, then shrinks it.
 * On success *spec is the smallest case found that still fails with that attribution and
 * *outcome (may be NULL) its outcome, its attribution included. Attributing judges the case
 * again under up to every model of the ladder, so only candidates that still fail as asked are
 * attributed. */
int kvf_minimize(kvf_spec *spec, const kvf_minimize_opts *opts, kvf_outcome *outcome,
                 kvf_minimize_stats *stats, kvf_error *err);

/* Evaluates one spec the way kvf_minimize does (kernel in a worker, oracle, the one rule, the
 * attribution of a failure of the target class, or of any when the target is NONE): used for
 * replays. 0 or an error that prevented judging (the case does not build, the kernel
 * cannot start, the oracle failed). */
int kvf_minimize_evaluate(const kvf_spec *spec, const kvf_minimize_opts *opts, kvf_outcome *outcome,
                          kvf_error *err);

/* "2 sequences, 9 pages, 130 tokens, Hq 20 Hk 4 D 128 S 16, 1 override, 69 bytes". */
void kvf_spec_size_text(char *out, size_t size, const kvf_spec *spec);

#endif
