/* The MPFR oracle (docs/design.md §4): for every output element, the correctly rounded value
 * (bf16 o, f32 lse; round to nearest, ties to even), a high-precision value of the exact
 * result, and the conditioning data the tolerance rules need.
 *
 * Ownership: kvf_oracle_run() allocates every array in *out; kvf_oracle_result_free() releases
 * them. The case is only read. Errors: KVF_ENOMEM; KVF_EORACLE if the Ziv loop reaches
 * max_precision without certifying a rounding (never seen; reported, never guessed);
 * KVF_EINTR after a stop request (kvf_oracle_run). */
#ifndef KVFUZZ_ORACLE_H
#define KVFUZZ_ORACLE_H

#include <stdint.h>

#include "kvfuzz/case.h"

/* Bits of kvf_oracle_row.overflow (docs/oracle.md, "overflow class").
 * LOGITS: max_t sum_d |q_d k_td| * max(1, |sm_scale|) * log2(e) >= 2^127, so an fp32 kernel's
 *   logits or their differences can leave the f32 range; or max_d |q_d| * max(1, |sm_scale|) *
 *   log2(e) >= 2^128 (1 - 2^-22), so a q pre-scaled by sm_scale log2(e) overflows by itself.
 * ACCUM: L * v_abs_max >= 2^127, so a correct fp32 kernel's unnormalised sum p.v (or a merge of
 *   split outputs) can leave the f32 range although o itself is representable. */
#define KVF_ORACLE_OVERFLOW_LOGITS 1
#define KVF_ORACLE_OVERFLOW_ACCUM 2

/* Per (sequence, q head) data. */
typedef struct kvf_oracle_row {
    int64_t length;       /* L, tokens in the sequence */
    double logit_abs_max; /* max_t |s_t|, s_t = sm_scale * q.k_t (natural units) */
    double dot_abs_max;   /* max_t |sm_scale| * sum_d |q_d k_td|: logit conditioning */
    double v_abs_max;     /* max over tokens and d of |v| (finite v only) */
    int overflow;         /* KVF_ORACLE_OVERFLOW_* bits; nonzero: an fp32 kernel cannot hold
                             this row's logits/partial sums */
    int nonfinite_input;  /* a referenced q/k/v element is NaN or inf: NaN in q or k makes the
                             whole row NaN (o and lse); in v only that column is NaN or +-inf */
} kvf_oracle_row;

typedef struct kvf_oracle_result {
    int32_t batch_size, num_qo_heads, head_dim;
    kvf_bf16 *o_rounded;  /* [B][Hq][D] correctly rounded o (+0 for empty sequences) */
    double *o_exact;      /* [B][Hq][D] exact o to about double precision: the working
                             value, within 2^-p (5 o_cond + 2|o|) of o at the precision p that
                             certified it, rounded to double; exact for exact ties */
    double *o_cond;       /* [B][Hq][D] sum_t p_t |v_td| / sum_t p_t  (0 for empty) */
    float *lse_rounded;   /* [B][Hq] correctly rounded base-2 lse (-inf for empty; +-inf if
                             the exact lse is past the f32 range, as IEEE overflow rounds) */
    double *lse_exact;    /* [B][Hq] exact lse rounded to double (-inf for empty) */
    kvf_oracle_row *rows; /* [B][Hq] */
    /* Work done, for reports: highest working precision used, Ziv retries, exact ties (all
     * three count the MPFR path only: 0 when the fast path certified every row). */
    long max_precision_used;
    long ziv_retries;
    long exact_ties;
    /* Rows (sequence, q head) certified by the fast path, and rows it handed to the MPFR path
     * (every row of a case with scales, which only the MPFR path knows); both 0 under
     * KVF_ORACLE_MPFR. The fallback rate is fallback_rows / (fast_rows + fallback_rows). */
    long fast_rows;
    long fallback_rows;
} kvf_oracle_result;

/* How the oracle computes a row (docs/oracle.md, "The fast path").
 * FAST: double arithmetic with a rigorous running error bound; a row whose every output the
 *   bound rounds with certainty (and away from every rounding boundary) is returned from it,
 *   any other row is recomputed by the MPFR path. The rounded values and flags are
 *   bit-identical to MPFR's; o_exact, lse_exact and o_cond agree within their documented
 *   error.
 * MPFR: the reference: every row through MPFR (a Ziv loop from initial_precision). */
typedef enum kvf_oracle_path { KVF_ORACLE_FAST = 0, KVF_ORACLE_MPFR = 1 } kvf_oracle_path;

typedef struct kvf_oracle_opts {
    long initial_precision; /* working precision in bits for the first Ziv pass (default 64;
                               values below 24 are raised to 24, which the bounds assume) */
    long max_precision;     /* give up (KVF_EORACLE) past this (default 1<<14) */
    int threads;            /* rows in parallel; 0 or 1 = this thread only. Ignored (one
                               thread) when MPFR is not built thread-safe (mpfr_buildopt_tls_p) */
    int path;               /* kvf_oracle_path (default: kvf_oracle_default_path()) */
} kvf_oracle_opts;

void kvf_oracle_opts_default(kvf_oracle_opts *opts);

/* The path kvf_oracle_opts_default() chooses: KVF_ORACLE_FAST unless
 * kvf_oracle_set_default_path() said otherwise. Process-wide, for command-line front ends whose
 * oracle calls sit in code that takes default options (the campaign's oracle threads); set it
 * before starting threads. An unknown value is ignored. */
void kvf_oracle_set_default_path(int path);
int kvf_oracle_default_path(void);

/* "fast" / "mpfr" <-> kvf_oracle_path. kvf_oracle_path_parse returns 0 on success, -1 for an
 * unknown name (out untouched). */
const char *kvf_oracle_path_name(int path);
int kvf_oracle_path_parse(const char *name, int *out);

/* Computes the oracle's result for a valid case. Besides the errors above: KVF_EINTR after a
 * stop request (every running kvf_oracle_run returns within a second of it); KVF_ENOMEM when
 * GMP/MPFR memory would pass the memory budget (docs/case-format.md, "Budgets") or the system
 * refuses it, never an abort; KVF_EINVAL when KVF_MAX_MEMORY_MIB or KVF_MAX_WORK is malformed.
 * Runs fewer threads than asked when their working memory would pass the memory budget. */
int kvf_oracle_run(kvf_oracle_result *out, const kvf_case *c, const kvf_oracle_opts *opts,
                   kvf_error *err);

/* A stop request, process-wide: async-signal-safe, for a SIGINT/SIGTERM handler. It holds
 * (every kvf_oracle_run returns KVF_EINTR at once) until kvf_oracle_clear_stop(). */
void kvf_oracle_request_stop(void);
void kvf_oracle_clear_stop(void);
int kvf_oracle_stop_requested(void);

void kvf_oracle_result_free(kvf_oracle_result *r);

/* Releases the MPFR caches of the calling thread. A thread of the caller's that ran the oracle
 * in-thread (threads 0 or 1) calls it before it ends; otherwise the caches are leaked at thread
 * exit. The oracle's own worker threads do this themselves. */
void kvf_oracle_thread_done(void);

/* Correct rounding of a double to bf16 through MPFR (used by tests to check the fast
 * kvf_f32_to_bf16_rne against an independent implementation). */
kvf_bf16 kvf_oracle_round_bf16(double x);

#endif
