/* The bounded blocking queue (queue.h): a ring under one mutex, with a condition for each
 * direction. The campaign hands over one case per kernel launch, so a lock per hand-over costs
 * nothing measurable next to the oracle. */
#include "queue.h"

#include <stdlib.h>

int kvf__queue_init(kvf__queue *q, int cap) {
    q->items = calloc((size_t)(cap > 0 ? cap : 1), sizeof *q->items);
    if (!q->items) return -1;
    q->cap = cap > 0 ? cap : 1;
    q->head = q->count = 0;
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
    q->items = NULL;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->ready);
    pthread_cond_destroy(&q->space);
}

int kvf__queue_push(kvf__queue *q, void *item) {
    pthread_mutex_lock(&q->mu);
    while (q->count == q->cap && !q->closed && !q->aborted)
        pthread_cond_wait(&q->space, &q->mu);
    if (q->closed || q->aborted) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    q->items[(q->head + q->count) % q->cap] = item;
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
        q->head = (q->head + 1) % q->cap;
        q->count--;
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
