/* Verdict sentences (kvfuzz/verdict.h). */
#include "kvfuzz/verdict.h"

#include <inttypes.h>
#include <string.h>

void kvf_verdict_counts_add(kvf_verdict_counts *c, const kvf_verdict *v, int require_overflow) {
    c->cases++;
    switch (kvf_verdict_status_of(v, require_overflow)) {
    case KVF_VERDICT_PASS:
        c->passed++;
        break;
    case KVF_VERDICT_OUT_OF_MODEL:
        c->out_of_model++;
        break;
    case KVF_VERDICT_RULE_REJECTS_ROUNDED:
        c->rejects_rounded++;
        break;
    default:
        if ((unsigned)v->finding < KVF_FINDING_CLASS_COUNT) c->findings[v->finding]++;
        break;
    }
}

int64_t kvf_verdict_counts_failed(const kvf_verdict_counts *c) {
    int64_t n = 0;
    for (int k = 1; k < KVF_FINDING_CLASS_COUNT; k++)
        n += c->findings[k];
    return n;
}

static const char *plural(int64_t n, const char *one, const char *many) {
    return n == 1 ? one : many;
}

void kvf_verdict_counts_sentence(const kvf_verdict_counts *c, char *buf, size_t size) {
    int64_t failed = kvf_verdict_counts_failed(c);
    if (failed == 0) {
        snprintf(buf, size, "passes %" PRId64 " %s", c->passed, plural(c->passed, "case", "cases"));
        return;
    }
    int n =
        snprintf(buf, size, "FAILS: %" PRId64 " %s", failed, plural(failed, "finding", "findings"));
    if (n < 0 || (size_t)n >= size) return;
    if (c->signatures > 0) {
        snprintf(buf + n, size - (size_t)n, " in %ld %s", c->signatures,
                 plural(c->signatures, "signature", "signatures"));
        return;
    }
    int classes = 0;
    for (int k = 1; k < KVF_FINDING_CLASS_COUNT; k++)
        classes += c->findings[k] > 0;
    n += snprintf(buf + n, size - (size_t)n, " in %d %s:", classes,
                  plural(classes, "class", "classes"));
    for (int k = 1; k < KVF_FINDING_CLASS_COUNT && n >= 0 && (size_t)n < size; k++)
        if (c->findings[k])
            n += snprintf(buf + n, size - (size_t)n, " %" PRId64 " %s", c->findings[k],
                          kvf_finding_class_name((kvf_finding_class)k));
}

void kvf_verdict_counts_notes(const kvf_verdict_counts *c, const char *indent, char *buf,
                              size_t size) {
    int n = 0;
    buf[0] = '\0';
    if (c->out_of_model)
        n += snprintf(buf, size,
                      "%s%" PRId64 " %s only on rows out of the input model (logits beyond "
                      "f32, or non-finite inputs): counted apart, not kernel failures\n",
                      indent, c->out_of_model, plural(c->out_of_model, "case fails", "cases fail"));
    if (n < 0 || (size_t)n >= size) return;
    if (c->rejects_rounded) {
        /* fib is the one rule known to do this; say why, so nobody hunts a kernel bug. */
        const char *why = c->rule && strcmp(c->rule, "fib") == 0
                              ? ": fib fails any -inf, including the exact lse of an empty "
                                "sequence"
                              : "";
        snprintf(buf + n, size - (size_t)n,
                 "%s%" PRId64 " %s only where the kernel returned the correctly rounded "
                 "value%s (benign: the rule, not the kernel, fails)\n",
                 indent, c->rejects_rounded, plural(c->rejects_rounded, "case fails", "cases fail"),
                 why);
    }
}

void kvf_verdict_counts_print(FILE *f, const kvf_verdict_counts *c, const char *indent) {
    char sentence[512], notes[1024], sub[64];
    kvf_verdict_counts_sentence(c, sentence, sizeof sentence);
    snprintf(sub, sizeof sub, "%s    ", indent);
    kvf_verdict_counts_notes(c, sub, notes, sizeof notes);
    fprintf(f, "%s%s  %s  %s\n%s", indent, c->kernel ? c->kernel : "?", c->rule ? c->rule : "?",
            sentence, notes);
}
