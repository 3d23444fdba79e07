/* Per-kernel rule sets and attributions as JSON for the judging commands (cli.h, "per-kernel
 * rules and attribution"; docs/precision.md). */
#include <string.h>

#include "cli.h"
#include "kvfuzz/json_io.h"

int cli_rules_for_kernel(const char *cmd, const kvf_kernel *k, const char *override,
                         const kvf_rule *base, int n, kvf_rule *out, kvf_precision *model,
                         cli_precision_source *source) {
    kvf_precision p;
    cli_precision_source src;
    if (cli_kernel_precision(cmd, k, override, &p, &src)) return KVF_EXIT_USAGE;
    /* A copy per kernel: applying the model in place would leave it on the caller's set for
     * the next kernel, which may declare another (or none). */
    if (n > 0) memcpy(out, base, (size_t)n * sizeof *out);
    cli_rules_apply_precision(out, n, &p);
    if (model) *model = p;
    if (source) *source = src;
    return 0;
}

json_t *cli_attribution_json(const kvf_attribution *a) {
    if (a->kind == KVF_ATTRIB_NONE) return json_null();
    char declared[KVF_PRECISION_NAME_MAX], model[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(&a->declared, declared, sizeof declared);
    kvf_precision_name(&a->model, model, sizeof model);
    const int within = a->kind == KVF_ATTRIB_PRECISION;
    /* The same members as a finding's report (fuzz/src/finding_json.c), so one reader serves
     * both. */
    return json_pack("{s:s, s:s, s:o, s:o, s:s}", "kind", kvf_attribution_kind_name(a->kind),
                     "declared", declared, "within", within ? json_string(model) : json_null(),
                     "margin", within ? kvf_json_number(a->margin) : json_null(), "text", a->text);
}
