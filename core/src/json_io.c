/* JSON helpers over jansson (kvfuzz/json_io.h). */
#include "kvfuzz/json_io.h"

#include <errno.h>
#include <math.h>
#include <string.h>

json_t *kvf_json_number(double x) {
    if (isnan(x)) return json_string("NaN");
    if (isinf(x)) return json_string(x > 0 ? "Infinity" : "-Infinity");
    return json_real(x);
}

json_t *kvf_json_string_or_null(const char *s) {
    return s ? json_string(s) : json_null();
}

int kvf_json_to_double(const json_t *v, double *out) {
    if (json_is_real(v)) {
        *out = json_real_value(v);
    } else if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "NaN") == 0)
            *out = NAN;
        else if (strcmp(s, "Infinity") == 0)
            *out = INFINITY;
        else if (strcmp(s, "-Infinity") == 0)
            *out = -INFINITY;
        else
            return -1;
    } else {
        return -1;
    }
    return 0;
}

int kvf_json_to_i64(const json_t *v, int64_t *out) {
    if (!json_is_integer(v)) return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

int kvf_json_set(json_t *obj, const char *key, json_t *value) {
    if (!value) return -1;
    return json_object_set_new(obj, key, value) ? -1 : 0;
}

int kvf_json_push(json_t *arr, json_t *value) {
    if (!value) return -1;
    return json_array_append_new(arr, value) ? -1 : 0;
}

static int dump_to_file(const char *buffer, size_t size, void *data) {
    return fwrite(buffer, 1, size, data) == size ? 0 : -1;
}

int kvf_json_dump(const json_t *root, FILE *f, int indent) {
    /* Real numbers at 17 significant digits read back as the same double. */
    size_t flags = JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17) |
                   (indent > 0 ? JSON_INDENT(indent > 31 ? 31 : indent) : 0);
    if (json_dump_callback(root, dump_to_file, f, flags) != 0 || fputc('\n', f) == EOF) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}

json_t *kvf_json_parse_text(const char *text, size_t size, char *msg, size_t msg_size) {
    json_error_t e;
    /* Duplicate keys are refused: a stats file that names a count twice is ambiguous. */
    json_t *root = json_loadb(text, size, JSON_REJECT_DUPLICATES, &e);
    if (!root && msg && msg_size) {
        snprintf(msg, msg_size, "%s at line %d, column %d", e.text, e.line, e.column);
        /* jansson quotes the input near the error: a newline or other control byte from the
         * file must not split the one-sentence message. */
        for (char *p = msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    }
    return root;
}

void kvf_json_key_list(const json_t *obj, char *buf, size_t n) {
    const char *key;
    json_t *v;
    size_t at = 0;
    if (n == 0) return;
    buf[0] = 0;
    json_object_foreach((json_t *)obj, key, v) {
        if (at + 1 >= n) break;
        int w = snprintf(buf + at, n - at, "%s%.40s", at ? ", " : "", key);
        if (w < 0 || (size_t)w >= n - at) {
            buf[at] = 0; /* the key did not fit: keep the list whole up to the one before */
            break;
        }
        at += (size_t)w;
    }
}
