/* A recursive-descent JSON reader (RFC 8259) and writing helpers. Stats files are read back by
 * `kvfuzz report`, so the reader must refuse malformed input with a position, never crash:
 * depth is bounded and every read is checked against the end of the buffer. */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct parser {
    const char *p, *start, *end;
    char *msg;
    size_t msg_size;
    int failed;
} parser;

static int fail(parser *ps, const char *fmt, ...) {
    if (!ps->failed) {
        char what[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(ps->msg, ps->msg_size, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
        ps->failed = 1;
    }
    return -1;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int parse_value(parser *ps, kvf_json *v, int depth);

static int hex4(parser *ps, unsigned *out) {
    if (ps->end - ps->p < 4) return fail(ps, "truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; i++) {
        char c = *ps->p++;
        u <<= 4;
        if (c >= '0' && c <= '9')
            u |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            u |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            u |= (unsigned)(c - 'A' + 10);
        else
            return fail(ps, "bad hex digit in \\u escape");
    }
    *out = u;
    return 0;
}

static size_t put_utf8(char *dst, unsigned cp) {
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* On entry ps->p is just past the opening quote. The decoded string is never longer than its
 * escaped form, so one allocation of the raw length suffices. */
static int parse_string(parser *ps, char **out) {
    const char *q = ps->p;
    while (q < ps->end && *q != '"')
        q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) return fail(ps, "unterminated string");
    char *s = malloc((size_t)(q - ps->p) + 1);
    if (!s) return fail(ps, "out of memory");
    size_t n = 0;
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p++;
        if (c < 0x20) {
            free(s);
            return fail(ps, "control character in string");
        }
        if (c != '\\') {
            s[n++] = (char)c;
            continue;
        }
        char e = *ps->p++;
        switch (e) {
        case '"':
            s[n++] = '"';
            break;
        case '\\':
            s[n++] = '\\';
            break;
        case '/':
            s[n++] = '/';
            break;
        case 'b':
            s[n++] = '\b';
            break;
        case 'f':
            s[n++] = '\f';
            break;
        case 'n':
            s[n++] = '\n';
            break;
        case 'r':
            s[n++] = '\r';
            break;
        case 't':
            s[n++] = '\t';
            break;
        case 'u': {
            unsigned cp;
            if (hex4(ps, &cp)) {
                free(s);
                return -1;
            }
            /* A surrogate pair takes 12 escaped bytes and yields 4 UTF-8 bytes; a lone
             * surrogate becomes U+FFFD (3 bytes for 6): the buffer bound still holds. */
            if (cp >= 0xD800 && cp < 0xDC00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
                ps->p[1] == 'u') {
                const char *save = ps->p;
                unsigned lo;
                ps->p += 2;
                if (hex4(ps, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else {
                    if (ps->failed) {
                        free(s);
                        return -1;
                    }
                    ps->p = save;
                    cp = 0xFFFD;
                }
            } else if (cp >= 0xD800 && cp < 0xE000) {
                cp = 0xFFFD;
            }
            n += put_utf8(s + n, cp);
            break;
        }
        default:
            free(s);
            ps->p--;
            return fail(ps, "bad escape \\%c", e);
        }
    }
    ps->p++; /* closing quote */
    s[n] = 0;
    *out = s;
    return 0;
}

static int parse_number(parser *ps, kvf_json *v) {
    const char *q = ps->p;
    int integral = 1;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end || !(*q >= '0' && *q <= '9')) return fail(ps, "bad number");
    if (*q == '0')
        q++;
    else
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    if (q < ps->end && *q == '.') {
        integral = 0;
        q++;
        if (q >= ps->end || !(*q >= '0' && *q <= '9')) return fail(ps, "bad number");
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        integral = 0;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || !(*q >= '0' && *q <= '9')) return fail(ps, "bad number");
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    /* strtod/strtoll need a terminator; numbers are short, so copy. */
    char buf[64];
    size_t len = (size_t)(q - ps->p);
    if (len >= sizeof buf) return fail(ps, "number too long");
    memcpy(buf, ps->p, len);
    buf[len] = 0;
    v->type = KVF_JSON_NUMBER;
    v->number = strtod(buf, NULL);
    if (integral) {
        errno = 0;
        long long i = strtoll(buf, NULL, 10);
        if (errno == 0) {
            v->integer = i;
            v->is_integer = 1;
        }
    }
    ps->p = q;
    return 0;
}

static int literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail(ps, "unexpected character '%c'", *ps->p);
    ps->p += n;
    return 0;
}

static int grow(kvf_json *v, size_t *cap, int with_keys) {
    if (v->count < *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 4;
    kvf_json *items = realloc(v->items, ncap * sizeof *items);
    if (!items) return -1;
    v->items = items;
    if (with_keys) {
        char **keys = realloc(v->keys, ncap * sizeof *keys);
        if (!keys) return -1;
        v->keys = keys;
    }
    *cap = ncap;
    return 0;
}

static int parse_array(parser *ps, kvf_json *v, int depth) {
    size_t cap = 0;
    v->type = KVF_JSON_ARRAY;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return 0;
    }
    for (;;) {
        if (grow(v, &cap, 0)) return fail(ps, "out of memory");
        kvf_json *item = &v->items[v->count];
        memset(item, 0, sizeof *item);
        v->count++;
        if (parse_value(ps, item, depth + 1)) return -1;
        skip_ws(ps);
        if (ps->p >= ps->end) return fail(ps, "unterminated array");
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == ']') {
            ps->p++;
            return 0;
        }
        return fail(ps, "expected ',' or ']'");
    }
}

static int parse_object(parser *ps, kvf_json *v, int depth) {
    size_t cap = 0;
    v->type = KVF_JSON_OBJECT;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return 0;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a member name");
        ps->p++;
        if (grow(v, &cap, 1)) return fail(ps, "out of memory");
        char *key;
        if (parse_string(ps, &key)) return -1;
        kvf_json *item = &v->items[v->count];
        memset(item, 0, sizeof *item);
        v->keys[v->count] = key;
        v->count++;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected ':'");
        ps->p++;
        if (parse_value(ps, item, depth + 1)) return -1;
        skip_ws(ps);
        if (ps->p >= ps->end) return fail(ps, "unterminated object");
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == '}') {
            ps->p++;
            return 0;
        }
        return fail(ps, "expected ',' or '}'");
    }
}

static int parse_value(parser *ps, kvf_json *v, int depth) {
    if (depth > JSON_MAX_DEPTH) return fail(ps, "nesting deeper than %d levels", JSON_MAX_DEPTH);
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end of input");
    switch (*ps->p) {
    case '{':
        ps->p++;
        return parse_object(ps, v, depth);
    case '[':
        ps->p++;
        return parse_array(ps, v, depth);
    case '"':
        ps->p++;
        v->type = KVF_JSON_STRING;
        return parse_string(ps, &v->string);
    case 't':
        v->type = KVF_JSON_BOOL;
        v->boolean = 1;
        return literal(ps, "true");
    case 'f':
        v->type = KVF_JSON_BOOL;
        return literal(ps, "false");
    case 'n':
        v->type = KVF_JSON_NULL;
        return literal(ps, "null");
    default:
        return parse_number(ps, v);
    }
}

int kvf_json_parse(kvf_json *out, const char *text, size_t size, char *msg, size_t msg_size) {
    parser ps = {text, text, text + size, msg, msg_size, 0};
    memset(out, 0, sizeof *out);
    if (parse_value(&ps, out, 0) == 0) {
        skip_ws(&ps);
        if (ps.p == ps.end) return 0;
        fail(&ps, "trailing data after the JSON value");
    }
    kvf_json_free(out);
    return -1;
}

void kvf_json_free(kvf_json *v) {
    if (!v) return;
    /* Items past a parse failure are zeroed, so freeing a partial tree is safe. */
    for (size_t i = 0; i < v->count; i++) {
        kvf_json_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof *v);
}

const kvf_json *kvf_json_get(const kvf_json *v, const char *key) {
    if (!v || v->type != KVF_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], key) == 0) return &v->items[i];
    return NULL;
}

int kvf_json_num(const kvf_json *v, double *out) {
    if (!v) return -1;
    if (v->type == KVF_JSON_NUMBER) {
        *out = v->number;
        return 0;
    }
    if (v->type == KVF_JSON_STRING) {
        if (strcmp(v->string, "Infinity") == 0)
            *out = INFINITY;
        else if (strcmp(v->string, "-Infinity") == 0)
            *out = -INFINITY;
        else if (strcmp(v->string, "NaN") == 0)
            *out = NAN;
        else
            return -1;
        return 0;
    }
    return -1;
}

int kvf_json_i64(const kvf_json *v, int64_t *out) {
    if (!v || v->type != KVF_JSON_NUMBER || !v->is_integer) return -1;
    *out = v->integer;
    return 0;
}

void kvf_json_write_string(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20 || c == 0x7F)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void kvf_json_write_double(FILE *f, double x) {
    if (isnan(x))
        fputs("\"NaN\"", f);
    else if (isinf(x))
        fputs(x > 0 ? "\"Infinity\"" : "\"-Infinity\"", f);
    else
        fprintf(f, "%.17g", x); /* 17 significant digits: strtod gives back the same double */
}
