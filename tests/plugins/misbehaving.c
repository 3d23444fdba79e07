/* Test plugin: kernels that each break one rule of the plugin contract (plugin.h), built on
 * the example plugin's correct kernel so that, apart from the one defect, each is right. */
#define kvf_plugin_v1 kvf__example_plugin_v1
#include "../../examples/plugin-cpu/decode.c"
#undef kvf_plugin_v1

#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

enum {
    CRASH,
    HANG,
    ABORT,
    EXIT,
    NAN_OUT,
    UNWRITTEN,
    OOB,
    INPUT_MOD,
    ERROR,
    FALSE_SUPPORT,
    GROUPS,
    TWIN
};

static int modes[] = {CRASH, HANG,      ABORT, EXIT,          NAN_OUT, UNWRITTEN,
                      OOB,   INPUT_MOD, ERROR, FALSE_SUPPORT, GROUPS,  TWIN};

static int t_create(const kvf_plugin_kernel *self, void **state, char *msg, size_t n) {
    (void)msg, (void)n;
    *state = self->user;
    return KVF_PLUGIN_OK;
}

static int group_ok(const kvf_plugin_shape *s) {
    int g = s->num_qo_heads / s->num_kv_heads;
    return g <= 6 || g == 8;
}

static int t_supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why,
                      size_t n) {
    if (*(const int *)self->user == GROUPS && !group_ok(s)) {
        snprintf(why, n, "group size %d is not dispatched", s->num_qo_heads / s->num_kv_heads);
        return 0;
    }
    return 1;
}

static int t_run(void *state, const kvf_plugin_args *a, char *msg, size_t n) {
    const int mode = *(const int *)state;
    const kvf_plugin_shape *s = a->shape;
    const int64_t no = (int64_t)s->batch_size * s->num_qo_heads * s->head_dim;
    switch (mode) {
    case CRASH: {
        volatile uintptr_t address = 16;
        *(volatile int32_t *)address = 1;
        break;
    }
    case HANG:
        for (;;) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    case ABORT:
        abort();
    case EXIT:
        exit(7);
    case ERROR:
        snprintf(msg, n, "deliberate failure for the test");
        return KVF_PLUGIN_ERROR;
    case FALSE_SUPPORT:
        snprintf(msg, n, "this shape is not handled after all");
        return KVF_PLUGIN_UNSUPPORTED;
    case GROUPS:
        if (!group_ok(s)) return KVF_PLUGIN_UNSUPPORTED;
        break;
    default:
        break;
    }
    /* The element kvfuzz's poison is in before the run, kept to leave it unwritten. */
    const uint16_t before = no ? a->o[no - 1] : 0;
    int rc = run(NULL, a, msg, n);
    if (rc != KVF_PLUGIN_OK || no == 0) return rc;
    if (mode == NAN_OUT) a->o[0] = 0x7fc0;
    if (mode == UNWRITTEN) a->o[no - 1] = before;
    if (mode == OOB) a->o[no + 3] = 0;
    if (mode == INPUT_MOD) ((uint16_t *)a->q)[0] ^= 1;
    return KVF_PLUGIN_OK;
}

/* Plan facts, as a split-KV kernel would report its split: here which kernel ran. */
static void t_describe(void *state, char *buf, size_t n) {
    snprintf(buf, n, "test-mode=%d", *(const int *)state);
}

#define K(mode_, name_, desc_)                                                                     \
    {                                                                                              \
        .struct_size = sizeof(kvf_plugin_kernel), .name = name_, .description = desc_,             \
        .device = KVF_PLUGIN_DEVICE_CPU, .user = &modes[mode_], .supports = t_supports,            \
        .create = t_create, .run = t_run, .describe = t_describe                                   \
    }

static const kvf_plugin_kernel test_kernels[] = {
    K(CRASH, "crash", "writes to address 16"),
    K(HANG, "hang", "never returns"),
    K(ABORT, "abort", "calls abort()"),
    K(EXIT, "exit", "calls exit(7)"),
    K(NAN_OUT, "nan", "writes NaN into o[0]"),
    K(UNWRITTEN, "unwritten", "leaves the last o element unwritten"),
    K(OOB, "oob", "writes 4 elements past the end of o"),
    K(INPUT_MOD, "input-mod", "flips a bit of q"),
    K(ERROR, "error", "returns an error"),
    K(FALSE_SUPPORT, "false-support", "supports() accepts what run() refuses"),
    K(GROUPS, "groups", "correct, for groups 1-6 and 8 only"),
    K(TWIN, "twin", "correct: the example kernel"),
};

static const kvf_plugin test_plugin = {KVF_PLUGIN_ABI_VERSION,
                                       sizeof(kvf_plugin),
                                       "kvfuzz test plugin",
                                       sizeof(kvf_plugin_kernel),
                                       sizeof test_kernels / sizeof test_kernels[0],
                                       test_kernels};

const kvf_plugin *kvf_plugin_v1(void) {
    return &test_plugin;
}
