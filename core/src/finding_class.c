/* The finding-class table (kvfuzz/finding_classes.def) read into arrays indexed by class. */
#include "kvfuzz/finding_class.h"

#include <string.h>

enum { kvf__FAILS_ALWAYS, kvf__FAILS_IF_REQUIRED };

static const struct {
    const char *name, *doc;
    kvf_finding_producer producer;
    int fails;
} kvf__classes[KVF_FINDING_CLASS_COUNT] = {
    [KVF_FINDING_NONE] = {"none", "", KVF_FINDING_BY_NONE, -1},
#define KVF_FINDING_CLASS(id, name, producer, fails, doc)                                          \
    [KVF_FINDING_##id] = {name, doc, KVF_FINDING_BY_##producer, kvf__FAILS_##fails},
#include "kvfuzz/finding_classes.def"
#undef KVF_FINDING_CLASS
};

static int in_range(kvf_finding_class c) {
    return (unsigned)c < (unsigned)KVF_FINDING_CLASS_COUNT;
}

const char *kvf_finding_class_name(kvf_finding_class c) {
    return in_range(c) ? kvf__classes[c].name : "unknown";
}

int kvf_finding_class_parse(const char *name) {
    if (!name) return -1;
    for (int c = 0; c < KVF_FINDING_CLASS_COUNT; c++)
        if (strcmp(name, kvf__classes[c].name) == 0) return c;
    return -1;
}

const char *kvf_finding_class_doc(kvf_finding_class c) {
    return in_range(c) ? kvf__classes[c].doc : "";
}

kvf_finding_producer kvf_finding_class_producer(kvf_finding_class c) {
    return in_range(c) ? kvf__classes[c].producer : KVF_FINDING_BY_NONE;
}

int kvf_finding_class_fails(kvf_finding_class c, int require_overflow) {
    if (!in_range(c) || c == KVF_FINDING_NONE) return 0;
    return kvf__classes[c].fails == kvf__FAILS_IF_REQUIRED ? require_overflow != 0 : 1;
}
