/* Test plugin: KVF_MANY_KERNELS copies of the example's correct kernel (40 by default), for
 * `PATH.so` with more kernels than any fixed array held (issue 38: replay stopped at 16), and
 * built with 4097 for the load-time limit (KVF_PLUGIN_MAX_KERNELS). It also does what plugin.h
 * allows and the examples do not: the descriptor is built inside the entry point, once
 * (pthread_once), and each kernel's `user` points to const data. Built with
 * -fvisibility=hidden, so the entry point is exported by KVF_PLUGIN_EXPORT alone. */
#define kvf_plugin_v1 kvf__example_plugin_v1
#include "../../examples/plugin-cpu/decode.c"
#undef kvf_plugin_v1

#include <pthread.h>
#include <stdio.h>

#ifndef KVF_MANY_KERNELS
#define KVF_MANY_KERNELS 40
#endif

typedef struct many_info {
    unsigned index;
} many_info;

/* const: `user` carries it with const cast away, and nothing writes through it. */
static const many_info infos[KVF_MANY_KERNELS] = {{0}};

/* supports() reads its kernel's const datum back through `user`: a kernel whose entry does
 * not point at its own datum refuses every shape, and the test sees unsupported cases. */
static int many_supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why,
                         size_t why_size) {
    const many_info *info = (const many_info *)self->user;
    const unsigned index = (unsigned)(info - infos);
    char expect[16];
    snprintf(expect, sizeof expect, "k%02u", index);
    if (index >= KVF_MANY_KERNELS || strcmp(self->name, expect) != 0) {
        snprintf(why, why_size, "kernel %s has the user datum of %s", self->name, expect);
        return 0;
    }
    return supports(self, s, why, why_size);
}

static kvf_plugin_kernel many_kernels[KVF_MANY_KERNELS];
static char many_names[KVF_MANY_KERNELS][16];
static kvf_plugin many_plugin;
static pthread_once_t many_once = PTHREAD_ONCE_INIT;

static void many_build(void) {
    for (unsigned i = 0; i < KVF_MANY_KERNELS; i++) {
        snprintf(many_names[i], sizeof many_names[i], "k%02u", i);
        kvf_plugin_kernel *k = &many_kernels[i];
        k->struct_size = sizeof *k;
        k->name = many_names[i];
        k->description = "a copy of the example's correct CPU kernel";
        k->device = KVF_PLUGIN_DEVICE_CPU;
        k->role = i == 0 ? KVF_PLUGIN_ROLE_REFERENCE : KVF_PLUGIN_ROLE_UNDER_TEST;
        k->user = (void *)&infos[i];
        k->supports = many_supports;
        k->run = run;
    }
    many_plugin.abi_version = KVF_PLUGIN_ABI_VERSION;
    many_plugin.struct_size = sizeof many_plugin;
    many_plugin.name = "kvfuzz test plugin with many kernels";
    many_plugin.kernel_struct_size = sizeof(kvf_plugin_kernel);
    many_plugin.num_kernels = KVF_MANY_KERNELS;
    many_plugin.kernels = many_kernels;
}

KVF_PLUGIN_EXPORT const kvf_plugin *kvf_plugin_v1(void) {
    pthread_once(&many_once, many_build);
    return &many_plugin;
}
