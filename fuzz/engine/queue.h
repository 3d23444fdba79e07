/* A bounded blocking queue of pointers, for every hand-over between the campaign's threads
 * (generators -> dispatchers, dispatchers -> oracle threads). Any number of producers and
 * consumers; items come out in the order they went in. Bounded twice: at most `cap` items,
 * and at most `max_bytes` of the sizes their producers declare (an item larger than that
 * alone still goes in, into an empty queue), so that a queue deep enough to ride out a slow
 * neighbour's bursts of small cases cannot hold as many of the largest.
 *
 * States: open; closed (kvf__queue_close: pushes are refused, pops drain what is left and then
 * return NULL); aborted (kvf__queue_abort: every waiter wakes, pushes are refused and pops
 * return NULL at once, leaving the items for kvf__queue_free to release).
 *
 * Ownership: a pushed item belongs to the queue until popped; a refused push leaves it with
 * the caller. kvf__queue_free releases the items still inside with free_item. Errors:
 * kvf__queue_init returns -1 when memory runs out. */
#ifndef KVF_FUZZ_QUEUE_H
#define KVF_FUZZ_QUEUE_H

#include <pthread.h>

typedef struct kvf__queue {
    pthread_mutex_t mu;
    pthread_cond_t ready, space;
    void **items;
    size_t *sizes; /* each item's declared bytes */
    int cap, head, count;
    size_t bytes, max_bytes;
    int closed, aborted;
} kvf__queue;

/* max_bytes 0: bounded by the item count only. */
int kvf__queue_init(kvf__queue *q, int cap, size_t max_bytes);
void kvf__queue_free(kvf__queue *q, void (*free_item)(void *));

/* Waits for room (for `bytes` more: kvf__queue_push declares 0). 0 when the item went in, -1
 * when the queue is closed or aborted. */
int kvf__queue_push(kvf__queue *q, void *item);
int kvf__queue_push_sized(kvf__queue *q, void *item, size_t bytes);
/* Waits for an item. NULL when the queue is aborted, or closed and empty. */
void *kvf__queue_pop(kvf__queue *q);

void kvf__queue_close(kvf__queue *q);
void kvf__queue_abort(kvf__queue *q);

#endif
