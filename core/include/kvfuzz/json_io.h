/* JSON, read and written with jansson, for every module (the case model, findings, statistics,
 * reports): one escaper (jansson's), one number writer (kvf_json_number, dumped at 17
 * significant digits), and the one spelling every kvfuzz JSON file uses for the
 * numbers JSON cannot express: the strings "NaN", "Infinity" and "-Infinity" (FlashInfer-Bench's
 * spelling; docs/design.md §8, docs/reports.md).
 *
 * Ownership: the json_t values returned are new references the caller owns (json_decref), or
 * NULL when memory ran out. Readers borrow the values they are given. */
#ifndef KVFUZZ_JSON_IO_H
#define KVFUZZ_JSON_IO_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "kvfuzz/error.h"

/* A number: a real, or one of the three strings for NaN and the infinities. */
json_t *kvf_json_number(double x);

/* A string, or JSON null for NULL. */
json_t *kvf_json_string_or_null(const char *s);

/* Reads a number written by kvf_json_number (or any JSON integer or real). 0, or -1 when v is
 * missing or something else. */
int kvf_json_to_double(const json_t *v, double *out);

/* Reads an exact 64-bit integer. 0, or -1 when v is missing or not an integer. */
int kvf_json_to_i64(const json_t *v, int64_t *out);

/* Adds key = value to obj, taking the reference to value. -1 when value is NULL (out of
 * memory upstream) or the insertion fails; the reference is released either way. */
int kvf_json_set(json_t *obj, const char *key, json_t *value);

/* Appends value to arr, taking the reference; -1 as kvf_json_set. */
int kvf_json_push(json_t *arr, json_t *value);

/* Writes root to f, members in insertion order: one line, or indented with indent > 0. 0, or
 * -1 with errno set. */
int kvf_json_dump(const json_t *root, FILE *f, int indent);

/* Parses a whole buffer, refusing duplicate keys. NULL on failure, with "<what> at line L,
 * column C" in msg, on one line (control bytes quoted from the input become '?'). */
json_t *kvf_json_parse_text(const char *text, size_t size, char *msg, size_t msg_size);

/* The keys of an object, in order, as "a, b, c" (each cut at 40 characters), into buf (always
 * NUL-terminated; a list too long for it stops at the last key that fits), for messages that
 * say what an object holds. */
void kvf_json_key_list(const json_t *obj, char *buf, size_t n);

#endif
