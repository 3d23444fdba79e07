/* Parsing and naming a rule (kvfuzz/judge.h): the public parse, defaults, precision models,
 * help and scope, through the rule table (table.c); and the helpers every rule's own parse
 * uses (rule.h). */
#include <stdio.h>
#include <string.h>

#include "kvfuzz/judge.h"
#include "rule.h"

void kvf__rule_set(kvf_rule *out, kvf_rule_kind kind, double atol, double rtol, int64_t ulps,
                   const char *name) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->atol = atol;
    out->rtol = rtol;
    out->ulps = ulps;
    snprintf(out->name, sizeof out->name, "%s", name);
}

/* "fib:..." gets its own sentence because it is the likeliest mistake (expecting benchmark
 * rules to take tolerances). */
int kvf__rule_parse_plain(kvf_rule *out, const char *text, const char *args, kvf_error *err) {
    const char *name = kvf__rule_ops_of(out->kind)->name;
    if (args)
        return kvf_error_set(err, KVF_EINVAL, "rule '%s' takes no parameters, but got '%.80s'",
                             name, text);
    kvf__rule_set(out, out->kind, 0, 0, 0, name);
    return 0;
}

int kvf__rule_parse_model(kvf_rule *out, const char *text, const char *args, kvf_error *err) {
    const char *name = kvf__rule_ops_of(out->kind)->name;
    kvf_precision prec;
    memset(&prec, 0, sizeof prec);
    if (args && args[0] == '\0')
        return kvf_error_set(err, KVF_EINVAL,
                             "rule '%.80s' has an empty precision model; use %s or %s:MODEL, as "
                             "%s:bf16-p",
                             text, name, name, name);
    if (args) {
        kvf_error perr = {0};
        if (kvf_precision_parse(&prec, args, &perr))
            return kvf_error_set(err, KVF_EINVAL, "rule '%.80s': %s", text, perr.msg);
    }
    kvf__rule_set(out, out->kind, 0, 0, 0, name);
    kvf_rule_set_precision(out, &prec);
    return 0;
}

/* "expected fib, sol, allclose:ATOL:RTOL, ulp:N, strict[:MODEL] or fa[:MODEL] (MODEL a
 * precision model, as bf16-p+ftz)", from the table. */
static void rules_expected(char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "expected ");
    for (int k = 0; k < KVF_RULE_KIND_COUNT && n < size; k++) {
        const char *sep = k == 0 ? "" : k + 1 == KVF_RULE_KIND_COUNT ? " or " : ", ";
        n += (size_t)snprintf(buf + n, size - n, "%s%s", sep, kvf__rule_ops_of(k)->syntax);
    }
    if (n < size) snprintf(buf + n, size - n, " (MODEL a precision model, as bf16-p+ftz)");
}

int kvf_rule_parse(kvf_rule *out, const char *text, kvf_error *err) {
    char expected[256];
    rules_expected(expected, sizeof expected);
    if (!out) return kvf_error_set(err, KVF_EINVAL, "the rule output pointer is NULL");
    if (!text || text[0] == '\0')
        return kvf_error_set(err, KVF_EINVAL, "the rule text is empty; %s", expected);
    const char *colon = strchr(text, ':');
    size_t n = colon ? (size_t)(colon - text) : strlen(text);
    const kvf__rule_ops *ops = kvf__rule_ops_named(text, n);
    if (!ops) return kvf_error_set(err, KVF_EINVAL, "unknown rule '%.80s'; %s", text, expected);
    kvf_rule r;
    memset(&r, 0, sizeof r);
    for (int k = 0; k < KVF_RULE_KIND_COUNT; k++)
        if (kvf__rule_ops_of(k) == ops) r.kind = (kvf_rule_kind)k;
    int rc = ops->parse(&r, text, colon ? colon + 1 : NULL, err);
    if (rc) return rc;
    *out = r;
    return 0;
}

void kvf_rule_default(kvf_rule *out) {
    kvf__rule_set(out, KVF_RULE_STRICT, 0, 0, 0, "strict");
}

int kvf_rule_takes_precision(const kvf_rule *rule) {
    const kvf__rule_ops *ops = rule ? kvf__rule_ops_of(rule->kind) : NULL;
    return ops && ops->takes_precision;
}

void kvf_rule_set_precision(kvf_rule *rule, const kvf_precision *p) {
    if (!p || !kvf_rule_takes_precision(rule)) return;
    rule->precision = *p;
    const char *base = kvf__rule_ops_of(rule->kind)->name;
    char model[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(p, model, sizeof model);
    if (kvf_precision_is_f32(p))
        snprintf(rule->name, sizeof rule->name, "%s", base);
    else
        snprintf(rule->name, sizeof rule->name, "%s:%s", base, model);
}

void kvf_rules_apply_precision(kvf_rule *rules, int n, const kvf_precision *p) {
    for (int i = 0; i < n; i++)
        if (kvf_rule_takes_precision(&rules[i]) && kvf_precision_is_f32(&rules[i].precision))
            kvf_rule_set_precision(&rules[i], p);
}

int kvf_rule_default_set(kvf_rule *out, int max) {
    /* strict proves what it fails; fa has the power at real sequence lengths that a worst case
     * over every summation order cannot have (docs/fa-rule.md). */
    int n = 0;
    if (n < max) kvf__rule_set(&out[n++], KVF_RULE_STRICT, 0, 0, 0, "strict");
    if (n < max) kvf__rule_set(&out[n++], KVF_RULE_FA, 0, 0, 0, "fa");
    return n;
}

const char *kvf_rule_help(kvf_rule_kind kind) {
    const kvf__rule_ops *ops = kvf__rule_ops_of(kind);
    return ops ? ops->help : "unknown rule kind";
}

const char *kvf_rule_scope(kvf_rule_kind kind) {
    const kvf__rule_ops *ops = kvf__rule_ops_of(kind);
    return ops ? ops->scope : "unknown rule kind";
}
