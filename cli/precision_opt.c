/* The precision model a command judges a kernel under (cli.h, "precision models"). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvfuzz/precision.h"

/* An empty --precision would read as f32 (the library's reading of a kernel that declares no
 * model) and silently replace what the kernel declares: on the command line it names nothing. */
static int empty_model(const char *cmd) {
    return cli_usage_error(cmd, "--precision is empty; give f32 or a model such as bf16-p "
                                "(docs/precision.md)");
}

int cli_precision_check(const char *cmd, const char *text) {
    kvf_precision p;
    kvf_error err = {0};
    if (!text[0]) return empty_model(cmd);
    if (kvf_precision_parse(&p, text, &err))
        return cli_usage_error(cmd, "--precision: %s", err.msg);
    return 0;
}

int cli_kernel_precision(const char *cmd, const kvf_kernel *k, const char *override,
                         kvf_precision *out, cli_precision_source *source) {
    memset(out, 0, sizeof *out);
    *source = CLI_PRECISION_DEFAULT;
    kvf_error err = {0};
    if (override) {
        if (!override[0]) return empty_model(cmd);
        if (kvf_precision_parse(out, override, &err))
            return cli_usage_error(cmd, "--precision: %s", err.msg);
        *source = CLI_PRECISION_OVERRIDE;
        return 0;
    }
    if (k && k->precision && k->precision[0]) {
        if (kvf_precision_parse(out, k->precision, &err))
            return cli_usage_error(cmd,
                                   "kernel %s declares a precision model kvfuzz cannot read: %s",
                                   k->name, err.msg);
        *source = kvf_precision_is_f32(out) ? CLI_PRECISION_DEFAULT : CLI_PRECISION_DECLARED;
    }
    return 0;
}

void cli_precision_text(const kvf_precision *p, cli_precision_source source, char *buf,
                        size_t size) {
    char name[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(p, name, sizeof name);
    snprintf(buf, size, "%s (%s)", name,
             source == CLI_PRECISION_OVERRIDE   ? "--precision"
             : source == CLI_PRECISION_DECLARED ? "declared by the kernel"
                                                : "default");
}
