/* The ulp:N rule: at most N units in the last place from the correctly rounded value, for
 * measurement. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "rule.h"

static int ulp_parse(kvf_rule *out, const char *text, const char *args, kvf_error *err) {
    if (!args || args[0] == '\0')
        return kvf_error_set(err, KVF_EINVAL, "rule '%.80s' needs a count, as ulp:N", text);
    /* Digits only: strtoll would take a sign, blanks and a "0x" prefix. */
    for (const char *q = args; *q; q++)
        if (!isdigit((unsigned char)*q))
            return kvf_error_set(err, KVF_EINVAL,
                                 "ulp count '%.40s' in rule '%.80s' is not a non-negative "
                                 "integer",
                                 args, text);
    errno = 0;
    long long v = strtoll(args, NULL, 10);
    if (errno == ERANGE)
        return kvf_error_set(err, KVF_EINVAL, "ulp count '%.40s' in rule '%.80s' is too large",
                             args, text);
    char name[64];
    snprintf(name, sizeof name, "ulp:%lld", v);
    kvf__rule_set(out, KVF_RULE_ULP, 0, 0, (int64_t)v, name);
    return 0;
}

static void ulp_check(void *state, const kvf__rule_row *row, const kvf__elem_in *in,
                      kvf_element_error *e, int *prefilter) {
    (void)state;
    (void)prefilter;
    const int64_t ulps = row->rule->ulps;
    double unit = in->output == KVF_OUTPUT_O ? kvf_bf16_ulp(in->r) : kvf_f32_ulp(in->r);
    e->allowed = (double)ulps * unit;
    if (isnan(in->a) || isnan(in->r)) {
        e->fails = !(isnan(in->a) && isnan(in->r));
    } else if (isinf(in->a) || isinf(in->r)) {
        /* The ordered distance puts inf one step past the largest finite value; the rule wants
         * an exact match instead, so BF16_MAX against inf is a failure at any N. */
        e->fails = !(in->a == in->r);
    } else {
        e->fails = e->ulps > ulps;
        e->margin = e->ulps == 0 ? 0.0 : (double)e->ulps / fmax((double)ulps, 0.5);
        return;
    }
    e->margin = e->fails ? INFINITY : 0.0;
}

const kvf__rule_ops kvf__rule_ulp = {
    .name = "ulp",
    .syntax = "ulp:N",
    .help = "ulp:N               at most N units in the last place from the correctly rounded "
            "value (bf16 for o, f32 for lse); NaN/inf must match",
    .scope = "for measurement, not a proof: correct fp32 kernels exceed ulp:1 on cancelling "
             "elements (|o| << C). Blind: any bug within N ulps.",
    .parse = ulp_parse,
    .check = ulp_check,
};
