/* The int64-keyed hash map of the statistics (stats_internal.h): open addressing with linear
 * probing, Fibonacci hashing, load at most 1/2, and a one-entry cache for the runs of equal keys
 * that consecutive elements of a row produce. */
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"

void kvf__map_init(kvf__map *m, size_t vsize) {
    memset(m, 0, sizeof *m);
    m->vsize = vsize;
}

void kvf__map_free(kvf__map *m) {
    free(m->keys);
    free(m->used);
    free(m->vals);
    size_t vsize = m->vsize;
    kvf__map_init(m, vsize);
}

static size_t map_hash(int64_t key, size_t cap) {
    uint64_t x = (uint64_t)key * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing */
    return (size_t)(x >> 17) & (cap - 1);
}

static size_t map_slot(const kvf__map *m, int64_t key) {
    size_t i = map_hash(key, m->cap);
    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int map_grow(kvf__map *m) {
    size_t ncap = m->cap ? m->cap * 2 : 16;
    kvf__map n = {m->vsize, 0, ncap, NULL, NULL, NULL, 0, 0, 0};
    n.keys = malloc(ncap * sizeof *n.keys);
    n.used = calloc(ncap, 1);
    n.vals = malloc(ncap * m->vsize);
    if (!n.keys || !n.used || !n.vals) {
        free(n.keys);
        free(n.used);
        free(n.vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        size_t j = map_slot(&n, m->keys[i]);
        n.used[j] = 1;
        n.keys[j] = m->keys[i];
        memcpy(n.vals + j * m->vsize, m->vals + i * m->vsize, m->vsize);
        n.count++;
    }
    free(m->keys);
    free(m->used);
    free(m->vals);
    *m = n;
    return 0;
}

const void *kvf__map_find(const kvf__map *m, int64_t key) {
    if (m->cap == 0) return NULL;
    size_t i = map_slot(m, key);
    return m->used[i] ? m->vals + i * m->vsize : NULL;
}

void *kvf__map_get(kvf__map *m, int64_t key, int create) {
    if (m->has_last && m->last_key == key) return m->vals + m->last_slot * m->vsize;
    if (m->cap) {
        size_t i = map_slot(m, key);
        if (m->used[i]) {
            m->has_last = 1;
            m->last_key = key;
            m->last_slot = i;
            return m->vals + i * m->vsize;
        }
    }
    if (!create) return NULL;
    /* Keep the load at most 1/2 so probe sequences stay short. */
    if ((m->count + 1) * 2 > m->cap && map_grow(m)) return NULL;
    size_t i = map_slot(m, key);
    m->used[i] = 1;
    m->keys[i] = key;
    memset(m->vals + i * m->vsize, 0, m->vsize);
    m->count++;
    m->has_last = 1;
    m->last_key = key;
    m->last_slot = i;
    return m->vals + i * m->vsize;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t *kvf__map_sorted_keys(const kvf__map *m, size_t *n) {
    *n = 0;
    if (m->count == 0) return NULL;
    int64_t *keys = malloc(m->count * sizeof *keys);
    if (!keys) return NULL;
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i]) keys[(*n)++] = m->keys[i];
    qsort(keys, *n, sizeof *keys, cmp_i64);
    return keys;
}

int kvf__map_next(const kvf__map *m, kvf__map_iter *it, int64_t *key, const void **value) {
    while (it->slot < m->cap) {
        size_t i = it->slot++;
        if (!m->used[i]) continue;
        *key = m->keys[i];
        if (value) *value = m->vals + i * m->vsize;
        return 1;
    }
    return 0;
}
