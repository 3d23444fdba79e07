/* The oracle's answer as JSON (kvfuzz/oracle_json.h). */
#include "kvfuzz/oracle_json.h"

#include <stdio.h>

#include "kvfuzz/json_io.h"

/* One row: its facts and lse, then its o elements. 0, or -1 when memory ran out. */
static int add_row(json_t *rows, const kvf_case *c, const kvf_oracle_result *r, int32_t b,
                   int32_t h) {
    const int32_t hq = c->num_qo_heads, d = c->head_dim;
    int64_t row = (int64_t)b * hq + h;
    float l = r->lse_rounded[row];
    char bits[16];
    snprintf(bits, sizeof bits, "%08x", kvf_f32_bits(l));
    json_t *o = json_object(), *arr = json_array();
    int bad = kvf_json_push(rows, o) || !arr || kvf_json_set(o, "b", json_integer(b)) ||
              kvf_json_set(o, "h", json_integer(h)) ||
              kvf_json_set(o, "length", json_integer(r->rows[row].length)) ||
              kvf_json_set(o, "overflow", json_boolean(r->rows[row].overflow)) ||
              kvf_json_set(o, "lse_bits", json_string(bits)) ||
              kvf_json_set(o, "lse", kvf_json_number((double)l)) ||
              kvf_json_set(o, "lse_exact", kvf_json_number(r->lse_exact[row])) ||
              json_object_set(o, "o", arr);
    for (int32_t i = 0; !bad && i < d; i++) {
        kvf_bf16 ob = r->o_rounded[row * d + i];
        char obits[8];
        snprintf(obits, sizeof obits, "%04x", ob);
        json_t *e = json_array();
        bad = kvf_json_push(arr, e) || kvf_json_push(e, json_string(obits)) ||
              kvf_json_push(e, kvf_json_number((double)kvf_bf16_to_f32(ob))) ||
              kvf_json_push(e, kvf_json_number(r->o_exact[row * d + i]));
    }
    json_decref(arr);
    return bad ? -1 : 0;
}

json_t *kvf_oracle_json(const kvf_case *c, const kvf_oracle_result *r) {
    json_t *root = json_object(), *rows = json_array();
    int bad = !root || !rows;
    bad = bad || kvf_json_set(root, "batch_size", json_integer(c->batch_size)) ||
          kvf_json_set(root, "num_qo_heads", json_integer(c->num_qo_heads)) ||
          kvf_json_set(root, "head_dim", json_integer(c->head_dim)) ||
          json_object_set(root, "rows", rows);
    for (int32_t b = 0; !bad && b < c->batch_size; b++)
        for (int32_t h = 0; !bad && h < c->num_qo_heads; h++)
            bad = add_row(rows, c, r, b, h) != 0;
    json_decref(rows);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}
