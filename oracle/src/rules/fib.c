/* The fib rule: FlashInfer-Bench's DefaultEvaluator, for benchmark parity.
 *
 * Float emulation: every intermediate is assigned to a `float`. Under -std=c11 the compiler
 * must drop excess precision on assignment and may not contract across statements, so each
 * assignment is one IEEE binary32 rounding, exactly as torch's element-wise float32 kernels
 * round. */
#include <math.h>

#include "rule.h"

/* FlashInfer-Bench (flashinfer_bench/bench/config.py) defaults both tolerances to 1e-2. */
#define FIB_ATOL 1e-2
#define FIB_RTOL 1e-2
#define FIB_EPS 1e-8f

static int fib_parse(kvf_rule *out, const char *text, const char *args, kvf_error *err) {
    int rc = kvf__rule_parse_plain(out, text, args, err);
    if (rc) return rc;
    out->atol = FIB_ATOL;
    out->rtol = FIB_RTOL;
    return 0;
}

/* Any inf/NaN in the kernel's tensor fails it; otherwise abs = |x - y| and rel = abs / (|y| +
 * 1e-8) in float32 and an element fails iff both exceed. A finite a against r = -inf gives
 * abs = inf, rel = inf/inf = NaN, NaN > rtol is false: the element passes. That quirk is kept
 * on purpose (it is what FIB reports). */
static void fib_check(void *state, const kvf__rule_row *row, const kvf__elem_in *in,
                      kvf_element_error *e, int *prefilter) {
    (void)state;
    (void)prefilter;
    const kvf_rule *rule = row->rule;
    float af = (float)in->a, rf = (float)in->r;
    float atol = (float)rule->atol, rtol = (float)rule->rtol;
    e->allowed = fmax(rule->atol, rule->rtol * (fabs(in->r) + 1e-8));
    if (!isfinite(af)) {
        e->fails = 1;
        e->margin = INFINITY;
        return;
    }
    float diff = af - rf;
    float absf = fabsf(diff);
    float denom = fabsf(rf) + FIB_EPS;
    float relf = absf / denom;
    e->fails = (absf > atol) && (relf > rtol);
    double ma = kvf__ratio(absf, atol);
    double mr = isnan(relf) ? 0.0 : kvf__ratio(relf, rtol);
    e->margin = fmin(ma, mr);
}

const kvf__rule_ops kvf__rule_fib = {
    .name = "fib",
    .syntax = "fib",
    .help = "fib                 FlashInfer-Bench: an element fails iff |a-r| > 1e-2 and "
            "|a-r|/(|r|+1e-8) > 1e-2 (float32); any NaN/inf output fails; finite vs -inf passes",
    .scope = "for benchmark parity (what FlashInfer-Bench reports). Blind: any bug whose error "
             "is below 1e-2 absolute or relative (every rounding-level bug); any bug on a case "
             "with an empty sequence, because a correct lse of -inf already fails it there.",
    .parse = fib_parse,
    .check = fib_check,
};
