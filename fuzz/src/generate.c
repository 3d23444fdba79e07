/* Generator threads (campaign_internal.h): each builds cases ahead of the kernel, from its own
 * stream of the campaign seed. Generation costs a fraction of the oracle's time per case, but
 * on a many-core machine one thread would not keep up with the oracle pool. */
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

/* The next case: first the initial corpus as it is, then a mix of fresh random recipes and
 * mutations (and cross-overs) of the corpus, which grows with cases reaching new buckets. */
static kvf__job *make_job(struct kvf_campaign *cp, kvf_prng *rng, uint64_t index) {
    const kvf_campaign_opts *o = cp->opts;
    kvf__job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->index = index;
    for (int attempt = 0; attempt < 64; attempt++) {
        kvf_spec s;
        int have = 0, as_is = 0;
        kvf__corpus_entry base, other;
        kvf__corpus_pick(&cp->corpus, rng, index, attempt, &base, &other, &as_is);
        if (base.bytes && kvf_spec_decode(&s, base.bytes, base.size, &o->case_limits, NULL) == 0) {
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
        j->o = malloc((size_t)(kvf_case_o_elems(&j->c) + 1) * sizeof *j->o);
        j->lse = malloc((size_t)(kvf_case_lse_elems(&j->c) + 1) * sizeof *j->lse);
        if (!j->o || !j->lse) break;
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
        kvf__job *j = make_job(cp, &g->rng, index);
        if (!j) break;
        if (kvf__queue_push(&cp->ready, j)) { /* stopping: nobody will run it */
            kvf__job_free(j);
            break;
        }
    }
    if (atomic_fetch_sub(&cp->live_generators, 1) == 1) kvf__queue_close(&cp->ready);
    return NULL;
}
