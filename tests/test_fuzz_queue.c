/* Unit tests for the campaign's bounded queue (fuzz/engine/queue.c): many producers and consumers,
 * and the byte bound. */
#include "fuzz_fixtures.h"
#include "../fuzz/engine/queue.h" /* the campaign's internal queue, tested directly */

/* ---- the bounded queue ------------------------------------------------------------------- */

typedef struct queue_producer {
    kvf__queue *q;
    int base, n, refused;
} queue_producer;

static void *queue_produce(void *arg) {
    queue_producer *p = arg;
    for (int i = 0; i < p->n; i++) {
        /* Sizes 0 to 60 against the byte-bounded queue's 100: some items wait for bytes, some
         * for a count. */
        const size_t bytes = (size_t)((p->base + i) % 7) * 10;
        if (kvf__queue_push_sized(p->q, (void *)(intptr_t)(p->base + i + 1), bytes)) p->refused++;
    }
    return NULL;
}

static int freed_items;
static void count_free(void *item) {
    (void)item;
    freed_items++;
}

/* Many producers through a queue of 3 items and 100 bytes: every item comes out once, each
 * producer's in order (a lost wake-up hangs here); close drains, abort refuses, free releases
 * what is left. */
static void queue_bounded_mpmc(void) {
    kvf__queue q;
    CHECK(kvf__queue_init(&q, 3, 100) == 0);
    enum { P = 4, N = 2000 };
    queue_producer prod[P];
    pthread_t tid[P];
    for (int i = 0; i < P; i++) {
        prod[i] = (queue_producer){&q, i * N, N, 0};
        pthread_create(&tid[i], NULL, queue_produce, &prod[i]);
    }
    static int seen[P * N];
    memset(seen, 0, sizeof seen);
    int last[P];
    for (int i = 0; i < P; i++)
        last[i] = -1;
    int in_order = 1;
    for (int k = 0; k < P * N; k++) {
        int v = (int)(intptr_t)kvf__queue_pop(&q) - 1;
        CHECK(v >= 0 && v < P * N);
        if (v < 0 || v >= P * N) break;
        seen[v]++;
        if (v % N <= last[v / N]) in_order = 0;
        last[v / N] = v % N;
        CHECK(q.count <= 3);
    }
    for (int i = 0; i < P; i++)
        pthread_join(tid[i], NULL);
    int once = 1;
    for (int k = 0; k < P * N; k++)
        once &= seen[k] == 1;
    CHECK(once);
    CHECK(in_order);
    /* Closed: what is inside still comes out, then NULL; pushes are refused. */
    CHECK(kvf__queue_push(&q, (void *)1) == 0);
    kvf__queue_close(&q);
    CHECK(kvf__queue_push(&q, (void *)2) != 0);
    CHECK(kvf__queue_pop(&q) == (void *)1);
    CHECK(kvf__queue_pop(&q) == NULL);
    kvf__queue_free(&q, count_free);
    /* Aborted: pops return at once, the items stay for free. */
    CHECK(kvf__queue_init(&q, 2, 0) == 0);
    CHECK(kvf__queue_push(&q, (void *)1) == 0);
    kvf__queue_abort(&q);
    CHECK(kvf__queue_pop(&q) == NULL);
    freed_items = 0;
    kvf__queue_free(&q, count_free);
    CHECK_INT_EQ(freed_items, 1);
}

typedef struct sized_producer {
    kvf__queue *q;
    const size_t *sizes;
    int n;
} sized_producer;

static void *queue_produce_sized(void *arg) {
    sized_producer *p = arg;
    for (int i = 0; i < p->n; i++)
        kvf__queue_push_sized(p->q, (void *)(intptr_t)(i + 1), p->sizes[i]);
    return NULL;
}

/* The byte bound: pushes wait while the declared bytes would pass it, except into an empty
 * queue (an item larger than the bound alone still passes); every item comes out in order. */
static void queue_byte_bound(void) {
    kvf__queue q;
    CHECK(kvf__queue_init(&q, 8, 100) == 0);
    static const size_t sizes[] = {60, 60, 30, 200, 10, 100, 1};
    enum { N = (int)(sizeof sizes / sizeof sizes[0]) };
    sized_producer p = {&q, sizes, N};
    pthread_t tid;
    pthread_create(&tid, NULL, queue_produce_sized, &p);
    int most_items = 0;
    for (int k = 0; k < N; k++) {
        /* Let the producer fill what the bounds allow before each pop. */
        for (int spin = 0; spin < 200; spin++) {
            pthread_mutex_lock(&q.mu);
            const int full = q.count == N - k || q.count == 8 ||
                             (q.count > 0 && sizes[k + q.count] > 100 - q.bytes);
            pthread_mutex_unlock(&q.mu);
            if (full) break;
            usleep(1000);
        }
        pthread_mutex_lock(&q.mu);
        const int count = q.count;
        const size_t bytes = q.bytes;
        pthread_mutex_unlock(&q.mu);
        if (count > most_items) most_items = count;
        if (count > 1 && bytes > 100)
            CHECK_FAIL_AT("%d items hold %zu bytes, over 100", count, bytes);
        CHECK_INT_EQ((int)(intptr_t)kvf__queue_pop(&q), k + 1);
    }
    pthread_join(tid, NULL);
    CHECK(most_items >= 2); /* the small ones shared the queue */
    pthread_mutex_lock(&q.mu);
    CHECK(q.count == 0 && q.bytes == 0);
    pthread_mutex_unlock(&q.mu);
    kvf__queue_free(&q, NULL);
}

static const check_test tests[] = {
    {"queue_bounded_mpmc", queue_bounded_mpmc},
    {"queue_byte_bound", queue_byte_bound},
    {NULL, NULL},
};

CHECK_MAIN(tests)
