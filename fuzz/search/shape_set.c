/* The shape set (shape_set.h). */
#include "shape_set.h"

#include <math.h>

#include "kvfuzz/mutate.h"
#include <stdlib.h>
#include <string.h>

void kvf__shape_set_init(kvf__shape_set *ss, int initial, uint64_t growth) {
    memset(ss, 0, sizeof *ss);
    pthread_mutex_init(&ss->mu, NULL);
    ss->initial = initial > KVF__SHAPE_SET_MAX ? KVF__SHAPE_SET_MAX : initial;
    ss->growth = growth > 0 ? growth : 1;
}

void kvf__shape_set_destroy(kvf__shape_set *ss) {
    pthread_mutex_destroy(&ss->mu);
}

static kvf__shape shape_of(const kvf_recipe *rp) {
    return (kvf__shape){rp->num_qo_heads, rp->num_kv_heads, rp->head_dim, rp->page_size};
}

static int same(const kvf__shape *a, const kvf__shape *b) {
    return a->num_qo_heads == b->num_qo_heads && a->num_kv_heads == b->num_kv_heads &&
           a->head_dim == b->head_dim && a->page_size == b->page_size;
}

/* Gives the recipe shape m, its sequences keeping their lengths in tokens (its page count per
 * sequence follows the page size) and the usual scale following D. Overrides index the old
 * shape's tensors, so they go; a page padding past what the new pool allows is cut to it. */
static int reshape(kvf_spec *s, const kvf__shape *m, const kvf_mutate_limits *lim) {
    kvf_recipe *rp = &s->recipe;
    int64_t *len = malloc(((size_t)rp->batch_size + 1) * sizeof *len);
    if (!len) return 0;
    for (uint32_t b = 0; b < rp->batch_size; b++)
        len[b] = kvf_recipe_seq_len(rp, b);
    const float usual = (float)(1.0 / sqrt((double)rp->head_dim));
    const int usual_scale = rp->sm_scale == usual;
    rp->num_qo_heads = m->num_qo_heads, rp->num_kv_heads = m->num_kv_heads;
    rp->head_dim = m->head_dim, rp->page_size = m->page_size;
    for (uint32_t b = 0; b < rp->batch_size; b++)
        kvf_recipe_set_seq_len(rp, b, len[b]);
    free(len);
    if (usual_scale) rp->sm_scale = (float)(1.0 / sqrt((double)rp->head_dim));
    s->num_overrides = 0;
    const int64_t pad = kvf_recipe_max_page_pad(rp);
    if ((int64_t)s->layout.kv_page_pad > pad) s->layout.kv_page_pad = (uint32_t)pad;
    /* A batch whose outputs alone would take half the work budget at this shape (the
     * budget counts (tokens + 32 x batch) x Hq x D, --max-work's help says) is halved, so that
     * fitting shortens sequences rather than narrowing the shape. */
    while (rp->batch_size > 1 && kvf_spec_work(s) > lim->max_work &&
           2 * 32 * (int64_t)rp->batch_size * rp->num_qo_heads * rp->head_dim > lim->max_work) {
        if (kvf_spec_set_batch(s, (uint16_t)(rp->batch_size / 2), NULL)) break;
    }
    kvf_spec_fit(s, lim);
    return 1;
}

int kvf__shape_set_apply(kvf__shape_set *ss, kvf_spec *spec, kvf_prng *rng,
                         const kvf_mutate_limits *lim) {
    if (ss->initial <= 0 || spec->has_explicit) return 0;
    const kvf__shape mine = shape_of(&spec->recipe);
    kvf__shape pick;
    pthread_mutex_lock(&ss->mu);
    const uint64_t seen = ss->seen++;
    int member = 0;
    for (int i = 0; i < ss->n && !member; i++)
        member = same(&ss->member[i], &mine);
    if (!member && ss->n < KVF__SHAPE_SET_MAX && (ss->n < ss->initial || seen >= ss->next_admit)) {
        ss->member[ss->n++] = mine;
        ss->next_admit = seen + ss->growth;
        member = 1;
    }
    if (!member) pick = ss->member[kvf_prng_below(rng, (uint64_t)ss->n)];
    pthread_mutex_unlock(&ss->mu);
    if (member || !reshape(spec, &pick, lim)) return 0;
    pthread_mutex_lock(&ss->mu);
    ss->replaced++;
    pthread_mutex_unlock(&ss->mu);
    return 1;
}

int kvf__shape_set_size(kvf__shape_set *ss) {
    pthread_mutex_lock(&ss->mu);
    int n = ss->n;
    pthread_mutex_unlock(&ss->mu);
    return n;
}
