/* The per-row memory limit both oracle paths read (row_store.h), in a file of its own so that
 * neither path owns what the other reads. */
#include "row_store.h"

int64_t kvf__row_store_bytes = KVF_ORACLE_ROW_STORE_BYTES;
