/* Precision models (docs/precision.md): which roundings a kernel's design admits beyond the
 * default fp32 model, so that `strict` and `fa` judge a kernel within the precision it declares
 * and every tolerance finding can be attributed to the tightest model that explains it.
 *
 * A model is a set of components joined by '+': "f32" (none: the default), "ftz",
 * "bf16-p" / "fp16-p" (the softmax weights P rounded to bf16 / fp16 before P.V, the denominator
 * summed from the unrounded P), "bf16-p-rsum" / "fp16-p-rsum" (the same, the denominator summed
 * from the rounded P), "bf16-partials" (split-KV partial outputs stored in bf16, partial lse in
 * f32). At most one P component.
 *
 * Everything here is pure and allocates nothing. Errors: kvf_precision_parse() returns
 * KVF_EINVAL with one sentence naming the bad component. */
#ifndef KVFUZZ_PRECISION_H
#define KVFUZZ_PRECISION_H

#include <stddef.h>

#include "kvfuzz/error.h"

typedef enum kvf_p_format {
    KVF_P_F32 = 0, /* P stays in fp32 */
    KVF_P_FP16,    /* P rounded to fp16 (round to nearest even, fp16's range) before P.V */
    KVF_P_BF16,    /* P rounded to bf16 (round to nearest even) before P.V */
} kvf_p_format;

typedef struct kvf_precision {
    int p_format;      /* kvf_p_format */
    int p_sum_rounded; /* with a rounded P: the denominator sums the rounded weights */
    int partials_bf16; /* split-KV partial outputs stored in bf16 before the merge */
    int ftz;           /* flush-to-zero arithmetic, subnormal inputs read as zero */
} kvf_precision;

/* Longest canonical name, with its NUL. */
#define KVF_PRECISION_NAME_MAX 48

/* Parses a model text; "f32" and "" are the default model. Components may come in any order;
 * the canonical name orders them P, partials, ftz. */
int kvf_precision_parse(kvf_precision *out, const char *text, kvf_error *err);
/* The canonical name ("f32", "bf16-p", "bf16-partials+ftz"). */
void kvf_precision_name(const kvf_precision *p, char *buf, size_t size);
int kvf_precision_is_f32(const kvf_precision *p);
int kvf_precision_equal(const kvf_precision *a, const kvf_precision *b);
/* 1 when every kernel inside `inner` is inside `outer` (each component of inner is in outer, a
 * rounded-sum P contains its unrounded-sum form; bf16 and fp16 P contain only f32 P). */
int kvf_precision_covers(const kvf_precision *outer, const kvf_precision *inner);
/* What the model admits, in words, for attribution lines ("P rounded to bf16 before P.V"). */
void kvf_precision_explain(const kvf_precision *p, char *buf, size_t size);
/* One line per component, for `kvfuzz rules` and --help. */
const char *kvf_precision_help(void);

/* The models attribution tries, simplest first (fewer components, then the looser rounding
 * later): kvf_precision_ladder_count() of them, kvf_precision_ladder_at(0) is f32. */
size_t kvf_precision_ladder_count(void);
const kvf_precision *kvf_precision_ladder_at(size_t i);

#endif
