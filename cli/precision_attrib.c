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
    kvf_rules_apply_precision(out, n, &p);
    if (model) *model = p;
    if (source) *source = src;
    return 0;
}
