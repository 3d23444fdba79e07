/* kvfuzz kernels: the built-in kernels, or what a plugin (or any --kernel value) provides and
 * which shapes it supports. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvfuzz/precision.h"
#include "kvfuzz/runner.h"

enum { KERNELS_KERNEL = 256 };

static const cli_option kernels_options[] = {
    {"kernel", KERNELS_KERNEL, "K",
     "a plugin PATH.so, PATH.so:NAME, python:MODULE:FUNCTION, a\nsolution .json or a built-in name "
     "(repeatable)"},
    {0},
};

static void kernels_help(void) {
    printf("usage: kvfuzz kernels [--kernel K]...\n\n"
           "Without --kernel, lists the built-in kernels, one per line: name, device, the\n"
           "precision model it declares (f32 when none; docs/precision.md), description (and\n"
           "the bug class a mutant models).\n"
           "With --kernel K, lists each kernel K provides with its device, role and declared\n"
           "precision model, the KV caches it reads (bf16, or FP8 too), and which group\n"
           "sizes, head dims and page sizes its supports()\n"
           "accepts around the seed shape (20 q heads, 4 kv heads, head dim 128, page size 64,\n"
           "3,202 tokens). strict and fa judge a kernel within its model unless --precision\n"
           "overrides it.\n"
           "A plugin is loaded in a separate process; PATH.so lists every kernel it holds (at\n"
           "most %u: a plugin listing more fails to load). Exit status 2 when K cannot be\n"
           "loaded.\n\n",
           (unsigned)KVF_PLUGIN_MAX_KERNELS);
    cli_print_options(stdout, kernels_options);
}

/* The seed shape with one dimension changed. */
static kvf_plugin_shape seed_shape(int group, int head_dim, int page_size) {
    kvf_plugin_shape s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.num_kv_heads = 4;
    s.num_qo_heads = 4 * group;
    s.head_dim = head_dim;
    s.page_size = page_size;
    s.batch_size = 1;
    s.total_tokens = s.max_seq_len = 3202;
    s.num_entries = (3202 + page_size - 1) / page_size;
    s.num_pages = s.num_entries + 1;
    s.sm_scale = 1.0f / 11.3137085f;
    kvf_kernel_shape_dense_strides(&s);
    return s;
}

/* Prints "label v1,v2,...", the values of `values` the kernel accepts; the first refusal's
 * reason goes to why. Returns -1 when the kernel cannot be asked. */
static int print_axis(const kvf_kernel *k, const char *label, const int *values, int n, int axis,
                      char *why, size_t why_size) {
    printf("    %-11s", label);
    int any = 0;
    for (int i = 0; i < n; i++) {
        kvf_plugin_shape s = seed_shape(axis == 0 ? values[i] : 5, axis == 1 ? values[i] : 128,
                                        axis == 2 ? values[i] : 64);
        char w[256] = "";
        int yes = kvf_kernel_supports(k, &s, w, sizeof w);
        if (yes < 0) {
            printf(" (cannot ask: its probe process died)\n");
            return -1;
        }
        if (yes)
            printf("%s%d", any++ ? "," : " ", values[i]);
        else if (!why[0] && w[0])
            snprintf(why, why_size, "%s", w);
    }
    printf("%s\n", any ? "" : " none");
    return 0;
}

/* The model a kernel declares, canonically named ("f32" when it declares none); a declaration
 * kvfuzz cannot read is shown as given, with why (the judging commands refuse it). */
static void declared_model(const kvf_kernel *k, char *buf, size_t size) {
    kvf_precision p;
    kvf_error err = {0};
    if (kvf_precision_parse(&p, k->precision ? k->precision : "", &err) == 0)
        kvf_precision_name(&p, buf, size);
    else
        snprintf(buf, size, "%s (unreadable: %s)", k->precision, err.msg);
}

static void describe(const kvf_kernel *k) {
    const char *role = k->role == KVF_PLUGIN_ROLE_REFERENCE ? "reference"
                       : k->role == KVF_PLUGIN_ROLE_MUTANT  ? "mutant"
                                                            : "under-test";
    printf("%-40s %-4s %-10s %s\n", k->name, k->device == KVF_DEVICE_CUDA ? "cuda" : "cpu", role,
           k->description);
    if (k->role == KVF_PLUGIN_ROLE_MUTANT && k->models) printf("%-40s models %s\n", "", k->models);
    char model[KVF_ERROR_MSG_MAX + 64];
    declared_model(k, model, sizeof model);
    printf("    %-11s %s\n", "precision", model);
    char promised[256];
    kvf_relation_mask_text(kvf_kernel_promises(k), promised, sizeof promised);
    printf("    %-11s %s (docs/invariance.md)\n", "promises", promised);
    printf("    %-11s %s\n", "kv caches",
           kvf_kernel_takes_quant(k) ? "bf16 and FP8 with scales (docs/plugins.md, \"FP8 caches\")"
                                     : "bf16");
    static const int groups[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const int dims[] = {32, 64, 80, 96, 128, 192, 256, 512};
    static const int pages[] = {1, 2, 8, 16, 32, 64, 128, 256};
    char why[256] = "";
    if (print_axis(k, "groups", groups, 16, 0, why, sizeof why) ||
        print_axis(k, "head dims", dims, 8, 1, why, sizeof why) ||
        print_axis(k, "page sizes", pages, 8, 2, why, sizeof why))
        return;
    if (why[0]) printf("    first refusal: %s\n", why);
}

int kvf_cmd_kernels(int argc, char **argv) {
    const char *cmd = "kernels";
    kvf_kernel_list ks = {0};
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, kernels_options);
    cli_parser_repeatable(&p, KERNELS_KERNEL);
    const char *v;
    for (int key; (key = cli_next(&p, &v)) != CLI_END;) {
        if (key == CLI_HELP || key == CLI_ERROR) {
            if (key == CLI_HELP) kernels_help();
            kvf_kernel_list_free(&ks);
            return key == CLI_HELP ? KVF_EXIT_OK : KVF_EXIT_USAGE;
        }
        if (cli_add_kernel(cmd, v, &ks)) {
            kvf_kernel_list_free(&ks);
            return KVF_EXIT_USAGE;
        }
    }
    char **rest;
    if (cli_operands(&p, &rest)) {
        kvf_kernel_list_free(&ks);
        return cli_usage_error(cmd, "unknown argument \"%s\" (see kvfuzz kernels --help)", rest[0]);
    }
    if (ks.count) {
        for (size_t i = 0; i < ks.count; i++)
            describe(ks.items[i]);
        kvf_kernel_list_free(&ks);
        return KVF_EXIT_OK;
    }
    char why[256] = "";
    /* Asked in a child, like every command that may fork kernel workers. */
    int cuda = kvf_runner_probe_cuda(why, sizeof why);
    printf("%-40s %-4s %-11s %s\n", "kernel", "dev", "precision", "description");
    for (size_t i = 0; i < kvf_kernel_count(); i++) {
        const kvf_kernel *k = kvf_kernel_at(i);
        char model[KVF_ERROR_MSG_MAX + 64];
        declared_model(k, model, sizeof model);
        printf("%-40s %-4s %-11s %s", k->name, k->device == KVF_DEVICE_CUDA ? "cuda" : "cpu", model,
               k->description);
        if (k->models) printf(" [models %s]", k->models);
        printf("\n");
    }
    if (!cuda) printf("(CUDA kernels unavailable: %s)\n", why);
    printf("(plugins: kvfuzz kernels --kernel PATH.so lists what a plugin provides)\n");
    return KVF_EXIT_OK;
}
