/* Generator threads (campaign_internal.h): each builds cases ahead of the kernel, from its own
 * stream of the campaign seed. Generation costs a fraction of the oracle's time per case, but
 * on a many-core machine one thread would not keep up with the oracle pool. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "campaign_internal.h"

/* Counts a generated case skipped because the kernel does not support its shape, by reason
 * (the first seven distinct reasons, then "(other reasons)" for the rest). */
static void count_skip(struct kvf_campaign *cp, const char *why) {
    kvf_campaign_stats *st = cp->stats;
    pthread_mutex_lock(&cp->mu);
    st->skipped_unsupported++;
    const char *reason = why[0] ? why : "no reason given";
    const int last = KVF_CAMPAIGN_REASONS - 1; /* for every reason past the first seven */
    int i = 0;
    while (i < last && st->skip_reasons[i][0] && strcmp(st->skip_reasons[i], reason) != 0)
        i++;
    if (i == last) reason = "(other reasons)";
    if (!st->skip_reasons[i][0])
        snprintf(st->skip_reasons[i], sizeof st->skip_reasons[i], "%s", reason);
    st->skip_counts[i]++;
    pthread_mutex_unlock(&cp->mu);
}

/* ---- large cases (docs/fuzzing.md, "Reach") -----------------------------------------------
 *
 * The generator's own recipes stay small (a bug at tens of tokens is found fastest there), so
 * the long sequences and wide batches of real decode are made here: a random recipe drawn
 * under the large limits, then its shape chosen. Three large cases in four are long (1 to 4
 * sequences, the longest 4,096 to 32,768 tokens, 32,768 in half of them and 131,072 in one in
 * eight), one in four is wide (64 to 256 sequences, lengths log-uniform in 0 .. 4,096). Heads
 * and head dimension are cut (keeping the group) until the case fits large.max_work, so the
 * length is what the budget buys. */

static int64_t pick_long_tokens(kvf_prng *rng) {
    uint64_t r = kvf_prng_below(rng, 8);
    if (r == 0) return 131072;
    if (r < 5) return 32768;
    return 4096 + (int64_t)kvf_prng_below(rng, 32768 - 4096);
}

static int64_t log_uniform(kvf_prng *rng, int64_t max) {
    /* 0 .. max, each octave as likely as the next (and 0 as likely as one octave). */
    int octaves = 0;
    while ((INT64_C(1) << octaves) < max)
        octaves++;
    uint64_t k = kvf_prng_below(rng, (uint64_t)octaves + 1);
    if (k == 0) return 0;
    int64_t lo = INT64_C(1) << (k - 1), hi = INT64_C(1) << k;
    if (hi > max) hi = max;
    return lo + (int64_t)kvf_prng_below(rng, (uint64_t)(hi - lo + 1));
}

/* Cuts Hq, Hk and D (the group kept while it can be) until the work fits. */
static void fit_heads(kvf_spec *s, int64_t max_work) {
    kvf_recipe *rp = &s->recipe;
    const float usual = (float)(1.0 / sqrt((double)rp->head_dim));
    while (kvf_spec_work(s) > max_work) {
        if (rp->num_kv_heads > 1 && rp->num_kv_heads % 2 == 0) {
            rp->num_kv_heads /= 2;
            rp->num_qo_heads /= 2;
        } else if (rp->num_qo_heads > rp->num_kv_heads) {
            int g = rp->num_qo_heads / rp->num_kv_heads;
            rp->num_qo_heads = (uint8_t)(rp->num_kv_heads * (g > 1 ? g / 2 : 1));
        } else if (rp->num_kv_heads > 1) {
            rp->num_kv_heads = rp->num_qo_heads = 1;
        } else if (rp->head_dim > 16) {
            rp->head_dim = (uint16_t)(rp->head_dim / 2);
        } else {
            break; /* kvf_spec_fit shortens the sequences instead */
        }
    }
    /* The usual scale, 1/sqrt(D), follows the new D; any other the recipe drew is kept. */
    if (rp->sm_scale == usual) rp->sm_scale = (float)(1.0 / sqrt((double)rp->head_dim));
}

/* A large case into *s (empty on entry). 0, or nonzero when the recipe could not be made. */
static int large_spec(kvf_spec *s, kvf_prng *rng, const kvf_mutate_limits *lim) {
    kvf_random_opts ro;
    kvf_mutate_random_opts(&ro, lim);
    const int wide = kvf_prng_below(rng, 4) == 0;
    ro.max_batch = 4;     /* the batch is set below */
    ro.max_tokens = 4096; /* drawn small, made long below: drawing is not free */
    if (kvf_spec_random(s, kvf_prng_next(rng), &ro, NULL)) return -1;
    kvf_recipe *rp = &s->recipe;
    s->num_overrides = 0;                       /* overrides index the small case's tensors */
    if (rp->page_size < 16) rp->page_size = 16; /* 131,072 tokens in at most 65,535 pages */
    uint16_t batch = wide ? (uint16_t)(64 + kvf_prng_below(rng, 256 - 64 + 1))
                          : (uint16_t)(1 + kvf_prng_below(rng, 4));
    if (batch > lim->max_batch) batch = (uint16_t)lim->max_batch;
    if (kvf_spec_set_batch(s, batch, NULL)) {
        kvf_spec_free(s);
        return -1;
    }
    if (wide) {
        for (uint32_t b = 0; b < batch; b++)
            kvf_recipe_set_seq_len(rp, b, log_uniform(rng, 4096));
    } else {
        kvf_recipe_set_seq_len(rp, 0, pick_long_tokens(rng));
        for (uint32_t b = 1; b < batch; b++)
            kvf_recipe_set_seq_len(rp, b, log_uniform(rng, kvf_recipe_seq_len(rp, 0)));
    }
    fit_heads(s, lim->max_work);
    kvf_spec_fit(s, lim);
    return 0;
}

/* The next case: first the initial corpus as it is, then a mix of fresh random recipes and
 * mutations (and cross-overs) of the corpus, which grows with cases reaching new buckets. */
static kvf__job *make_job(struct kvf_campaign *cp, kvf__generator *g, uint64_t index) {
    const kvf_campaign_opts *o = cp->opts;
    kvf_prng *rng = &g->rng;
    /* Large while the large cases' share of this generator's work is below large_share (the
     * initial corpus runs first, as it is). */
    const int large = o->large_share > 0 && index >= kvf__corpus_initial(&cp->corpus) &&
                      g->work_large < o->large_share * (g->work_small + g->work_large);
    kvf__job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->index = index;
    for (int attempt = 0; attempt < 64; attempt++) {
        kvf_spec s;
        int have = 0, as_is = 0;
        kvf__corpus_entry base, other;
        if (large) {
            base = other = (kvf__corpus_entry){0};
            if (large_spec(&s, rng, &o->large)) continue;
            have = 1;
        } else {
            kvf__corpus_pick(&cp->corpus, rng, index, attempt, &base, &other, &as_is);
        }
        if (!large && base.bytes &&
            kvf_spec_decode(&s, base.bytes, base.size, &o->case_limits, NULL) == 0) {
            have = 1;
            if (!as_is) {
                kvf_spec_fit(&s, &o->mutate); /* a large seed shrinks into the budget first */
                kvf_spec b2, mixed;
                if (other.bytes &&
                    kvf_spec_decode(&b2, other.bytes, other.size, &o->case_limits, NULL) == 0) {
                    if (kvf_spec_crossover(&mixed, &s, &b2, rng, &o->mutate) == 0) {
                        kvf_spec_free(&s);
                        s = mixed;
                    }
                    kvf_spec_free(&b2);
                }
                int moves = 1 + (int)kvf_prng_below(rng, 4);
                for (int m = 0; m < moves; m++)
                    kvf_spec_mutate(&s, rng, -1, &o->mutate, &o->case_limits);
            }
            /* An initial entry runs as it is, but for its caches' dtypes when the campaign
             * restricts them (--kv-dtype): a bf16 entry gets the FP8 caches of its seed, an
             * FP8 one is made bf16 or takes the dtypes asked for; explicit tensors keep theirs
             * (kvf_spec_fit_quant). */
            if (as_is && kvf_kv_dtypes_norm(o->mutate.kv_dtypes) != KVF_KV_DTYPES_ALL)
                kvf_spec_fit_quant(&s, &o->mutate);
            j->from_corpus = as_is;
        }
        free(base.bytes);
        free(other.bytes);
        if (!have) {
            kvf_random_opts ro;
            kvf_mutate_random_opts(&ro, &o->mutate);
            if (kvf_spec_random(&s, kvf_prng_next(rng), &ro, NULL)) continue;
            kvf_spec_fit(&s, &o->mutate);
        }
        /* The shape set (shape_set.h): the initial corpus runs as it is. */
        if (!j->from_corpus)
            kvf__shape_set_apply(&cp->shapes, &s, rng, large ? &o->large : &o->mutate);
        if (kvf_spec_repair(&s, &o->case_limits, o->mutate.allow_nonfinite, &j->c, NULL) != 0 ||
            kvf_spec_encode(&s, &j->bytes, &j->size, NULL) != 0) {
            kvf_spec_free(&s);
            kvf_case_free(&j->c);
            pthread_mutex_lock(&cp->mu);
            cp->stats->rejected++;
            pthread_mutex_unlock(&cp->mu);
            continue;
        }
        /* Capability-aware generation: a shape the kernel's supports() refuses is replaced by
         * another, so the budget goes to cases the kernel runs. The last attempt keeps what it
         * got, so a kernel that refuses everything still runs (and is counted unsupported)
         * rather than starving the campaign. */
        if (!o->oracle_only && attempt < 63) {
            kvf_plugin_shape shape;
            kvf_kernel_shape(&j->c, &shape);
            char why[KVF_CAMPAIGN_REASON_MAX];
            if (kvf_kernel_supports(o->kernel, &shape, why, sizeof why) == 0) {
                count_skip(cp, why);
                kvf_spec_free(&s);
                kvf_case_free(&j->c);
                free(j->bytes);
                j->bytes = NULL;
                continue;
            }
        }
        j->spec = s;
        j->large = large;
        if (large)
            g->work_large += (double)kvf_spec_work(&s);
        else
            g->work_small += (double)kvf_spec_work(&s);
        j->o = malloc((size_t)(kvf_case_o_elems(&j->c) + 1) * sizeof *j->o);
        j->lse = malloc((size_t)(kvf_case_lse_elems(&j->c) + 1) * sizeof *j->lse);
        if (!j->o || !j->lse) break;
        kvf__job_relate(cp, j);
        return j;
    }
    kvf__job_free(j);
    return NULL;
}

void *kvf__generator_main(void *arg) {
    kvf__generator *g = arg;
    struct kvf_campaign *cp = g->cp;
    const kvf_campaign_opts *o = cp->opts;
    for (;;) {
        if (atomic_load(&cp->stop)) break;
        uint64_t index = atomic_fetch_add(&cp->next_index, 1);
        if (o->max_runs > 0 && index >= (uint64_t)o->max_runs) break;
        kvf__job *j = make_job(cp, g, index);
        if (!j) break;
        if (kvf__queue_push_sized(&cp->ready, j, kvf__job_bytes(j))) { /* stopping */
            kvf__job_free(j);
            break;
        }
    }
    if (atomic_fetch_sub(&cp->live_generators, 1) == 1) kvf__queue_close(&cp->ready);
    return NULL;
}
