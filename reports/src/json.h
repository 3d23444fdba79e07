/* A small JSON reader and the writing helpers the reports module needs (private to reports/).
 *
 * The reader builds a tree (kvf_json) from a whole buffer. Integers keep their exact int64
 * value next to the double, because stats counters pass 2^53 long before they pass 2^63.
 * Non-finite doubles, which JSON cannot spell, are written as the strings "Infinity",
 * "-Infinity" and "NaN" (FlashInfer-Bench's spelling, docs/reports.md); kvf_json_num() reads
 * them back. Ownership: kvf_json_parse() allocates the tree,
 * kvf_json_free() releases it. */
#ifndef KVFUZZ_REPORTS_JSON_H
#define KVFUZZ_REPORTS_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvfuzz/file.h" /* kvf_read_file, for the readers of JSON files */

typedef enum kvf_json_type {
    KVF_JSON_NULL,
    KVF_JSON_BOOL,
    KVF_JSON_NUMBER,
    KVF_JSON_STRING,
    KVF_JSON_ARRAY,
    KVF_JSON_OBJECT
} kvf_json_type;

typedef struct kvf_json {
    kvf_json_type type;
    int boolean;
    double number;
    int64_t integer; /* exact value when is_integer */
    int is_integer;  /* the text was an integer that fits int64 */
    char *string;    /* NUL-terminated, UTF-8 as given (\u escapes decoded) */
    size_t count;    /* array items / object members */
    struct kvf_json *items;
    char **keys; /* object member names, parallel to items */
} kvf_json;

/* Parses exactly one JSON value (surrounding whitespace allowed). On failure returns -1 and
 * writes "<what> at byte N" into msg. Nesting deeper than 64 levels is refused. */
int kvf_json_parse(kvf_json *out, const char *text, size_t size, char *msg, size_t msg_size);
void kvf_json_free(kvf_json *v);

/* Member lookup; NULL if v is not an object or has no such key. */
const kvf_json *kvf_json_get(const kvf_json *v, const char *key);

/* Typed reads: 0 on success, -1 when the value has another type or does not fit. */
int kvf_json_num(const kvf_json *v, double *out);  /* numbers, "Infinity", "-Infinity", "NaN" */
int kvf_json_i64(const kvf_json *v, int64_t *out); /* integers only */

/* Writers. */
void kvf_json_write_string(FILE *f, const char *s); /* quoted and escaped; NULL -> null */
void kvf_json_write_double(FILE *f, double x);      /* %.17g, or "Infinity"/"-Infinity"/"NaN" */

#endif
