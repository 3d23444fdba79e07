/* The rule table (kvfuzz/rules.def) and what the rules' files share: setting a rule, the two
 * parameterless and model-taking parsers, and the distance check's tail. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rule.h"

#define KVF_RULE(id, ops) extern const kvf__rule_ops kvf__rule_##ops;
#include "kvfuzz/rules.def"
#undef KVF_RULE

static const kvf__rule_ops *const kvf__rule_table[KVF_RULE_KIND_COUNT] = {
#define KVF_RULE(id, ops) [KVF_RULE_##id] = &kvf__rule_##ops,
#include "kvfuzz/rules.def"
#undef KVF_RULE
};

const kvf__rule_ops *kvf__rule_ops_of(kvf_rule_kind kind) {
    return (unsigned)kind < (unsigned)KVF_RULE_KIND_COUNT ? kvf__rule_table[kind] : NULL;
}

const kvf__rule_ops *kvf__rule_ops_named(const char *head, size_t n) {
    for (int k = 0; k < KVF_RULE_KIND_COUNT; k++) {
        const char *name = kvf__rule_table[k]->name;
        if (strlen(name) == n && strncmp(head, name, n) == 0) return kvf__rule_table[k];
    }
    return NULL;
}

int kvf__oracle_shape_ok(const kvf_case *c, const kvf_oracle_result *oracle) {
    return c && oracle && c->batch_size == oracle->batch_size &&
           c->num_qo_heads == oracle->num_qo_heads && c->head_dim == oracle->head_dim;
}

void kvf__rule_set(kvf_rule *out, kvf_rule_kind kind, double atol, double rtol, int64_t ulps,
                   const char *name) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->atol = atol;
    out->rtol = rtol;
    out->ulps = ulps;
    snprintf(out->name, sizeof out->name, "%s", name);
}

double kvf__ratio(double err, double allowed) {
    if (err == 0) return 0.0;
    return allowed > 0 ? err / allowed : INFINITY;
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

void kvf__check_distance(const kvf__elem_in *in, double ref, kvf_element_error *e) {
    if (!isfinite(in->a)) {
        e->fails = 1;
        e->margin = INFINITY;
        return;
    }
    double err = fabs(in->a - ref);
    e->fails = err > e->allowed;
    e->margin = kvf__ratio(err, e->allowed);
}
