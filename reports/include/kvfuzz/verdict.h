/* The verdict of a run, in words: one sentence per (kernel, rule), the same in replay, fuzz and
 * report, so that every command ends with the same answer.
 *
 *     cpu-splitkv  strict  passes 7157 cases
 *     cpu-splitkv  fib     passes 13 cases
 *         4 cases fail only where the kernel returned the correctly rounded value: fib rejects
 *         the exact -inf lse of an empty sequence (benign, not a kernel failure)
 *     cpu-splitkv/mut=x  strict  FAILS: 212 findings in 3 signatures
 *
 * A case counts as a kernel failure only under KVF_VERDICT_FAIL (judge.h): cases that fail
 * only on rows out of the input model, or only where the kernel is bit for bit right, are
 * counted and named apart.
 *
 * Ownership: everything is the caller's; the functions write into the caller's buffers and
 * never allocate. No errors: text that does not fit is cut at the buffer's end. */
#ifndef KVFUZZ_VERDICT_H
#define KVFUZZ_VERDICT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvfuzz/judge.h"

typedef struct kvf_verdict_counts {
    const char *kernel;
    const char *rule;
    int64_t cases;                             /* cases judged under the rule */
    int64_t passed;                            /* KVF_VERDICT_PASS */
    int64_t out_of_model;                      /* KVF_VERDICT_OUT_OF_MODEL */
    int64_t rejects_rounded;                   /* KVF_VERDICT_RULE_REJECTS_ROUNDED */
    int64_t findings[KVF_FINDING_CLASS_COUNT]; /* KVF_VERDICT_FAIL, by class */
    long signatures;      /* distinct finding signatures among the failures; -1: not known (then
                             the sentence names the classes instead) */
    int require_overflow; /* out-of-model failures were counted as kernel failures */
} kvf_verdict_counts;

/* Adds one case's verdict. */
void kvf_verdict_counts_add(kvf_verdict_counts *c, const kvf_verdict *v, int require_overflow);

/* Kernel failures (the sum of findings). */
int64_t kvf_verdict_counts_failed(const kvf_verdict_counts *c);

/* "passes N cases" or "FAILS: k findings in s signatures" (or "... in c classes: ..."). */
void kvf_verdict_counts_sentence(const kvf_verdict_counts *c, char *buf, size_t size);

/* Up to two lines explaining the benign failures (out of the model; rejected although
 * correctly rounded), each ending in '\n' and starting with indent; "" when there are none. */
void kvf_verdict_counts_notes(const kvf_verdict_counts *c, const char *indent, char *buf,
                              size_t size);

/* Prints "<indent>KERNEL  RULE  sentence\n" and its notes. */
void kvf_verdict_counts_print(FILE *f, const kvf_verdict_counts *c, const char *indent);

#endif
