/* The counts of one statistics scope (one rule of one case) on their way into the maps
 * (stats_internal.h, kvf__pending).
 *
 * A judged element lands in four histograms, the abs-vs-|exact| density and four class cells.
 * Looking each up in its hash map per element made the statistics the most expensive part of
 * judging a case, several times the fast oracle. Here the bucket counts go into small
 * direct-mapped tables, the cells of the classes a row shares (head, sequence length, slot)
 * into one cell per row, and the head-dim cells into an array by d; each reaches its map when
 * its table slot is taken by another key, when the row changes, and when the scope ends.
 * Every statistic is a count, a sum or a maximum, so the result is exactly what counting
 * element by element gives. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"

#define SLOTS 64        /* per table: the distinct buckets of a case mostly fit */
#define BITS_TABLE 4096 /* round(1024 log2(u + 1)) tabulated for u below this */

typedef struct pend_count {
    int64_t key, n;
} pend_count;

/* A direct-mapped table; a slot holds a count only while its bit in `used` is set, so a table
 * is emptied by clearing the mask, and flushed by visiting the set bits. */
typedef struct pend_table {
    uint64_t used;
    pend_count slot[SLOTS];
} pend_table;

/* What one element adds to one of a group's four outstats (o or lse, in or out of the model). */
typedef struct pend_target {
    kvf__outstats *o;   /* NULL until the target's first element */
    pend_table hist[4]; /* buckets of abs, rel, ulp, margin */
    pend_table dens;
    /* The row being counted: its head, sequence-length and slot cells are one cell until the
     * row changes. */
    int row_open;
    int32_t row_b, row_h;
    int64_t row_key[KVF_CLASS_COUNT];
    int row_wanted[KVF_CLASS_COUNT];
    kvf__cell row;
    kvf__cell *dim; /* [dim_cap] by head-dim index; NULL until needed */
    int32_t dim_cap;
} pend_target;

struct kvf__pending {
    const kvf_case *c;
    int lost;         /* a count could not be added (out of memory) */
    pend_target t[4]; /* by output * 2 + out_of_model */
};

static int64_t bits_table[BITS_TABLE];
static pthread_once_t bits_once = PTHREAD_ONCE_INIT;

static int64_t bits_exact(int64_t ulps) {
    return llround(KVF_BITS_SCALE * log2((double)ulps + 1.0));
}

static void bits_init(void) {
    for (int64_t u = 0; u < BITS_TABLE; u++)
        bits_table[u] = bits_exact(u);
}

/* round(1024 log2(ulps + 1)) for ulps > 0, as the cells sum it; 0 otherwise. */
static int64_t bits_of(int64_t ulps) {
    if (ulps <= 0) return 0;
    return ulps < BITS_TABLE ? bits_table[ulps] : bits_exact(ulps);
}

kvf__pending *kvf__pending_new(kvf_stats *s, const kvf_case *c) {
    pthread_once(&bits_once, bits_init);
    kvf__pending *p = s->spare_pending; /* cleared when its scope finished */
    s->spare_pending = NULL;
    if (!p) p = calloc(1, sizeof *p);
    if (p) p->c = c;
    return p;
}

void kvf__pending_free(kvf__pending *p) {
    if (!p) return;
    for (int i = 0; i < 4; i++)
        free(p->t[i].dim);
    free(p);
}

static void count_into(kvf__pending *p, kvf__map *m, int64_t key, int64_t n) {
    int64_t *cnt = kvf__map_get(m, key, 1);
    if (!cnt || kvf__count_add(cnt, n)) p->lost = 1;
}

static void pend_count_addn(kvf__pending *p, pend_table *tb, kvf__map *m, int64_t key, int64_t n) {
    const unsigned j = (unsigned)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 58);
    const uint64_t bit = (uint64_t)1 << j;
    pend_count *s = &tb->slot[j];
    if (!(tb->used & bit)) {
        tb->used |= bit;
        s->key = key;
        s->n = n;
    } else if (s->key != key) {
        count_into(p, m, s->key, s->n);
        s->key = key;
        s->n = n;
    } else {
        s->n += n;
    }
}

static void pend_count_add(kvf__pending *p, pend_table *tb, kvf__map *m, int64_t key) {
    pend_count_addn(p, tb, m, key, 1);
}

/* Adds every count of the table to m and empties it. */
static void pend_table_flush(kvf__pending *p, pend_table *tb, kvf__map *m) {
    for (uint64_t u = tb->used; u; u &= u - 1) {
        const pend_count *s = &tb->slot[__builtin_ctzll(u)];
        count_into(p, m, s->key, s->n);
    }
    tb->used = 0;
}

static void pend_hist(kvf__pending *p, kvf__hist *h, pend_table *slots, double v) {
    h->total++;
    if (isnan(v))
        h->nan++;
    else if (v == 0)
        h->zero++;
    else if (isinf(v))
        h->inf++;
    else
        pend_count_add(p, slots, &h->buckets, kvf_stats_bucket(fabs(v)));
}

static void merge_cell(kvf__pending *p, kvf__map *m, int64_t key, const kvf__cell *src) {
    kvf__cell *dst = kvf__cell_get(m, key);
    if (!dst || kvf__cell_merge(dst, src)) p->lost = 1;
}

static void row_flush(kvf__pending *p, pend_target *t) {
    if (!t->row_open) return;
    for (int k = 0; k < KVF_CLASS_COUNT; k++)
        if (k != KVF_CLASS_DIM && t->row_wanted[k])
            merge_cell(p, &t->o->by[k], t->row_key[k], &t->row);
    memset(&t->row, 0, sizeof t->row);
    t->row_open = 0;
}

static pend_target *target_of(kvf__pending *p, kvf__outstats *o, kvf_output_kind output,
                              int out_of_model) {
    pend_target *t = &p->t[(output == KVF_OUTPUT_LSE) * 2 + (out_of_model != 0)];
    t->o = o;
    return t;
}

/* Opens row (b, h) as the target's row, flushing the row before it. The position class of both
 * o and lse is the slot of the row's last token: it is what separates full from partial last
 * pages, where page-table bugs live. */
static void row_enter(kvf__pending *p, pend_target *t, int32_t b, int32_t h) {
    if (t->row_open && t->row_b == b && t->row_h == h) return;
    row_flush(p, t);
    const kvf_case *c = p->c;
    int64_t len = 0;
    const int32_t S = c->page_size;
    if (b >= 0 && b < c->batch_size) len = kvf_case_seq_len(c, b);
    t->row_open = 1;
    t->row_b = b;
    t->row_h = h;
    t->row_key[KVF_CLASS_HEAD] = h;
    t->row_key[KVF_CLASS_SEQLEN] = len == 0 ? 0 : 1 + kvf__stats_octave((double)len);
    t->row_key[KVF_CLASS_SLOT] = len > 0 ? KVF_SLOT_KEY(S, (len - 1) % S) : 0;
    t->row_wanted[KVF_CLASS_HEAD] = t->row_wanted[KVF_CLASS_SEQLEN] = 1;
    t->row_wanted[KVF_CLASS_SLOT] = len > 0;
}

/* Whether the head-dim array covers index d (growing it to the case's head_dim first). */
static int dim_covers(kvf__pending *p, pend_target *t, int32_t d) {
    const int32_t D = p->c->head_dim;
    if (t->dim_cap < D && d < D) {
        free(t->dim);
        t->dim_cap = (t->dim = calloc((size_t)D, sizeof *t->dim)) ? D : 0;
        if (!t->dim) p->lost = 1;
    }
    return d < D && d < t->dim_cap;
}

void kvf__pending_add(kvf__pending *p, kvf__outstats *o, const kvf_element_error *e,
                      int finite_pair, int mismatch) {
    pend_target *t = target_of(p, o, e->output, e->out_of_model);
    pend_hist(p, &o->abs, &t->hist[0], e->abs_error);
    pend_hist(p, &o->rel, &t->hist[1], e->rel_error);
    pend_hist(p, &o->ulp, &t->hist[2], e->ulps < 0 ? NAN : (double)e->ulps);
    pend_hist(p, &o->margin, &t->hist[3], e->margin);
    if (!isnan(e->abs_error) && !isnan(e->exact_value))
        pend_count_add(
            p, &t->dens, &o->dens,
            KVF_DENS_KEY(kvf__stats_octave(e->abs_error), kvf__stats_octave(fabs(e->exact_value))));

    const int64_t bits = bits_of(e->ulps);
    row_enter(p, t, e->b, e->h);
    kvf__cell_add(&t->row, e, finite_pair, mismatch, bits);
    if (e->d < 0) return;
    if (dim_covers(p, t, e->d)) {
        kvf__cell_add(&t->dim[e->d], e, finite_pair, mismatch, bits);
    } else { /* past the case's head_dim (a caller's own element), or no array: at once */
        kvf__cell one;
        memset(&one, 0, sizeof one);
        kvf__cell_add(&one, e, finite_pair, mismatch, bits);
        merge_cell(p, &o->by[KVF_CLASS_DIM], e->d, &one);
    }
}

/* What kvf__pending_add does with each element of the run, which has abs, rel, ulp and margin
 * 0 (each histogram's zero count), passes, is finite and matches: the cells gain an element
 * with a distance of 0 ulps (0 bits) and nothing else. The density keys follow |exact|, so
 * equal octaves in a row are counted together. */
void kvf__pending_add_exact(kvf__pending *p, kvf__outstats *o, const kvf_exact_run *r) {
    if (r->n <= 0) return;
    pend_target *t = target_of(p, o, r->output, r->out_of_model);
    kvf__hist *h[4] = {&o->abs, &o->rel, &o->ulp, &o->margin};
    for (int k = 0; k < 4; k++) {
        h[k]->total += r->n;
        h[k]->zero += r->n;
    }
    /* Equal octaves in a row are counted together. */
    for (int32_t i = 0; i < r->n;) {
        const int32_t oct = kvf__stats_octave(fabs(r->exact[i]));
        int32_t j = i + 1;
        while (j < r->n && kvf__stats_octave(fabs(r->exact[j])) == oct)
            j++;
        pend_count_addn(p, &t->dens, &o->dens, KVF_DENS_KEY(KVF_OCT_ZERO, oct), j - i);
        i = j;
    }
    row_enter(p, t, r->b, r->h);
    t->row.n += r->n;
    t->row.bits_n += r->n;
    if (r->d < 0) return;
    /* One bounds check for the whole run when it lies in the array: checking each element
     * made the statistics a fifth slower (`kvfuzz bench --oracle`). */
    int32_t i = 0;
    if (dim_covers(p, t, r->d + r->n - 1)) /* then every d of the run is covered */
        for (kvf__cell *cell = t->dim + r->d; i < r->n; i++, cell++) {
            cell->n++;
            cell->bits_n++;
        }
    for (; i < r->n; i++) {
        const int32_t d = r->d + i;
        if (dim_covers(p, t, d)) {
            t->dim[d].n++;
            t->dim[d].bits_n++;
        } else {
            const kvf__cell one = {.n = 1, .bits_n = 1};
            merge_cell(p, &o->by[KVF_CLASS_DIM], d, &one);
        }
    }
}

int kvf__pending_finish(kvf_stats *s, kvf__pending *p) {
    if (!p) return 0;
    const int32_t D = p->c->head_dim;
    for (int i = 0; i < 4; i++) {
        pend_target *t = &p->t[i];
        if (!t->o) continue;
        kvf__hist *h[4] = {&t->o->abs, &t->o->rel, &t->o->ulp, &t->o->margin};
        for (int k = 0; k < 4; k++)
            pend_table_flush(p, &t->hist[k], &h[k]->buckets);
        pend_table_flush(p, &t->dens, &t->o->dens);
        row_flush(p, t);
        /* The head-dim cells are cleared as they go, for the next scope; the array keeps its
         * room (the tables are empty once flushed). */
        const int32_t nd = D < t->dim_cap ? D : t->dim_cap;
        for (int32_t d = 0; d < nd; d++)
            if (t->dim[d].n) {
                merge_cell(p, &t->o->by[KVF_CLASS_DIM], d, &t->dim[d]);
                memset(&t->dim[d], 0, sizeof t->dim[d]);
            }
        t->o = NULL;
    }
    const int lost = p->lost;
    p->lost = 0;
    p->c = NULL;
    if (s && !s->spare_pending)
        s->spare_pending = p;
    else
        kvf__pending_free(p);
    return lost ? -1 : 0;
}
