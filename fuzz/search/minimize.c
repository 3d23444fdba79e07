/* Greedy case minimization (minimize.h). Passes propose one simplification at a time; a
 * proposal is kept when the case still fails the same way. A pass keeps proposing at the same
 * position after a success (so a length halves again, the next sequence slides into the slot
 * just removed) and moves on after a failure; rounds repeat until one keeps nothing. */
#include "kvfuzz/minimize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/oracle.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/trial.h"

void kvf_minimize_opts_default(kvf_minimize_opts *o) {
    memset(o, 0, sizeof *o);
    kvf_rule_default(&o->rule);
    o->deadline_s = 10;
    o->max_tries = 2000;
    kvf_limits_default(&o->case_limits);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void kvf_spec_size_text(char *out, size_t size, const kvf_spec *s) {
    const kvf_recipe *rp = &s->recipe;
    int64_t pages = 0, tokens = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        pages += rp->num_pages[b];
        tokens += kvf_recipe_seq_len(rp, b);
    }
    uint8_t *bytes = NULL;
    size_t n = 0;
    kvf_spec_encode(s, &bytes, &n, NULL);
    free(bytes);
    char quant[96];
    kvf_kv_quant_text(&s->quant.kv, quant, sizeof quant);
    snprintf(
        out, size,
        "%u sequence(s), %lld page(s), %lld token(s), Hq %u Hk %u D %u S %u, %u override(s)%s, "
        "%s layout, %s caches, %zu bytes",
        rp->batch_size, (long long)pages, (long long)tokens, rp->num_qo_heads, rp->num_kv_heads,
        rp->head_dim, rp->page_size, s->num_overrides, s->has_explicit ? ", explicit tensors" : "",
        kvf_layout_is_dense(&s->layout) ? "dense" : "padded", quant, n);
}

/* ---- evaluation ----------------------------------------------------------------------------- */

typedef struct ctx {
    const kvf_minimize_opts *opts;
    kvf_runner *runner;
    kvf_rule rules[1];
    /* Which failures the trial attributes: those of the target class, any when NONE.
     * Attribution costs up to one judging per model of the ladder, so a candidate that no longer
     * fails as asked is not attributed. */
    kvf_trial_rules trial;
} ctx;

/* Nondeterminism needs only the bits: the case run again (up to three times) and compared, no
 * oracle. out holds the first run's outcome, b its outputs. */
static int evaluate_determinism(ctx *cx, const kvf_case *c, const kvf_trial_buffers *b,
                                kvf_outcome *out, kvf_error *err) {
    kvf_trial_buffers b2 = {NULL, NULL};
    int rc = kvf_trial_buffers_alloc(&b2, c, err);
    if (rc) return rc;
    kvf_outcome_from_run(out, KVF_RUN_OK, NULL);
    kvf_run_result res;
    for (int i = 0; i < 3 && !out->nondeterministic; i++) {
        if ((rc = kvf_runner_run(cx->runner, c, b2.o, b2.lse, &res, err))) break;
        if (res.status != KVF_RUN_OK) break;
        kvf_outcome_compare(out, c, b->o, b->lse, b2.o, b2.lse);
    }
    kvf_trial_buffers_free(&b2);
    return rc;
}

/* A relation needs only the bits too: the case and its derived case run and compared (the
 * kernel promises what is kept broken, or the finding would not be one). out holds the first
 * run's outcome, b its outputs. A derived case that cannot be made is no candidate. */
static int evaluate_relation(ctx *cx, const kvf_case *c, const kvf_trial_buffers *b,
                             kvf_outcome *out, kvf_error *err) {
    const kvf_minimize_opts *o = cx->opts;
    kvf_relation_pair p;
    if (kvf_relation_derive(&p, (kvf_relation)o->relation, c, o->relation_seed, &o->case_limits,
                            NULL))
        return 1;
    kvf_trial_buffers b2 = {NULL, NULL};
    int rc = kvf_trial_buffers_alloc(&b2, &p.derived, err);
    kvf_outcome_from_run(out, KVF_RUN_OK, NULL);
    kvf_run_result res;
    if (rc == 0) rc = kvf_runner_run_relation(cx->runner, c, &p, b2.o, b2.lse, &res, err);
    if (rc == 0 && res.status == KVF_RUN_OK)
        kvf_outcome_relate(out, &p, 1, c, b->o, b->lse, b2.o, b2.lse);
    kvf_trial_buffers_free(&b2);
    kvf_relation_pair_free(&p);
    return rc;
}

/* 0 judged (outcome set), 1 the spec does not build (not a candidate), <0 fatal error. */
static int evaluate(ctx *cx, const kvf_spec *s, kvf_outcome *out, kvf_error *err) {
    const kvf_minimize_opts *o = cx->opts;
    kvf_case c;
    if (kvf_case_build(&c, s, &o->case_limits, NULL)) return 1;
    /* A shape the kernel does not support cannot reproduce anything: not a candidate, and
     * not worth a launch. */
    kvf_plugin_shape shape;
    kvf_kernel_shape(&c, &shape);
    if (kvf_kernel_supports(o->kernel, &shape, NULL, 0) == 0) {
        kvf_case_free(&c);
        return 1;
    }
    kvf_trial_buffers b = {NULL, NULL};
    int rc = kvf_trial_buffers_alloc(&b, &c, err);
    const int bits_only =
        o->target == KVF_FINDING_NONDETERMINISM || o->target == KVF_FINDING_INVARIANCE;
    if (rc == 0 && bits_only) {
        kvf_run_result res;
        rc = kvf_runner_run(cx->runner, &c, b.o, b.lse, &res, err);
        if (rc == 0 && res.status != KVF_RUN_OK)
            kvf_trial_outcome_of_run(out, &res, o->deadline_s);
        else if (rc == 0 && o->target == KVF_FINDING_NONDETERMINISM)
            rc = evaluate_determinism(cx, &c, &b, out, err);
        else if (rc == 0)
            rc = evaluate_relation(cx, &c, &b, out, err);
    } else if (rc == 0) {
        kvf_oracle_opts oo;
        kvf_oracle_opts_default(&oo);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        oo.threads = o->jobs > 0 ? o->jobs : (cores > 0 ? (int)cores : 1);
        rc =
            kvf_trial_run(out, cx->runner, &c, NULL, &oo, &cx->trial, o->deadline_s, &b, NULL, err);
    }
    kvf_trial_buffers_free(&b);
    kvf_case_free(&c);
    return rc;
}

static int start(ctx *cx, const kvf_minimize_opts *o, kvf_error *err) {
    cx->opts = o;
    cx->rules[0] = o->rule;
    cx->trial = (kvf_trial_rules){cx->rules, 1, o->require_overflow, 0, 1, o->target};
    kvf_runner_opts ro = {o->kernel, o->case_limits, o->deadline_s > 0 ? o->deadline_s : 10,
                          0,         o->in_process,  1};
    return kvf_runner_create(&cx->runner, &ro, err);
}

int kvf_minimize_evaluate(const kvf_spec *s, const kvf_minimize_opts *o, kvf_outcome *out,
                          kvf_error *err) {
    ctx cx;
    int rc = start(&cx, o, err);
    if (rc) return rc;
    rc = evaluate(&cx, s, out, err);
    if (rc == 1) rc = kvf_error_set(err, KVF_EINVAL, "the case does not build");
    kvf_runner_destroy(cx.runner);
    return rc;
}

/* ---- proposals ------------------------------------------------------------------------------ */

/* A pass writes proposal k into cand (a copy of cur) and returns 1, returns 0 when it has no
 * proposal k, or -1 when proposal k does not apply to this spec. */
typedef int (*pass_fn)(kvf_spec *cand, int k);

static int pass_remove_sequence(kvf_spec *s, int k) {
    kvf_recipe *rp = &s->recipe;
    if (k >= rp->batch_size) return 0;
    uint32_t b = rp->batch_size - 1u - (uint32_t)k; /* from the end: fewer index shifts */
    if (s->has_explicit) return -1;
    int64_t first = 0;
    for (uint32_t i = 0; i < b; i++)
        first += rp->num_pages[i];
    int64_t n = rp->num_pages[b], qrow = (int64_t)rp->num_qo_heads * rp->head_dim;
    uint32_t w = 0;
    for (uint32_t i = 0; i < s->num_overrides; i++) {
        kvf_override ov = s->overrides[i];
        int64_t lo = -1, width = 0;
        if (ov.target == KVF_OVERRIDE_TABLE_ENTRY) lo = first, width = n;
        if (ov.target == KVF_OVERRIDE_LAST_LEN) lo = b, width = 1;
        if (ov.target == KVF_OVERRIDE_Q) lo = (int64_t)b * qrow, width = qrow;
        if (lo >= 0 && ov.index >= (uint64_t)lo && ov.index < (uint64_t)(lo + width)) continue;
        if (lo >= 0 && ov.index >= (uint64_t)(lo + width)) ov.index -= (uint64_t)width;
        s->overrides[w++] = ov;
    }
    s->num_overrides = w;
    memmove(&rp->num_pages[b], &rp->num_pages[b + 1], (rp->batch_size - b - 1) * sizeof(uint16_t));
    memmove(&rp->last_page_len[b], &rp->last_page_len[b + 1],
            (rp->batch_size - b - 1) * sizeof(uint16_t));
    rp->batch_size--;
    return 1;
}

/* Per sequence: empty, one token, half, one page less, one token less, last page of one. */
static int pass_shorten(kvf_spec *s, int k) {
    kvf_recipe *rp = &s->recipe;
    enum { KINDS = 6 };
    if (k >= rp->batch_size * KINDS) return 0;
    if (s->has_explicit) return -1;
    uint32_t b = (uint32_t)(k / KINDS);
    int64_t len = kvf_recipe_seq_len(rp, b);
    switch (k % KINDS) {
    case 0:
        kvf_recipe_set_seq_len(rp, b, 0);
        break;
    case 1:
        kvf_recipe_set_seq_len(rp, b, len > 1 ? 1 : len);
        break;
    case 2:
        kvf_recipe_set_seq_len(rp, b, len / 2);
        break;
    case 3:
        kvf_recipe_set_seq_len(rp, b, len - rp->page_size);
        break;
    case 4:
        kvf_recipe_set_seq_len(rp, b, len - 1);
        break;
    default:
        if (rp->num_pages[b] == 0) return -1;
        rp->last_page_len[b] = 1;
        break;
    }
    return 1;
}

static int pass_drop_override(kvf_spec *s, int k) {
    if ((uint32_t)k >= s->num_overrides) return 0;
    uint32_t i = s->num_overrides - 1u - (uint32_t)k;
    memmove(&s->overrides[i], &s->overrides[i + 1],
            (s->num_overrides - i - 1) * sizeof *s->overrides);
    s->num_overrides--;
    return 1;
}

/* The dense layout, else one padding (or the page order, or the view offset) at a time back to
 * its dense value. */
static int pass_layout(kvf_spec *s, int k) {
    kvf_layout *l = &s->layout;
    if (kvf_layout_is_dense(l)) return 0;
    if (k == 0) {
        memset(l, 0, sizeof *l);
        return 1;
    }
    uint32_t *const f[] = {&l->kv_page_pad,   &l->view_offset, &l->q_head_pad,
                           &l->q_batch_pad,   &l->o_head_pad,  &l->o_batch_pad,
                           &l->lse_batch_pad, &l->kv_row_pad,  &l->kv_mid_pad};
    const int n = (int)(sizeof f / sizeof f[0]);
    if (k <= n) {
        if (*f[k - 1] == 0) return -1;
        *f[k - 1] = 0;
        return 1;
    }
    if (k == n + 1 && l->kv_order != KVF_LAYOUT_NHD) {
        l->kv_order = KVF_LAYOUT_NHD;
        return 1;
    }
    return k == n + 1 ? -1 : 0;
}

/* bf16 caches without scales, else one simplification of the quantization at a time: no fine
 * significands, no spread, coarser scales (per slot to per head to per tensor), base scales of
 * 1, the same dtype for v as for k. */
static int pass_quant(kvf_spec *s, int k) {
    kvf_quant_recipe *q = &s->quant;
    if (kvf_quant_recipe_is_plain(q)) return 0;
    const int scaled = q->kv.granularity != KVF_SCALE_NONE;
    switch (k) {
    case 0:
        memset(q, 0, sizeof *q);
        return 1;
    case 1:
        if (!q->fine) return -1;
        q->fine = 0;
        return 1;
    case 2:
        if (!q->spread) return -1;
        q->spread = 0;
        return 1;
    case 3:
        if (q->kv.granularity != KVF_SCALE_TOKEN && q->kv.granularity != KVF_SCALE_HEAD) return -1;
        q->kv.granularity--;
        if (q->kv.granularity == KVF_SCALE_TENSOR) q->spread = q->fine = 0;
        return 1;
    case 4:
        if (!scaled || q->k_scale == 1.0f) return -1;
        q->k_scale = 1.0f;
        return 1;
    case 5:
        if (!scaled || q->v_scale == 1.0f) return -1;
        q->v_scale = 1.0f;
        return 1;
    case 6:
        if (q->kv.v_dtype == q->kv.k_dtype || !kvf_kv_dtype_is_fp8(q->kv.k_dtype)) return -1;
        q->kv.v_dtype = q->kv.k_dtype;
        return 1;
    default:
        return 0;
    }
}

static int pass_shape(kvf_spec *s, int k) {
    kvf_recipe *rp = &s->recipe;
    if (k >= 5) return 0;
    if (s->has_explicit) return -1;
    int g = rp->num_qo_heads / rp->num_kv_heads;
    switch (k) {
    case 0:
        rp->num_qo_heads = rp->num_kv_heads;
        break; /* group 1 */
    case 1:
        rp->num_kv_heads = 1, rp->num_qo_heads = (uint8_t)g;
        break; /* one kv head */
    case 2:
        rp->head_dim = (uint16_t)(rp->head_dim / 2);
        break;
    case 3:
        if (rp->num_kv_heads > 1 && rp->num_kv_heads % 2 == 0)
            rp->num_kv_heads /= 2, rp->num_qo_heads = (uint8_t)(rp->num_kv_heads * g);
        break;
    default:
        if (g > 1) rp->num_qo_heads = (uint8_t)(rp->num_kv_heads * (g - 1));
        break;
    }
    return rp->head_dim >= 1 ? 1 : -1;
}

static int pass_page_size(kvf_spec *s, int k) {
    kvf_recipe *rp = &s->recipe;
    if (k >= 1) return 0;
    if (s->has_explicit || rp->page_size < 2) return -1;
    int64_t lens[4096];
    uint32_t nb = rp->batch_size < 4096 ? rp->batch_size : 4096;
    for (uint32_t b = 0; b < nb; b++)
        lens[b] = kvf_recipe_seq_len(rp, b);
    rp->page_size = (uint16_t)(rp->page_size / 2);
    for (uint32_t b = 0; b < nb; b++) {
        if ((lens[b] + rp->page_size - 1) / rp->page_size > 65535) return -1;
        kvf_recipe_set_seq_len(rp, b, lens[b]);
    }
    return 1;
}

static int pass_table(kvf_spec *s, int k) {
    kvf_recipe *rp = &s->recipe;
    switch (k) {
    case 0:
        rp->table = KVF_TABLE_CONTIGUOUS, rp->page_id_base = 0;
        return 1;
    case 1:
        rp->spare_pages = 0;
        return 1;
    case 2:
        rp->spare_pages = (uint16_t)(rp->spare_pages / 2);
        return 1;
    case 3:
        if (!(kvf_strategy_flags(KVF_FAMILY_TABLE, rp->table) & KVF_STRATEGY_HIGH_IDS)) return -1;
        rp->page_id_base /= 2;
        return 1;
    default:
        return 0;
    }
}

/* How simple a value distribution is: its `simple` rank of kvfuzz/strategies.def (a constant,
 * then zeros with one spike, then signed zeros with a few values), every other kind after
 * those. Proposals only go down this order, so two equally failing kinds cannot take turns
 * forever. */
static int dist_rank(int kind) {
    int simple = kvf_dist_simple(kind);
    return simple > 0 ? simple - 1 : KVF_DIST_COUNT;
}

/* The kinds the minimizer proposes, simplest first; returns how many. */
static int simple_kinds(uint8_t kinds[KVF_DIST_COUNT]) {
    int n = 0;
    for (int rank = 1; rank <= KVF_DIST_COUNT; rank++)
        for (int kind = 0; kind < KVF_DIST_COUNT; kind++)
            if (kvf_dist_simple(kind) == rank) kinds[n++] = (uint8_t)kind;
    return n;
}

/* Values: constants, zeros, fewer distinct values; then the logit pattern, poison, scale. */
static int pass_values(kvf_spec *s, int k) {
    kvf_recipe *rp = &s->recipe;
    kvf_dist *d[3] = {&rp->q, &rp->k, &rp->v};
    uint8_t kinds[KVF_DIST_COUNT];
    const int nkinds = simple_kinds(kinds), per = nkinds + 2;
    if (k < 3 * per) {
        kvf_dist *t = d[k / per];
        int j = k % per;
        if (j < nkinds) {
            if (dist_rank(kinds[j]) >= dist_rank(t->kind)) return -1;
            t->kind = kinds[j];
            t->param = 0;
        } else if (j == nkinds) {
            t->log2_scale = 0;
        } else {
            t->param = 0;
        }
        return 1;
    }
    k -= 3 * per;
    if (k == 0) return rp->logits = KVF_LOGITS_NATURAL, 1;
    if (k >= 1 && k <= 4) {
        if (!(rp->poison & (1u << (k - 1)))) return -1;
        rp->poison &= (uint8_t) ~(1u << (k - 1));
        return 1;
    }
    float inv_sqrt = (float)(1.0 / sqrt((double)rp->head_dim));
    if (k == 5) return rp->sm_scale = 1.0f, 1;
    if (k == 6) { /* the usual scale, unless already at the simplest one */
        if (rp->sm_scale == 1.0f) return -1;
        return rp->sm_scale = inv_sqrt, 1;
    }
    if (k == 7) return rp->seed = 0, 1;
    return 0;
}

/* Explicit tensors: first try without them, then zero halves, quarters... of q, k and v. */
static int pass_explicit(kvf_spec *s, int k) {
    if (!s->has_explicit) return 0;
    kvf_explicit *ex = &s->explicit_tensors;
    if (k == 0) {
        free(ex->kv_indices);
        free(ex->q);
        free(ex->k_cache);
        free(ex->v_cache);
        memset(ex, 0, sizeof *ex);
        s->has_explicit = 0;
        return 1;
    }
    k--;
    const kvf_recipe *rp = &s->recipe;
    int64_t sizes[3] = {(int64_t)rp->batch_size * rp->num_qo_heads * rp->head_dim,
                        ex->num_pages * rp->page_size * rp->num_kv_heads * rp->head_dim, 0};
    sizes[2] = sizes[1];
    kvf_bf16 *arr[3] = {ex->q, ex->k_cache, ex->v_cache};
    for (int t = 0; t < 3; t++) {
        for (int64_t parts = 2; parts <= 64; parts *= 2) {
            if (k < parts) {
                int64_t lo = sizes[t] * k / parts, hi = sizes[t] * (k + 1) / parts;
                int changed = 0;
                for (int64_t i = lo; i < hi; i++)
                    if (arr[t][i]) arr[t][i] = 0, changed = 1;
                return changed ? 1 : -1;
            }
            k -= (int)parts;
        }
    }
    return 0;
}

static const pass_fn passes[] = {
    pass_remove_sequence, pass_shorten,   pass_drop_override, pass_layout, pass_quant,
    pass_shape,           pass_page_size, pass_table,         pass_values, pass_explicit};

/* ---- the loop ------------------------------------------------------------------------------- */

/* The same explanation: the same attribution kind and, within a looser model, the same one
 * (the margin may move). */
static int same_attribution(const kvf_attribution *a, const kvf_attribution *b) {
    if (a->kind != b->kind) return 0;
    return a->kind != KVF_ATTRIB_PRECISION || kvf_precision_equal(&a->model, &b->model);
}

static int same_failure(const kvf_outcome *out, kvf_finding_class target,
                        const kvf_attribution *attribution) {
    return out->finding == target && same_attribution(&out->attribution, attribution);
}

int kvf_minimize(kvf_spec *spec, const kvf_minimize_opts *o, kvf_outcome *outcome,
                 kvf_minimize_stats *st, kvf_error *err) {
    memset(st, 0, sizeof *st);
    double t0 = now_s();
    ctx cx;
    int rc = start(&cx, o, err);
    if (rc) return rc;
    kvf_outcome first;
    rc = evaluate(&cx, spec, &first, err);
    if (rc == 1) rc = kvf_error_set(err, KVF_EINVAL, "the case does not build");
    if (rc) goto out;
    st->tries = 1;
    kvf_finding_class target = o->target != KVF_FINDING_NONE ? o->target : first.finding;
    if (target == KVF_FINDING_NONE || first.finding != target) {
        rc =
            kvf_error_set(err, KVF_ENOTFOUND,
                          "the case does not fail as %s with kernel %s under rule %s (it gives %s)",
                          target == KVF_FINDING_NONE ? "anything" : kvf_finding_class_name(target),
                          o->kernel->name, o->rule.name, kvf_finding_class_name(first.finding));
        goto out;
    }
    st->found = target;
    st->attribution = first.attribution;
    cx.trial.attribute_class = target;
    kvf_outcome best = first;
    int64_t max_tries = o->max_tries > 0 ? o->max_tries : 2000;
    FILE *log = o->log ? o->log : stderr;
    int progress = 1;
    while (progress) {
        progress = 0;
        for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
            for (int k = 0;;) {
                if (st->tries >= max_tries) goto budget;
                if (o->time_limit_s > 0 && now_s() - t0 > o->time_limit_s) goto budget;
                kvf_spec cand;
                if (kvf_spec_copy(&cand, spec, err)) {
                    rc = KVF_ENOMEM;
                    goto out;
                }
                int r = passes[p](&cand, k);
                if (r == 0) {
                    kvf_spec_free(&cand);
                    break;
                }
                if (r < 0 || kvf_spec_equal(&cand, spec)) {
                    kvf_spec_free(&cand);
                    k++;
                    continue;
                }
                kvf_outcome out;
                int er = evaluate(&cx, &cand, &out, err);
                if (er < 0) {
                    kvf_spec_free(&cand);
                    rc = er;
                    goto out;
                }
                if (er == 0) st->tries++;
                if (er == 0 && same_failure(&out, target, &st->attribution)) {
                    kvf_spec_free(spec);
                    *spec = cand;
                    best = out;
                    st->accepted++;
                    progress = 1;
                    if (o->verbose) {
                        char size[256];
                        kvf_spec_size_text(size, sizeof size, spec);
                        fprintf(log, "kvfuzz minimize: kept: %s\n", size);
                    }
                } else {
                    kvf_spec_free(&cand);
                    k++;
                }
            }
        }
    }
budget:
    if (outcome) *outcome = best;
    rc = 0;
out:
    st->elapsed_s = now_s() - t0;
    kvf_runner_destroy(cx.runner);
    return rc;
}
