/* Finding classes (docs/design.md §7): what kind of defect a failing trial shows. The classes,
 * their names, who produces each and whether it counts as a failure come from one table,
 * kvfuzz/finding_classes.def; everything here is generated from it. Pure functions, no state. */
#ifndef KVFUZZ_FINDING_CLASS_H
#define KVFUZZ_FINDING_CLASS_H

typedef enum kvf_finding_class {
    KVF_FINDING_NONE = 0, /* no finding */
#define KVF_FINDING_CLASS(id, name, producer, fails, doc) KVF_FINDING_##id,
#include "kvfuzz/finding_classes.def"
#undef KVF_FINDING_CLASS
    KVF_FINDING_CLASS_COUNT
} kvf_finding_class;

/* Who decides a class. */
typedef enum kvf_finding_producer {
    KVF_FINDING_BY_NONE = 0, /* KVF_FINDING_NONE and out-of-range values */
    KVF_FINDING_BY_JUDGE,    /* the tolerance rules, from the kernel's output */
    KVF_FINDING_BY_RUN,      /* the worker: the kernel's return, exit, clock, a second run */
    KVF_FINDING_BY_HOST      /* the buffer checks around the kernel's inputs and outputs */
} kvf_finding_producer;

/* "o-tolerance", ...; "none" for KVF_FINDING_NONE, "unknown" out of range. */
const char *kvf_finding_class_name(kvf_finding_class c);
/* The class named `name`, or -1 when none is (KVF_FINDING_NONE is "none"). */
int kvf_finding_class_parse(const char *name);
/* The one-line description of the class ("" for NONE and out of range). */
const char *kvf_finding_class_doc(kvf_finding_class c);
kvf_finding_producer kvf_finding_class_producer(kvf_finding_class c);
/* Whether a finding of class c is a kernel failure: 0 for NONE; for a class that fails only when
 * overflow handling is required (overflow), `require_overflow`; 1 for every other class. */
int kvf_finding_class_fails(kvf_finding_class c, int require_overflow);

#endif
