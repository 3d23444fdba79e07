/* GMP's and MPFR's memory, counted and capped per thread, and the oracle's stop request.
 * Internal to the oracle library (oracle.c, oracle_fast.c).
 *
 * GMP's allocation functions may not return NULL: GMP has no error path and would abort the
 * process. kvf__mp_install() replaces them (mp_set_memory_functions) with functions that never
 * fail and never jump: a request past the calling thread's cap, or one the system refuses, is
 * served from a fixed emergency arena and marks the thread failed; the oracle polls
 * kvf__oracle_halted() in every loop over tokens and returns KVF_ENOMEM (or KVF_EINTR after a
 * stop request), clearing its MPFR variables on the way out. mp_memory.c explains the bound
 * on the arena. */
#ifndef KVFUZZ_ORACLE_MP_MEMORY_H
#define KVFUZZ_ORACLE_MP_MEMORY_H

#include <stdint.h>

/* Installs the allocation functions once per process (idempotent, thread-safe). */
void kvf__mp_install(void);

/* Starts counting this thread's GMP memory against `cap_bytes` (0: no cap) and clears its
 * failure mark. */
void kvf__mp_begin(int64_t cap_bytes);

/* Stops counting (the thread leaves the oracle). */
void kvf__mp_end(void);

/* Nonzero once a GMP allocation of this thread since kvf__mp_begin passed the cap or was
 * refused by the system. */
int kvf__mp_failed(void);

/* The cap in force on this thread (bytes; 0 none), for messages. */
int64_t kvf__mp_cap(void);

/* Set by kvf_oracle_request_stop(); read by the loops. */
extern volatile int kvf__oracle_stop;

/* Nonzero when the oracle must stop now: a stop request, or a failed GMP allocation. */
static inline int kvf__oracle_halted(void) {
    return kvf__oracle_stop || kvf__mp_failed();
}

#endif
