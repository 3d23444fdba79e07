/* GMP's and MPFR's memory through a counting allocator (mp_memory.h).
 *
 * Why not longjmp: unwinding out of an MPFR call leaves MPFR's own state (its caches, the
 * exponent range, half-updated variables) undefined, and the oracle's variables would leak.
 * Instead every allocation succeeds, and failure is a flag the oracle polls:
 *   - each thread counts the bytes GMP holds for it (GMP passes the old size to realloc and
 *     free, so no header is needed) and compares them with the cap set by kvf__mp_begin (the
 *     memory budget, docs/case-format.md "Budgets");
 *   - a request past the cap, or one malloc/realloc refuses (an address-space limit), is
 *     served from a static arena and marks the thread failed;
 *   - the oracle polls the mark at least once per token of every loop that allocates through
 *     MPFR (mpfr_init2, mpfr_set_prec, mpfr_exp's temporaries), so after the first failure a
 *     thread makes at most one more MPFR call's worth of allocations: a few times the working
 *     precision (at most 2^19 bits, i.e. 64 KiB per number; the exact weight sum of a streamed
 *     row, at most 2^21 bits) per variable. The arena holds
 *     16 MiB, far more than that for every thread of a row set; it is handed out under a lock
 *     and reset when its last block is freed.
 * Only if the arena itself runs out (never, with the polls in place) does the process stop,
 * with a message, as GMP would have. */
#include "mp_memory.h"

#include <gmp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BYTES ((size_t)16 << 20)
#define ARENA_ALIGN 16

volatile int kvf__oracle_stop;

static _Alignas(ARENA_ALIGN) unsigned char arena[ARENA_BYTES];
static size_t arena_used, arena_live;
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local int64_t tl_bytes, tl_cap;
static _Thread_local int tl_failed, tl_active;

static int in_arena(const void *p) {
    const unsigned char *c = p;
    return c >= arena && c < arena + ARENA_BYTES;
}

static void *arena_alloc(size_t n) {
    tl_failed = 1;
    pthread_mutex_lock(&arena_lock);
    size_t at = (arena_used + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    void *p = NULL;
    if (n <= ARENA_BYTES && at <= ARENA_BYTES - n) {
        p = arena + at;
        arena_used = at + n;
        arena_live++;
    }
    pthread_mutex_unlock(&arena_lock);
    if (!p) {
        fputs("kvfuzz: GMP/MPFR memory is exhausted and the emergency reserve is spent\n", stderr);
        abort();
    }
    return p;
}

static void arena_free(void) {
    pthread_mutex_lock(&arena_lock);
    if (arena_live && --arena_live == 0) arena_used = 0;
    pthread_mutex_unlock(&arena_lock);
}

/* Outside the oracle (tl_active 0) nothing is capped and nobody polls: a refused request still
 * takes the arena, which only delays GMP's own abort. */
static int over_cap(size_t more) {
    return tl_active && (tl_failed || (tl_cap > 0 && (int64_t)more > tl_cap - tl_bytes));
}

static void *mp_alloc(size_t n) {
    if (!over_cap(n)) {
        void *p = malloc(n);
        if (p) {
            tl_bytes += (int64_t)n;
            return p;
        }
    }
    return arena_alloc(n);
}

static void mp_free(void *p, size_t n) {
    if (!p) return;
    if (in_arena(p)) {
        arena_free();
        return;
    }
    free(p);
    tl_bytes -= (int64_t)n; /* may go below 0 for blocks another thread allocated: harmless */
}

static void *mp_realloc(void *p, size_t old, size_t n) {
    if (!in_arena(p) && (n <= old || !over_cap(n - old))) {
        void *q = realloc(p, n);
        if (q) {
            tl_bytes += (int64_t)n - (int64_t)old;
            return q;
        }
    }
    /* Past the cap, refused, or an arena block: a new block, the old one released. */
    void *q = mp_alloc(n);
    memcpy(q, p, old < n ? old : n);
    mp_free(p, old);
    return q;
}

static pthread_once_t installed = PTHREAD_ONCE_INIT;

static void install(void) {
    mp_set_memory_functions(mp_alloc, mp_realloc, mp_free);
}

void kvf__mp_install(void) {
    pthread_once(&installed, install);
}

void kvf__mp_begin(int64_t cap_bytes) {
    tl_cap = cap_bytes > 0 ? cap_bytes : 0;
    tl_failed = 0;
    tl_active = 1;
}

void kvf__mp_end(void) {
    tl_cap = 0;
    tl_failed = 0;
    tl_active = 0;
}

int kvf__mp_failed(void) {
    return tl_active && tl_failed;
}

int64_t kvf__mp_cap(void) {
    return tl_cap;
}
