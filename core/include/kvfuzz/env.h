/* Strict number parsing and kvfuzz's environment variables, in one place.
 *
 * Every number kvfuzz reads from a command line or the environment goes through
 * kvf_parse_i64/kvf_parse_u64: decimal only (a leading 0 is not octal, 0x is not hex), the
 * whole string, no sign where the value is unsigned, no blanks, no overflow. Every environment
 * variable kvfuzz defines is in one table (env.c) with the values it accepts; kvf_env_check
 * validates all of them at a command's start, so a bad value is one sentence, not a silently
 * ignored setting. The readers (kvf_env_int, kvf_env_flag) use the same table.
 *
 * Errors: 0, or KVF_EINVAL with one sentence naming the variable, what it accepts and the value
 * given. Nothing here allocates. */
#ifndef KVFUZZ_ENV_H
#define KVFUZZ_ENV_H

#include <stdint.h>

#include "kvfuzz/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decimal integers in [lo, hi]: 0, or -1 (empty, junk, out of range, overflow). */
int kvf_parse_i64(const char *text, int64_t lo, int64_t hi, int64_t *out);
/* Decimal integers in [0, 2^64 - 1], no sign: 0 or -1. */
int kvf_parse_u64(const char *text, uint64_t *out);
/* A finite or infinite decimal number (strtod's syntax without leading blanks, hex or NaN):
 * 0 or -1. */
int kvf_parse_double(const char *text, double *out);

/* An integer variable of the table: *out = dflt when it is unset or empty, else its value.
 * KVF_EINVAL for a variable the table does not list as an integer, or a value it refuses. */
int kvf_env_int(const char *name, int64_t dflt, int64_t *out, kvf_error *err);
/* A flag of the table: unset, empty or "0" is 0, "1" is 1; anything else KVF_EINVAL. */
int kvf_env_flag(const char *name, int *out, kvf_error *err);
/* Checks every variable of the table that is set: the first bad one, in err. */
int kvf_env_check(kvf_error *err);

#ifdef __cplusplus
}
#endif

#endif
