/* The steps the rules' element checks share (rule.h): whether an oracle result fits its case,
 * an error's ratio to what is allowed, and the distance check's tail. */
#include <math.h>
#include <string.h>

#include "rule.h"

int kvf__oracle_shape_ok(const kvf_case *c, const kvf_oracle_result *oracle) {
    return c && oracle && c->batch_size == oracle->batch_size &&
           c->num_qo_heads == oracle->num_qo_heads && c->head_dim == oracle->head_dim;
}

double kvf__ratio(double err, double allowed) {
    if (err == 0) return 0.0;
    return allowed > 0 ? err / allowed : INFINITY;
}

void kvf__check_distance(const kvf__elem_in *in, double ref, kvf_element_error *e) {
    if (!isfinite(in->a)) {
        e->fails = 1;
        e->margin = INFINITY;
        return;
    }
    double err = fabs(in->a - ref);
    e->fails = err > e->allowed;
    e->margin = kvf__ratio(err, e->allowed);
}
