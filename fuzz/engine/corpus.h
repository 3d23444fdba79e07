/* The campaign's corpus: the cases mutations start from. It holds the .kvfz files of the
 * corpus folder (read at start, in name order so a seed gives the same run), grows with the
 * cases that reach new error buckets (written back to the folder), and re-reads the folder on
 * request to take in files other campaigns wrote there (docs/fuzzing.md, "Several campaigns").
 *
 * Threads: every function takes the corpus lock; any thread may call. Ownership: the corpus
 * copies what it is given; kvf__corpus_pick hands out malloc'd copies the caller frees.
 * Errors: load returns KVF_EIO (the folder cannot be made or read) or KVF_ENOMEM with one
 * sentence; add reports a failed write through err and keeps the entry in memory. */
#ifndef KVF_FUZZ_CORPUS_H
#define KVF_FUZZ_CORPUS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvfuzz/case.h"
#include "kvfuzz/error.h"
#include "kvfuzz/prng.h"

#define KVF__CORPUS_CAP 10000

typedef struct kvf__corpus_entry {
    uint8_t *bytes;
    size_t size;
} kvf__corpus_entry;

typedef struct kvf__corpus {
    pthread_mutex_t mu;
    const char *dir; /* NULL: memory only */
    kvf_limits limits;
    kvf__corpus_entry *e;
    size_t n;
    size_t initial; /* entries [0, initial) are the folder's at start, run as they are first */
    /* Names of the folder's files already taken in (or written by this campaign), as a hash
     * set of kvf_hash64(name) | 1 (0 marks an empty slot), so a re-read reads only new ones. */
    uint64_t *names;
    size_t names_cap, names_n;
    int64_t reloaded; /* entries taken in by re-reads */
} kvf__corpus;

int kvf__corpus_init(kvf__corpus *c, const char *dir, const kvf_limits *limits);
void kvf__corpus_free(kvf__corpus *c);

/* Reads every .kvfz in the folder that decodes; says on log how many did not. */
int kvf__corpus_load(kvf__corpus *c, FILE *log, kvf_error *err);

/* Reads the folder's files not seen before and adds those that decode. Returns how many. */
size_t kvf__corpus_reload(kvf__corpus *c);

size_t kvf__corpus_size(kvf__corpus *c);
size_t kvf__corpus_initial(const kvf__corpus *c); /* fixed after load */

/* Chooses what case number `index` starts from, drawing from rng: the initial entry `index`
 * as it is (first attempt of the first cases), else three times in four a random entry,
 * one time in eight of those with a second entry to cross over with. *as_is tells which;
 * base->bytes is NULL when the case should be a fresh random recipe. */
void kvf__corpus_pick(kvf__corpus *c, kvf_prng *rng, uint64_t index, int attempt,
                      kvf__corpus_entry *base, kvf__corpus_entry *other, int *as_is);

/* Adds a case (when full, it replaces an entry other than the initial ones) and, with a
 * folder, writes it there as <hash>.kvfz unless that file exists. Returns 0, or -1 when the
 * write failed (err says why; the entry stays in memory). */
int kvf__corpus_add(kvf__corpus *c, const uint8_t *bytes, size_t size, kvf_error *err);

#endif
