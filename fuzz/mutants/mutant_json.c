/* The mutant benchmark as JSON, and the seed lists of its table (kvfuzz/mutant_bench.h). */
#include <stdio.h>

#include "kvfuzz/mutant_bench.h"
#include "kvfuzz/outcome.h"

/* Building the answer: any failure (out of memory) sets *bad and the value is dropped, so that
 * one check at the end covers every step. */
static json_t *kvf__jset(json_t *obj, const char *key, json_t *value, int *bad) {
    if (!*bad && obj && kvf_json_set(obj, key, value) == 0) return value;
    if (*bad || !obj) json_decref(value);
    *bad = 1;
    return NULL;
}

static json_t *kvf__jpush(json_t *arr, json_t *value, int *bad) {
    if (!*bad && arr && kvf_json_push(arr, value) == 0) return value;
    if (*bad || !arr) json_decref(value);
    *bad = 1;
    return NULL;
}

/* The finding's class, or null when nothing was caught (never an empty string). */
static json_t *kvf__finding_json(const kvf_mutant_detection *d) {
    return d->caught ? json_string(d->finding) : json_null();
}

static void kvf__detection_json(json_t *obj, const kvf_mutant_detection *d, int *bad) {
    kvf__jset(obj, "caught", json_boolean(d->caught), bad);
    kvf__jset(obj, "seconds", kvf_json_number(d->seconds), bad);
    kvf__jset(obj, "cases", json_integer(d->cases), bad);
}

static void kvf__mutant_json(json_t *arr, const kvf_mutant_bench *b, const kvf_mutant_result *r,
                             int *bad) {
    char model[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(&r->model, model, sizeof model);
    json_t *m = kvf__jpush(arr, json_object(), bad);
    kvf__jset(m, "kernel", json_string(r->kernel->name), bad);
    kvf__jset(m, "class", json_string(r->kernel->models), bad);
    /* The model strict and fa judged it under; per_rule keeps the rules' plain names ("strict",
     * "fa") so that readers find them whatever the model. */
    kvf__jset(m, "precision", json_string(model), bad);
    json_t *kv = kvf__jset(m, "kvfuzz", json_object(), bad);
    kvf__detection_json(kv, &r->kvfuzz, bad);
    kvf__jset(kv, "finding", kvf__finding_json(&r->kvfuzz), bad);
    kvf__jset(kv, "attribution", kvf_attribution_json(&r->kvfuzz.attribution), bad);
    json_t *pr = kvf__jset(m, "per_rule", json_object(), bad);
    for (int i = 0; i < b->nrules; i++) {
        json_t *ro = kvf__jset(pr, b->rules[i].name, json_object(), bad);
        kvf__jset(ro, "rule", json_string(r->rules[i].name), bad);
        if (i < b->ncampaign) {
            kvf__detection_json(ro, &r->per_rule[i], bad);
            kvf__jset(ro, "attribution", kvf_attribution_json(&r->per_rule[i].attribution), bad);
        }
        json_t *failed = kvf__jset(ro, "seed_cases_failed", json_array(), bad);
        const int *f = r->seed_fails + (size_t)i * b->seeds.count;
        for (size_t sc = 0; sc < b->seeds.count; sc++)
            if (f[sc]) kvf__jpush(failed, json_string(b->seeds.names[sc]), bad);
    }
    kvf__jset(m, "fib_bench", json_boolean(r->fib_bench), bad);
    kvf__jset(m, "fi_tests", json_boolean(r->fi_tests), bad);
}

static void kvf__control_json(json_t *arr, const kvf_mutant_result *r, int *bad) {
    char model[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(&r->model, model, sizeof model);
    json_t *ct = kvf__jpush(arr, json_object(), bad);
    kvf__jset(ct, "kernel", json_string(r->kernel->name), bad);
    kvf__jset(ct, "precision", json_string(model), bad);
    kvf__jset(ct, "findings", json_integer(r->kvfuzz.caught), bad);
    kvf__jset(ct, "finding", kvf__finding_json(&r->kvfuzz), bad);
    kvf__jset(ct, "attribution", kvf_attribution_json(&r->kvfuzz.attribution), bad);
    kvf__jset(ct, "seconds", kvf_json_number(r->kvfuzz.seconds), bad);
    kvf__jset(ct, "cases", json_integer(r->kvfuzz.cases), bad);
}

json_t *kvf_mutant_bench_json(const kvf_mutant_bench *b, const char *device, double budget) {
    int bad = 0;
    json_t *root = json_object();
    bad = !root;
    kvf__jset(root, "device", json_string(device), &bad);
    kvf__jset(root, "budget_seconds", kvf_json_number(budget), &bad);
    json_t *mutants = kvf__jset(root, "mutants", json_array(), &bad);
    for (size_t i = 0; i < b->nmutants; i++)
        kvf__mutant_json(mutants, b, &b->mutants[i], &bad);
    json_t *controls = kvf__jset(root, "controls", json_array(), &bad);
    for (size_t i = 0; i < b->ncontrols; i++)
        kvf__control_json(controls, &b->controls[i], &bad);
    kvf__jset(root, "killed", json_integer((json_int_t)b->nmutants - b->survivors), &bad);
    kvf__jset(root, "total", json_integer((json_int_t)b->nmutants), &bad);
    kvf__jset(root, "missed_by_fib_bench", json_integer(b->missed_fib_bench), &bad);
    kvf__jset(root, "missed_by_fi_tests", json_integer(b->missed_fi_tests), &bad);
    json_t *rules = kvf__jset(root, "rules", json_object(), &bad);
    for (int r = 0; r < b->nrules; r++) {
        json_t *ro = kvf__jset(rules, b->rules[r].name, json_object(), &bad);
        if (r < b->ncampaign)
            kvf__jset(ro, "killed_by_campaign", json_integer(b->rule_kills[r]), &bad);
        kvf__jset(ro, "killed_on_seed_cases", json_integer(b->seed_any[r]), &bad);
        kvf__jset(ro, "killed_on_first_seed", json_integer(b->seed_first[r]), &bad);
    }
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

void kvf_mutant_seed_list(const kvf_mutant_bench *b, const kvf_mutant_result *m, int r, char *buf,
                          size_t size) {
    const int *fails = m->seed_fails + (size_t)r * b->seeds.count;
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < b->seeds.count && used + 4 < size; i++)
        if (fails[i])
            used += (size_t)snprintf(buf + used, size - used, "%s%.2s", used ? "," : "",
                                     b->seeds.names[i]);
    if (!used) snprintf(buf, size, "-");
}
