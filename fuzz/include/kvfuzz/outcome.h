/* The outcome of one kernel run on one case: how the run ended (output, unsupported, kernel
 * error, crash, hang, nondeterminism), the verdict under each rule, the finding class that
 * counts, the error buckets the fuzzers climb on, the finding's de-duplication signature, and
 * the full report (text for a terminal, JSON beside a saved finding).
 *
 * Everything here fills caller-owned structs; nothing allocates except kvf_finding_save's
 * optional path. Errors: KVF_EINVAL when the oracle result does not match the case,
 * KVF_EIO when a finding cannot be written (one sentence naming the path). */
#ifndef KVFUZZ_OUTCOME_H
#define KVFUZZ_OUTCOME_H

#include <stdint.h>
#include <stdio.h>

#include "kvfuzz/json_io.h"
#include "kvfuzz/attribution.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/relation.h"
#include "kvfuzz/spec.h"

#define KVF_MAX_RULES 16

typedef enum kvf_run_status {
    KVF_RUN_OK = 0,         /* the kernel wrote o and lse */
    KVF_RUN_UNSUPPORTED,    /* KVF_EUNSUPPORTED: not a finding */
    KVF_RUN_KERNEL_ERROR,   /* any other error code from run() (launch or API error) */
    KVF_RUN_CRASH,          /* the worker process died (signal or unexpected exit) */
    KVF_RUN_HANG,           /* the launch passed its deadline and the worker was killed */
    KVF_RUN_UNWRITTEN,      /* the buffer host found output elements the kernel did not write */
    KVF_RUN_OOB_WRITE,      /* ... a changed guard byte around an output or the workspace */
    KVF_RUN_INPUT_MODIFIED, /* ... a changed input byte */
} kvf_run_status;

const char *kvf_run_status_name(kvf_run_status s);

/* The run status a kernel's return code stands for (kernel.h lists the codes). */
kvf_run_status kvf_run_status_from_code(int rc);

/* Where two runs of the same case differed (nondeterminism). */
typedef struct kvf_difference {
    kvf_output_kind output;
    int32_t b, h, d; /* d = -1 for lse */
    uint32_t first_bits, second_bits;
    int64_t count; /* differing elements */
} kvf_difference;

typedef struct kvf_outcome {
    kvf_run_status status;
    int signal;                      /* crash: the signal that ended the worker, 0 if it exited */
    int exit_code;                   /* crash without a signal: its exit status */
    double deadline;                 /* hang: the deadline in seconds */
    char message[KVF_ERROR_MSG_MAX]; /* kernel error, crash or hang, in one sentence */
    int nondeterministic;            /* a second run of the same case gave different bits */
    /* A relation's two runs gave different bits (kvf_outcome_relate): which relation
     * (kvf_relation), the seed that derives its second case, that case in words, and whether
     * the kernel promised the relation (then the finding is `invariance`). */
    int relation_broken;
    int relation;
    uint64_t relation_seed;
    int relation_promised;
    char relation_what[160];
    kvf_difference difference; /* nondeterminism or a broken relation: the first difference */
    int nrules;
    kvf_verdict verdicts[KVF_MAX_RULES]; /* valid when status == KVF_RUN_OK */
    kvf_finding_class finding;           /* the class that counts; NONE when nothing does */
    int rule;       /* index of the rule behind a tolerance class; -1 otherwise */
    char plan[160]; /* the kernel's plan facts (its describe()) for the run judged, or "" */
    int fib;        /* whether FlashInfer-Bench's rule catches it: 1 yes, 0 no, -1 not judged
                       (kvf_outcome_judge_fib) */
    /* A tolerance finding's precision attribution (kvf_outcome_attribute): kind NONE until
     * attributed, and for every other class. */
    kvf_attribution attribution;
} kvf_outcome;

/* An outcome for a run that produced no output (status != KVF_RUN_OK): its finding is
 * kernel-error, crash or hang (none for unsupported). A kernel error whose message names a CUDA
 * device fault (illegal or misaligned address, launch failure, trap) is a crash. */
void kvf_outcome_from_run(kvf_outcome *out, kvf_run_status status, const char *message);

/* Whether a kernel's error message names a CUDA device fault. */
int kvf_message_is_device_fault(const char *message);

/* Judges o and lse under every rule, observing elements when `observer` is not NULL, and sets
 * the finding: the class of the first rule (in the given order) whose verdict fails, skipping
 * overflow-only verdicts unless require_overflow. KVF_EINVAL on shape mismatch. */
int kvf_outcome_judge(kvf_outcome *out, const kvf_rule *rules, int nrules, int require_overflow,
                      const kvf_case *c, const kvf_oracle_result *oracle, const kvf_bf16 *o,
                      const float *lse, kvf_element_observer observer, void *observer_ctx,
                      kvf_error *err);

/* Hooks around each rule's judging, so that a statistics module counts every element while the
 * judge computes it (each case judged once): begin(ctx, r) returns the element observer's
 * context for rule r (NULL: that rule is not observed); end(ctx, scope, verdict) follows with
 * the verdict, or with NULL when judging failed. exact_run (may be NULL) takes runs of
 * correctly rounded elements in the same scope (kvf_judge_observe_runs). */
typedef struct kvf_judge_hooks {
    void *(*begin)(void *ctx, int rule);
    kvf_element_observer element;
    void (*end)(void *ctx, void *scope, const kvf_verdict *v);
    void *ctx;
    kvf_exact_run_observer exact_run;
} kvf_judge_hooks;

/* kvf_outcome_judge with per-rule hooks (NULL: none). */
int kvf_outcome_judge_hooked(kvf_outcome *out, const kvf_rule *rules, int nrules,
                             int require_overflow, const kvf_case *c,
                             const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                             const kvf_judge_hooks *hooks, kvf_error *err);

/* Attributes the outcome's finding (its rule's verdict) to the tightest precision model that
 * accepts it (kvfuzz/attribution.h), into out->attribution; nothing for a run without output
 * or a class other than a tolerance or nonfinite one. Costs up to one judging per model of
 * the ladder: run it for findings to be saved, not per case. */
int kvf_outcome_attribute(kvf_outcome *out, const kvf_case *c, const kvf_oracle_result *oracle,
                          const kvf_bf16 *o, const float *lse, kvf_error *err);

/* A precision attribution as the JSON object findings, replay, mutants and FlashInfer-Bench
 * exports carry (docs/precision.md, section 5): null for kind NONE, else {kind, declared,
 * within, margin, also, text}. The caller owns it; NULL when memory ran out. */
json_t *kvf_attribution_json(const kvf_attribution *a);

/* Compares two runs' outputs bit for bit; on a difference marks the outcome nondeterministic
 * (finding class nondeterminism, unless a higher class is already set) and returns 1. */
int kvf_outcome_compare(kvf_outcome *out, const kvf_case *c, const kvf_bf16 *o1, const float *lse1,
                        const kvf_bf16 *o2, const float *lse2);

/* Records in the outcome that relation p broke (which, its seed and case in words, whether
 * promised), and, when promised and nothing else counts yet, makes the finding `invariance`. */
void kvf_outcome_relation_broken(kvf_outcome *out, const kvf_relation_pair *p, int promised);

/* Compares a kernel's outputs on c (o, lse) and on the relation's derived case (o2, lse2) bit
 * for bit (kvf_relation_compare); on a difference records the relation in the outcome, and,
 * when the kernel promised it and nothing else counts yet, makes the finding `invariance`.
 * Returns the number of differing elements. */
int64_t kvf_outcome_relate(kvf_outcome *out, const kvf_relation_pair *p, int promised,
                           const kvf_case *c, const kvf_bf16 *o, const float *lse,
                           const kvf_bf16 *o2, const float *lse2);

/* The relation a finding's report (its .json) names, as kvf_outcome_relate recorded it: 1 with
 * *relation and *seed set, 0 when it names none, -1 when its "relation" member is malformed. */
int kvf_finding_report_relation(const json_t *report, int *relation, uint64_t *seed);

/* ---- error buckets (the fuzzers' feedback) -------------------------------------------------- */

#define KVF_MARGIN_BUCKETS                                                                         \
    64 /* 0: margin 0; 1..61: floor(log2 margin) from -50 to +10; 62 inf; 63 NaN */
#define KVF_ULP_BUCKETS 66 /* 0: exact; 1..63: 1 + floor(log2 ulps); 64 huge; 65 NaN mismatch */

int kvf_margin_bucket(double margin);
int kvf_ulp_bucket(int64_t ulps);

/* Features of one outcome: indices into a space of kvf_feature_space(nrules) slots, one per
 * (rule, output, margin bucket), per (output, ulp bucket) and per (rule, class). Writes at most
 * kvf_feature_max(nrules) indices and returns how many. */
int kvf_feature_space(int nrules);
int kvf_feature_max(int nrules);
int kvf_outcome_features(const kvf_outcome *out, int *features);

/* ---- findings ------------------------------------------------------------------------------- */

/* A kernel's name without the folder of its library: "DIR/libx.so:NAME" reads "libx.so:NAME";
 * a built-in or Python kernel's name is its identity as it is. Into buf; returns buf. */
const char *kvf_kernel_identity(const char *kernel, char *buf, size_t size);

/* The de-duplication signature: class, kernel, rule, output and the error's order of
 * magnitude (or the signal / error code for run-level classes), as text and as a hash. Two
 * findings with the same signature are the same bug as far as triage can tell. */
uint64_t kvf_outcome_signature(const kvf_outcome *out, const char *kernel, char *text,
                               size_t text_size);

/* Full report for a terminal: the case summary, every rule's verdict and metrics, the worst
 * elements of the failing rule with coordinates, kernel and oracle values in decimal and hex. */
void kvf_outcome_print(FILE *f, const kvf_outcome *out, const char *kernel, const kvf_spec *spec,
                       const kvf_case *c);

/* One line: "<class> rule <rule> max_abs .. max_rel .. max_ulp .. margin ..", the numbers a
 * replay must reproduce. */
void kvf_outcome_line(FILE *f, const kvf_outcome *out);

/* The JSON report as a jansson object (the caller owns it; NULL when memory ran out). `extra`
 * (may be NULL) is an object whose members are added, e.g. {"campaign": {...}}. */
json_t *kvf_outcome_to_json(const kvf_outcome *out, const char *kernel, const kvf_spec *spec,
                            const kvf_case *c, const json_t *extra);

/* Writes it to f, indented, newline-terminated (kvfuzz/json_io.h). 0, or -1 with errno. */
int kvf_outcome_json(FILE *f, const kvf_outcome *out, const char *kernel, const kvf_spec *spec,
                     const kvf_case *c, const json_t *extra);

/* Sets out->fib: whether FlashInfer-Bench's rule (fib) would have caught this outcome, i.e.
 * fails the case as a kernel failure (kvf_verdict_status_of), judged from out's own verdicts
 * when fib is among them, else by judging the case under fib now. Only for runs that gave
 * output (status KVF_RUN_OK); others keep -1. Errors: those of kvf_judge. */
int kvf_outcome_judge_fib(kvf_outcome *out, int require_overflow, const kvf_case *c,
                          const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                          kvf_error *err);

/* Saves a finding into dir as <class>-<12 hex digits of the signature>.kvfz and .json through
 * core's atomic writer (kvfuzz/file.h: temporary file, fsync, into place, fsync of the folder),
 * so a reader (or a SIGINT) never sees a partial file. The case goes into place without
 * replacing (KVF_WRITE_KEEP_EXISTING), so two writers of the same signature cannot both win, and
 * only the winner writes the report. Returns 0 and sets *is_new to 1 when this call created it,
 * 0 when that signature was already there. path_out (may be NULL) receives the .kvfz path. c
 * may be NULL (crash before the build). */
int kvf_finding_save(const char *dir, const kvf_outcome *out, const char *kernel,
                     const kvf_spec *spec, const kvf_case *c, const json_t *extra, int *is_new,
                     char *path_out, size_t path_size, kvf_error *err);

/* Whether a file can be created in dir (a temporary one is made and removed), so a campaign
 * fails at its start rather than at its first finding. 0 or KVF_EIO with one sentence. */
int kvf_fuzz_check_writable(const char *dir, kvf_error *err);

/* Removes the temporary files an interrupted atomic write (kill -9, a power cut) left in dir:
 * ".NAME.tmp.XXXXXX" and ".kvfuzz-write-check.XXXXXX", when older than min_age_s seconds (a
 * younger one may be another campaign's write in progress). Returns how many were removed;
 * a folder that cannot be read removes none. */
int kvf_fuzz_remove_stale_temps(const char *dir, double min_age_s);

#endif
