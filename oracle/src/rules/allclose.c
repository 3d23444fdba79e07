/* The allclose:ATOL:RTOL rule: torch.allclose's test, for parity with test suites that use it. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rule.h"

/* Shortest %g text that reads back as the same double, so canonical names stay short
 * ("0.001", not "0.0010000000000000000208") and still round-trip exactly. */
static void format_shortest(char *buf, size_t size, double v) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* Parses one tolerance field (NUL-terminated). Only plain non-negative finite numbers are
 * accepted: strtod alone would skip leading blanks and accept "inf" or "nan". */
static int parse_tolerance(const char *field, const char *what, const char *text, double *out,
                           kvf_error *err) {
    if (field[0] == '\0')
        return kvf_error_set(err, KVF_EINVAL, "%s in rule '%.80s' is empty", what, text);
    if (isspace((unsigned char)field[0]))
        return kvf_error_set(err, KVF_EINVAL, "%s '%s' in rule '%.80s' starts with a blank", what,
                             field, text);
    char *end = NULL;
    errno = 0;
    double v = strtod(field, &end);
    if (end == field)
        return kvf_error_set(err, KVF_EINVAL, "%s '%s' in rule '%.80s' is not a number", what,
                             field, text);
    if (*end != '\0')
        return kvf_error_set(err, KVF_EINVAL,
                             "%s '%s' in rule '%.80s' has trailing characters '%s'", what, field,
                             text, end);
    if (!isfinite(v))
        return kvf_error_set(err, KVF_EINVAL, "%s '%s' in rule '%.80s' is not finite", what, field,
                             text);
    if (v < 0)
        return kvf_error_set(err, KVF_EINVAL, "%s '%s' in rule '%.80s' is negative", what, field,
                             text);
    *out = v + 0.0; /* "-0" becomes +0 so the canonical name never shows a sign */
    return 0;
}

static int allclose_parse(kvf_rule *out, const char *text, const char *args, kvf_error *err) {
    const char *sep = args ? strchr(args, ':') : NULL;
    if (!sep)
        return kvf_error_set(err, KVF_EINVAL,
                             "rule '%.80s' needs two tolerances, as allclose:ATOL:RTOL", text);
    if (strchr(sep + 1, ':'))
        return kvf_error_set(err, KVF_EINVAL,
                             "rule '%.80s' has more than two tolerances; use allclose:ATOL:RTOL",
                             text);
    char atol_s[64], rtol_s[64];
    size_t alen = (size_t)(sep - args), rlen = strlen(sep + 1);
    if (alen >= sizeof atol_s || rlen >= sizeof rtol_s)
        return kvf_error_set(err, KVF_EINVAL, "a tolerance in rule '%.80s' is too long", text);
    memcpy(atol_s, args, alen);
    atol_s[alen] = '\0';
    memcpy(rtol_s, sep + 1, rlen + 1);
    double atol, rtol;
    int rc = parse_tolerance(atol_s, "ATOL", text, &atol, err);
    if (rc) return rc;
    rc = parse_tolerance(rtol_s, "RTOL", text, &rtol, err);
    if (rc) return rc;
    char a_txt[26], r_txt[26], name[64]; /* %.17g needs at most 24 characters */
    format_shortest(a_txt, sizeof a_txt, atol);
    format_shortest(r_txt, sizeof r_txt, rtol);
    snprintf(name, sizeof name, "allclose:%s:%s", a_txt, r_txt);
    kvf__rule_set(out, KVF_RULE_ALLCLOSE, atol, rtol, 0, name);
    return 0;
}

/* torch.allclose(a, r, rtol, atol, equal_nan=False): equal values (infinities included) are
 * close; otherwise only a finite difference within atol + rtol |r| is. Evaluated in double,
 * where |a - r| and rtol |r| of bf16/f32 values carry no float32 rounding. */
static void allclose_check(void *state, const kvf__rule_row *row, const kvf__elem_in *in,
                           kvf_element_error *e, int *prefilter) {
    (void)state;
    (void)prefilter;
    e->allowed = row->rule->atol + row->rule->rtol * fabs(in->r);
    if (isnan(in->a) || isnan(in->r) || isinf(in->a) || isinf(in->r)) {
        e->fails = !(in->a == in->r);
        e->margin = e->fails ? INFINITY : 0.0;
        return;
    }
    double err = fabs(in->a - in->r);
    e->fails = !(err <= e->allowed);
    e->margin = kvf__ratio(err, e->allowed);
}

const kvf__rule_ops kvf__rule_allclose = {
    .name = "allclose",
    .syntax = "allclose:ATOL:RTOL",
    .help = "allclose:ATOL:RTOL  torch.allclose's test in double: |a-r| <= ATOL + RTOL|r|; "
            "NaN never equal; infinities must match",
    .scope = "for parity with test suites using torch.allclose. Blind: whatever the chosen "
             "tolerances allow; not condition-aware, so tight tolerances fail correct kernels "
             "on cancelling outputs and loose ones pass rounding bugs.",
    .parse = allclose_parse,
    .check = allclose_check,
};
