/* How much of a row the oracle keeps in memory (docs/oracle.md, "Memory"). Internal to the
 * oracle library.
 *
 * A row whose per-token working values fit in kvf__row_store_bytes is computed from values
 * stored once per token; a longer row is streamed: each pass over its tokens recomputes them
 * (the same operations in the same order, so the same bits), and the oracle's memory no longer
 * grows with the row's length. The limit is per row and per thread. Tests lower it to run the
 * streamed code on small cases; nothing else writes it, and it is read, never written, while
 * the oracle runs. */
#ifndef KVFUZZ_ORACLE_ROW_STORE_H
#define KVFUZZ_ORACLE_ROW_STORE_H

#include <stdint.h>

#include "kvfuzz/spec.h" /* KVF_ORACLE_ROW_STORE_BYTES, the default */

extern int64_t kvf__row_store_bytes;

#endif
