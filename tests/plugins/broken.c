/* Test plugin: a descriptor broken one way per build (KVF_BROKEN names it), for the load
 * errors of plugin_load.c. */
#include <kvfuzz/plugin.h>
#include <stddef.h>

#define BROKEN_NO_ENTRY 1
#define BROKEN_ABI 2
#define BROKEN_SMALL 3
#define BROKEN_NO_KERNELS 4
#define BROKEN_DUPLICATE 5
#define BROKEN_NULL 6
#define BROKEN_STATES 7 /* concurrent_states out of range */
#define BROKEN_V1                                                                                  \
    8                     /* not broken: an entry of the first version-1 size, without the later   \
                             concurrent_states field, which must still load */
#define BROKEN_PROMISES 9 /* promises a relation kvfuzz does not know */
#define BROKEN_STRIDE 10  /* a kernel array stride of 2^30 bytes */
#define BROKEN_ODD 11     /* a stride that is not a multiple of the entry's alignment */
#define BROKEN_WORKSPACE                                                                           \
    12 /* loads: its kernel asks for 2^64 - 100 bytes of workspace, past any memory (a size that   \
          would wrap an allocation's arithmetic) */
#define BROKEN_MULTILINE                                                                           \
    13 /* loads: its refusals and its run() error are several lines, with a tab and a terminal     \
          escape, which kvfuzz shows on one line */

#if KVF_BROKEN != BROKEN_NO_ENTRY
static int yes(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why, size_t n) {
    (void)self, (void)s, (void)why, (void)n;
    return 1;
}
static int run(void *state, const kvf_plugin_args *a, char *msg, size_t n) {
    (void)state, (void)a, (void)msg, (void)n;
    return KVF_PLUGIN_ERROR;
}

#define KERNEL(n_)                                                                                 \
    {                                                                                              \
        .struct_size = sizeof(kvf_plugin_kernel), .name = n_, .description = "broken",             \
        .supports = yes, .run = run                                                                \
    }
static const kvf_plugin_kernel two_same[] = {KERNEL("same"), KERNEL("same")};
#if KVF_BROKEN == BROKEN_STATES || KVF_BROKEN == BROKEN_V1 || KVF_BROKEN == BROKEN_PROMISES ||     \
    KVF_BROKEN == BROKEN_WORKSPACE || KVF_BROKEN == BROKEN_MULTILINE
static kvf_plugin_kernel single[] = {KERNEL("single")};
#endif
#if KVF_BROKEN == BROKEN_WORKSPACE
static size_t huge(void *state, const kvf_plugin_shape *s) {
    (void)state, (void)s;
    return (size_t)-100;
}
#endif
#if KVF_BROKEN == BROKEN_MULTILINE
#include <stdio.h>
static const char lines[] = "first line\n  second line\tthird\x1b[2J\r\n";
/* Group 5 only (the seed's), so that `kvfuzz kernels` shows a refusal and a replay reaches run().
 */
static int group5(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why, size_t n) {
    (void)self;
    if (s->num_qo_heads == 5 * s->num_kv_heads) return 1;
    snprintf(why, n, "%s", lines);
    return 0;
}
static int run_lines(void *state, const kvf_plugin_args *a, char *msg, size_t n) {
    (void)state, (void)a;
    snprintf(msg, n, "%s", lines);
    return KVF_PLUGIN_ERROR;
}
#endif

const kvf_plugin *kvf_plugin_v1(void) {
    static kvf_plugin p = {KVF_PLUGIN_ABI_VERSION,
                           sizeof(kvf_plugin),
                           "broken",
                           sizeof(kvf_plugin_kernel),
                           2,
                           two_same};
#if KVF_BROKEN == BROKEN_ABI
    p.abi_version = 99;
#elif KVF_BROKEN == BROKEN_SMALL
    p.struct_size = 8;
#elif KVF_BROKEN == BROKEN_NO_KERNELS
    p.num_kernels = 0;
#elif KVF_BROKEN == BROKEN_NULL
    return NULL;
#elif KVF_BROKEN == BROKEN_STATES
    single[0].concurrent_states = 65;
    p.num_kernels = 1;
    p.kernels = single;
#elif KVF_BROKEN == BROKEN_PROMISES
    single[0].promises = "batch-invariance,graph-safety";
    p.num_kernels = 1;
    p.kernels = single;
#elif KVF_BROKEN == BROKEN_STRIDE
    p.kernel_struct_size = 1u << 30;
#elif KVF_BROKEN == BROKEN_ODD
    p.kernel_struct_size = sizeof(kvf_plugin_kernel) + 1;
#elif KVF_BROKEN == BROKEN_WORKSPACE
    single[0].workspace_bytes = huge;
    p.num_kernels = 1;
    p.kernels = single;
#elif KVF_BROKEN == BROKEN_MULTILINE
    single[0].supports = group5;
    single[0].run = run_lines;
    p.num_kernels = 1;
    p.kernels = single;
#elif KVF_BROKEN == BROKEN_V1
    single[0].struct_size = KVF_PLUGIN_KERNEL_V1_SIZE;
    single[0].concurrent_states = 12345; /* past its struct_size: never read */
    p.num_kernels = 1;
    p.kernels = single;
#endif
    return &p;
}
#else
int kvf_not_a_plugin(void) {
    return 0;
}
#endif
