/* The bounded blocking queue (queue.h): a ring under one mutex, with a condition for each
 * direction. The campaign hands over one case per kernel launch, so a lock per hand-over costs
 * nothing measurable next to the oracle. */
#include "queue.h"

#include <stdlib.h>

int kvf__queue_init(kvf__queue *q, int cap, size_t max_bytes) {
    q->items = calloc((size_t)(cap > 0 ? cap : 1), sizeof *q->items);
    q->sizes = calloc((size_t)(cap > 0 ? cap : 1), sizeof *q->sizes);
    if (!q->items || !q->sizes) {
        free(q->items);
        free(q->sizes);
        q->items = NULL;
        q->sizes = NULL;
        return -1;
    }
    q->cap = cap > 0 ? cap : 1;
    q->head = q->count = 0;
    q->bytes = 0;
    q->max_bytes = max_bytes;
    q->closed = q->aborted = 0;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->ready, NULL);
    pthread_cond_init(&q->space, NULL);
    return 0;
}

void kvf__queue_free(kvf__queue *q, void (*free_item)(void *)) {
    if (!q->items) return;
    for (int i = 0; i < q->count && free_item; i++)
        free_item(q->items[(q->head + i) % q->cap]);
    free(q->items);
    free(q->sizes);
    q->items = NULL;
    q->sizes = NULL;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->ready);
    pthread_cond_destroy(&q->space);
}

/* Whether `bytes` more must wait: the queue is full by count, or by bytes unless empty. */
static int full_for(const kvf__queue *q, size_t bytes) {
    if (q->count == q->cap) return 1;
    if (q->max_bytes == 0 || q->count == 0) return 0;
    return q->bytes >= q->max_bytes || bytes > q->max_bytes - q->bytes; /* no wrap-around */
}

int kvf__queue_push(kvf__queue *q, void *item) {
    return kvf__queue_push_sized(q, item, 0);
}

int kvf__queue_push_sized(kvf__queue *q, void *item, size_t bytes) {
    pthread_mutex_lock(&q->mu);
    while (full_for(q, bytes) && !q->closed && !q->aborted)
        pthread_cond_wait(&q->space, &q->mu);
    if (q->closed || q->aborted) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    const int at = (q->head + q->count) % q->cap;
    q->items[at] = item;
    q->sizes[at] = bytes;
    q->bytes += bytes;
    q->count++;
    pthread_cond_signal(&q->ready);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

void *kvf__queue_pop(kvf__queue *q) {
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->closed && !q->aborted)
        pthread_cond_wait(&q->ready, &q->mu);
    void *item = NULL;
    if (q->count > 0 && !q->aborted) {
        item = q->items[q->head];
        q->bytes -= q->sizes[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        /* One producer, as for a count alone; every producer once the queue is empty, which
         * takes any item. A producer woken for an item that still does not fit waits for the
         * next pop, so none waits past the queue's emptying. */
        if (q->count == 0)
            pthread_cond_broadcast(&q->space);
        else
            pthread_cond_signal(&q->space);
    }
    pthread_mutex_unlock(&q->mu);
    return item;
}

void kvf__queue_close(kvf__queue *q) {
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->ready);
    pthread_cond_broadcast(&q->space);
    pthread_mutex_unlock(&q->mu);
}

void kvf__queue_abort(kvf__queue *q) {
    pthread_mutex_lock(&q->mu);
    q->aborted = 1;
    pthread_cond_broadcast(&q->ready);
    pthread_cond_broadcast(&q->space);
    pthread_mutex_unlock(&q->mu);
}
