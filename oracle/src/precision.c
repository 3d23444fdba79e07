/* Precision models: names, parsing, containment and the attribution ladder (precision.h;
 * the bounds each model implies are in rules/strict_bound.c, derived in docs/precision.md). */
#include "kvfuzz/precision.h"

#include <stdio.h>
#include <string.h>

/* The P components, by their text: format and whether the denominator sums the rounded P. */
static const struct {
    const char *name;
    int format, rsum;
} kvf__p_component[] = {
    {"bf16-p", KVF_P_BF16, 0},
    {"bf16-p-rsum", KVF_P_BF16, 1},
    {"fp16-p", KVF_P_FP16, 0},
    {"fp16-p-rsum", KVF_P_FP16, 1},
};
#define P_COMPONENTS (sizeof kvf__p_component / sizeof kvf__p_component[0])

#define PRECISION_EXPECTED                                                                         \
    "expected f32, or components joined by '+' from bf16-p, bf16-p-rsum, fp16-p, fp16-p-rsum, "    \
    "bf16-partials and ftz"

int kvf_precision_parse(kvf_precision *out, const char *text, kvf_error *err) {
    if (!out || !text) return kvf_error_set(err, KVF_EINVAL, "the precision model text is NULL");
    memset(out, 0, sizeof *out);
    if (text[0] == '\0' || strcmp(text, "f32") == 0) return 0;
    if (strlen(text) >= 128)
        return kvf_error_set(err, KVF_EINVAL, "the precision model '%.40s...' is too long", text);
    const char *p = text;
    int have_p = 0;
    while (*p) {
        const char *end = strchr(p, '+');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 0)
            return kvf_error_set(
                err, KVF_EINVAL,
                "the precision model '%s' has an empty component; " PRECISION_EXPECTED, text);
        int known = 0;
        for (size_t i = 0; i < P_COMPONENTS && !known; i++) {
            if (strlen(kvf__p_component[i].name) == n &&
                strncmp(p, kvf__p_component[i].name, n) == 0) {
                if (have_p)
                    return kvf_error_set(err, KVF_EINVAL,
                                         "the precision model '%s' names P's rounding twice; "
                                         "a kernel rounds P one way",
                                         text);
                have_p = 1;
                out->p_format = kvf__p_component[i].format;
                out->p_sum_rounded = kvf__p_component[i].rsum;
                known = 1;
            }
        }
        if (!known && n == strlen("bf16-partials") && strncmp(p, "bf16-partials", n) == 0) {
            if (out->partials_bf16)
                return kvf_error_set(err, KVF_EINVAL,
                                     "the precision model '%s' names bf16-partials twice", text);
            out->partials_bf16 = known = 1;
        }
        if (!known && n == 3 && strncmp(p, "ftz", 3) == 0) {
            if (out->ftz)
                return kvf_error_set(err, KVF_EINVAL, "the precision model '%s' names ftz twice",
                                     text);
            out->ftz = known = 1;
        }
        if (!known && n == 3 && strncmp(p, "f32", 3) == 0)
            return kvf_error_set(err, KVF_EINVAL,
                                 "the precision model '%s' combines f32 with other components; "
                                 "f32 stands alone (it is the model without them)",
                                 text);
        if (!known)
            return kvf_error_set(
                err, KVF_EINVAL,
                "the precision model '%s' has an unknown component '%.*s'; " PRECISION_EXPECTED,
                text, (int)(n > 40 ? 40 : n), p);
        p += n;
        if (*p == '+') {
            p++;
            if (*p == '\0')
                return kvf_error_set(err, KVF_EINVAL,
                                     "the precision model '%s' ends with '+'; " PRECISION_EXPECTED,
                                     text);
        }
    }
    return 0;
}

static const char *p_component_name(const kvf_precision *p) {
    for (size_t i = 0; i < P_COMPONENTS; i++)
        if (kvf__p_component[i].format == p->p_format &&
            kvf__p_component[i].rsum == (p->p_sum_rounded != 0))
            return kvf__p_component[i].name;
    return NULL;
}

void kvf_precision_name(const kvf_precision *p, char *buf, size_t size) {
    if (!buf || size == 0) return;
    buf[0] = '\0';
    if (!p || kvf_precision_is_f32(p)) {
        snprintf(buf, size, "f32");
        return;
    }
    const char *parts[3];
    int n = 0;
    if (p->p_format != KVF_P_F32) parts[n++] = p_component_name(p);
    if (p->partials_bf16) parts[n++] = "bf16-partials";
    if (p->ftz) parts[n++] = "ftz";
    size_t used = 0;
    for (int i = 0; i < n && used < size; i++) {
        int w = snprintf(buf + used, size - used, "%s%s", i ? "+" : "", parts[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

int kvf_precision_is_f32(const kvf_precision *p) {
    return p->p_format == KVF_P_F32 && !p->partials_bf16 && !p->ftz;
}

int kvf_precision_equal(const kvf_precision *a, const kvf_precision *b) {
    return a->p_format == b->p_format &&
           (a->p_format == KVF_P_F32 || (a->p_sum_rounded != 0) == (b->p_sum_rounded != 0)) &&
           (a->partials_bf16 != 0) == (b->partials_bf16 != 0) && (a->ftz != 0) == (b->ftz != 0);
}

int kvf_precision_covers(const kvf_precision *outer, const kvf_precision *inner) {
    if (inner->ftz && !outer->ftz) return 0;
    if (inner->partials_bf16 && !outer->partials_bf16) return 0;
    if (inner->p_format == KVF_P_F32) return 1;
    if (inner->p_format != outer->p_format) return 0;
    /* A bound over weights rounded in both sums also bounds weights rounded in the numerator
     * only (docs/precision.md, section 3); not the other way. */
    return outer->p_sum_rounded || !inner->p_sum_rounded;
}

void kvf_precision_explain(const kvf_precision *p, char *buf, size_t size) {
    if (!buf || size == 0) return;
    if (kvf_precision_is_f32(p)) {
        snprintf(buf, size, "fp32 weights and partial outputs, IEEE gradual underflow");
        return;
    }
    char pdesc[96] = "";
    if (p->p_format != KVF_P_F32)
        snprintf(pdesc, sizeof pdesc, "P rounded to %s before P.V (denominator from the %s P)",
                 p->p_format == KVF_P_BF16 ? "bf16" : "fp16",
                 p->p_sum_rounded ? "rounded" : "unrounded");
    snprintf(buf, size, "%s%s%s%s%s", pdesc, pdesc[0] && p->partials_bf16 ? "; " : "",
             p->partials_bf16 ? "split-KV partial outputs stored in bf16" : "",
             (pdesc[0] || p->partials_bf16) && p->ftz ? "; " : "",
             p->ftz ? "flush-to-zero arithmetic" : "");
}

const char *kvf_precision_help(void) {
    return "precision models (--precision MODEL, or rule:MODEL as strict:bf16-p):\n"
           "  f32            fp32 weights and partials, gradual underflow (the default)\n"
           "  bf16-p         P rounded to bf16 for P.V, denominator from the unrounded P "
           "(FlashAttention-2, CUTLASS, cuDNN)\n"
           "  bf16-p-rsum    P rounded to bf16 for P.V, denominator from the rounded P\n"
           "  fp16-p         P rounded to fp16 for P.V, denominator from the unrounded P\n"
           "  fp16-p-rsum    P rounded to fp16 for P.V, denominator from the rounded P\n"
           "  bf16-partials  split-KV partial outputs stored in bf16, partial lse in f32 "
           "(FlashInfer)\n"
           "  ftz            flush-to-zero arithmetic, subnormal inputs read as zero "
           "(fast math)\n"
           "  components combine with '+', e.g. bf16-partials+ftz (docs/precision.md)\n";
}

/* The ladder: every model (5 P choices x partials x ftz), the fewest components first (the
 * simplest explanation), then by how loose the rounding is: ftz loosens only around
 * subnormals, then fp16 P, bf16 partials, bf16 P; a rounded-sum P after its unrounded-sum
 * form, which it contains. */
#define B KVF_P_BF16
#define H KVF_P_FP16
static const kvf_precision kvf__ladder[] = {
    {0, 0, 0, 0}, /* f32 */
    {0, 0, 0, 1}, /* ftz */
    {H, 0, 0, 0}, /* fp16-p */
    {H, 1, 0, 0}, /* fp16-p-rsum */
    {0, 0, 1, 0}, /* bf16-partials */
    {B, 0, 0, 0}, /* bf16-p */
    {B, 1, 0, 0}, /* bf16-p-rsum */
    {H, 0, 0, 1}, /* fp16-p+ftz */
    {H, 1, 0, 1}, /* fp16-p-rsum+ftz */
    {0, 0, 1, 1}, /* bf16-partials+ftz */
    {B, 0, 0, 1}, /* bf16-p+ftz */
    {H, 0, 1, 0}, /* fp16-p+bf16-partials */
    {B, 1, 0, 1}, /* bf16-p-rsum+ftz */
    {H, 1, 1, 0}, /* fp16-p-rsum+bf16-partials */
    {B, 0, 1, 0}, /* bf16-p+bf16-partials */
    {B, 1, 1, 0}, /* bf16-p-rsum+bf16-partials */
    {H, 0, 1, 1}, /* fp16-p+bf16-partials+ftz */
    {H, 1, 1, 1}, /* fp16-p-rsum+bf16-partials+ftz */
    {B, 0, 1, 1}, /* bf16-p+bf16-partials+ftz */
    {B, 1, 1, 1}, /* bf16-p-rsum+bf16-partials+ftz */
};
#undef B
#undef H

size_t kvf_precision_ladder_count(void) {
    return sizeof kvf__ladder / sizeof kvf__ladder[0];
}

const kvf_precision *kvf_precision_ladder_at(size_t i) {
    return i < kvf_precision_ladder_count() ? &kvf__ladder[i] : NULL;
}
