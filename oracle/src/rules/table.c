/* The rule table (kvfuzz/rules.def): each rule's ops by kind and by name. What the rules'
 * files share is rule_api.c (setting and parsing a rule) and rule_checks.c (the checks'
 * common steps). */
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
