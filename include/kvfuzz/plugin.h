/* kvfuzz plugin ABI, version 1: how a shared library offers decode-attention kernels to kvfuzz.
 *
 * A plugin is a shared library that exports one C function, `kvf_plugin_v1` (KVF_PLUGIN_ENTRY),
 * returning a pointer to a kvf_plugin descriptor. The descriptor starts with the ABI version and
 * its own size, and lists one or more kernels (at most KVF_PLUGIN_MAX_KERNELS). kvfuzz loads the
 * library with dlopen() inside its worker process (after fork), so anything a kernel does
 * wrong, a crash, a hang, an abort, exit(), a CUDA fault, ends as a replayable finding, never as
 * a kvfuzz crash. This header depends on nothing but the C standard library; it is the whole
 * contract (docs/plugins.md walks through it with an example; kvfuzz/plugin_helpers.h, installed
 * beside it, has optional inline helpers: bf16 conversions, sequence lengths, row addressing,
 * the export macro).
 *
 * The descriptor's lifetime. The descriptor, its kernel array and every string and `user`
 * datum they point to must stay valid and unchanged until the library is unloaded. kvfuzz
 * unloads a library only in a process where it has called none of its kernel functions (its
 * descriptor failed the load checks, or no longer lists the kernel asked for); once kvfuzz has
 * called a kernel function of a library (supports() included), the library stays loaded until
 * that process (worker or probe) exits: kvfuzz never calls dlclose() on it. So a static
 * descriptor works, and so does one built at load time: the entry point may build it on its
 * first call (under pthread_once or C11 call_once, since kvfuzz may call the entry point more
 * than once in one process, each time a kernel state is created) into storage it never frees,
 * and must return the same, unchanged descriptor on every call.
 *
 * The operation. One query token per sequence, paged K/V:
 *   q        bf16 [B][Hq][D]          strides q_stride_batch, q_stride_head, 1 (elements)
 *   k_cache  bf16 [P] pages of [S][Hk][D] (NHD) or [Hk][S][D] (HND)
 *                                     strides kv_stride_page, kv_stride_slot, kv_stride_head, 1
 *   v_cache  bf16, the same layout and strides as k_cache
 *   kv_indptr int32 [B+1], kv_indices int32 [kv_indptr[B]], kv_last_page_len int32 [B]
 *   o        bf16 [B][Hq][D]  (out)   strides o_stride_batch, o_stride_head, 1
 *   lse      f32  [B][Hq]     (out)   stride lse_stride_batch, 1; base-2 log-sum-exp
 * Element (b, h, d) of q is q[b * q_stride_batch + h * q_stride_head + d]; element (slot t,
 * head g, d) of page p is k_cache[p * kv_stride_page + t * kv_stride_slot + g * kv_stride_head
 * + d]. kvfuzz varies the layout (docs/plugins.md, "Layouts"): strides padded past the dense
 * ones, HND pages (kv_stride_head > kv_stride_slot), pages padded far past their size, and
 * views that start inside larger allocations. Padding and what precedes a view hold poison; a
 * kernel that writes there is an out-of-bounds-write finding. The shape carries the same
 * strides, so supports() can decline a layout the kernel does not take.
 * Quantized caches (docs/plugins.md, "FP8 caches"; only for a kernel whose kv_dtypes and
 * scale_granularities below take them): k_cache and v_cache may hold FP8 bytes (shape.k_dtype,
 * shape.v_dtype: 1 e4m3 = float8_e4m3fn, 2 e5m2), one byte per element at the same strides, and
 * f32 scales come in args.k_scale / args.v_scale (shape.scale_granularity: 1 one scale, 2 [Hk],
 * 3 [P][S][Hk] contiguous, per page slot and KV head). The values are exact rationals:
 *   k = k_scale[i] * k8,  v = v_scale[i] * v8,  i = 0 / g / (page * S + slot) * Hk + g,
 * and the operation below is applied to them (FlashInfer folds k_scale into sm_scale and
 * multiplies o by v_scale: both are roundings of this definition).
 * Sequence b owns pages kv_indices[kv_indptr[b] .. kv_indptr[b+1]); with n pages its length is
 * (n-1)*S + kv_last_page_len[b], or 0 when n == 0. Query head h reads KV head h / (Hq/Hk).
 * s_t = sm_scale * q.k_t;  lse = log2(sum_t exp(s_t));  o = sum_t exp(s_t) v_t / sum_t exp(s_t).
 * An empty sequence has o = 0 and lse = -inf. bf16 values travel as their 16-bit patterns.
 *
 * Ownership. kvfuzz owns every buffer a kernel sees: inputs, outputs and workspace. Inputs are
 * read-only; slots past a sequence's last token and pages no sequence references hold NaN, so
 * a kernel that reads them without masking produces NaN. Outputs and workspace are filled with
 * a NaN pattern before each run and are followed (and preceded) by guard bytes. After the run
 * kvfuzz checks that every output element was written, that no guard byte and no input byte
 * changed; each violation is a finding of its own class (unwritten-output,
 * out-of-bounds-write, input-modified). A kernel must not keep any pointer from
 * kvf_plugin_args or kvf_plugin_index after the call that received it returns. Its state
 * (created by create(), released by destroy()) is its own.
 *
 * Devices. A KVF_PLUGIN_DEVICE_CPU kernel gets host pointers and args.stream == NULL. A
 * KVF_PLUGIN_DEVICE_CUDA kernel gets device pointers on the current device and a cudaStream_t
 * in args.stream: it enqueues its work on that stream and may return before the work finishes;
 * kvfuzz synchronizes the stream, and a CUDA error reported then is the kernel's. It must not
 * change the current device, reset the device, or synchronize other streams' work into its
 * result. Programmatic dependent launch and CUDA graphs on the given stream are fine.
 *
 * Calls. For each case kvfuzz calls, in order and from one thread at a time per state:
 *   supports(shape)            may be called in any process, any number of times, with no state:
 *                              a pure function of the shape;
 *   plan(state, shape, index)  optional; gets host copies of the index arrays (a scheduler that
 *                              needs lengths, as FlashInfer's does, plans here);
 *   workspace_bytes(state, shape)  optional; bytes of scratch kvfuzz provides to run;
 *   run(state, args)           computes o and lse;
 *   describe(state)            optional; one line of plan facts for the last plan
 *                              ("split=yes chunk=128 ctas=264"), shown beside findings and in
 *                              bench tables.
 * create() runs once per state before any of these; destroy() at its end (a crashing or killed
 * worker does not reach it). A worker holds one state unless the kernel sets
 * concurrent_states: then it may create up to that many states in one process and run them at
 * the same time, one case per state, so that small cases overlap on the device. A CPU kernel's
 * states each get a thread; a CUDA kernel's states (each with its own stream) are driven from
 * one thread, which calls one state's plan and run while the launches of the others are still
 * on the device, and synchronizes a state's stream before that state's next plan. A kernel that
 * keeps anything outside its state (globals, a shared handle) leaves concurrent_states at 0.
 *
 * Errors. Every function that can fail returns a kvf_plugin_status and may write one sentence
 * (no newline, NUL-terminated, truncated to msg_size) into msg. KVF_PLUGIN_UNSUPPORTED from
 * plan or run means "not this shape" and is not a finding when supports() said so too; a
 * kernel whose supports() accepts a shape that plan or run then refuses is a finding. Any other
 * nonzero status is a kernel-error finding carrying the message. A plugin never calls exit(),
 * never prints to stdout (stderr is fine), never installs signal handlers, and must be safe to
 * dlopen in a process that has not initialised CUDA. */
#ifndef KVFUZZ_PLUGIN_H
#define KVFUZZ_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVF_PLUGIN_ABI_VERSION 1u
#define KVF_PLUGIN_ENTRY "kvf_plugin_v1"

/* Versions of kvfuzz that speak this ABI accept any descriptor whose struct_size is at least
 * the size of the version-1 struct; fields added later go at the end. */

typedef enum kvf_plugin_status {
    KVF_PLUGIN_OK = 0,
    KVF_PLUGIN_UNSUPPORTED = 1, /* this shape is not one the kernel handles */
    KVF_PLUGIN_ERROR = 2,       /* anything else: a launch failure, an internal check */
    KVF_PLUGIN_NOMEM = 3,       /* host or device memory exhausted */
} kvf_plugin_status;

typedef enum kvf_plugin_device {
    KVF_PLUGIN_DEVICE_CPU = 0,
    KVF_PLUGIN_DEVICE_CUDA = 1,
} kvf_plugin_device;

typedef enum kvf_plugin_role {
    KVF_PLUGIN_ROLE_UNDER_TEST = 0, /* a kernel to judge */
    KVF_PLUGIN_ROLE_REFERENCE = 1,  /* a known-good kernel: `mutants` and `bench` may use it as a
                                       control */
    KVF_PLUGIN_ROLE_MUTANT = 2,     /* a kernel with a deliberate bug (the class it models in
                                       `models`): `kvfuzz mutants --kernel PATH.so` must kill it */
} kvf_plugin_role;

/* The shape of one case: everything supports(), plan() and workspace_bytes() may depend on,
 * apart from the index arrays themselves. */
typedef struct kvf_plugin_shape {
    uint32_t struct_size; /* sizeof(kvf_plugin_shape) of the kvfuzz that filled it */
    int32_t num_qo_heads; /* Hq */
    int32_t num_kv_heads; /* Hk, divides Hq */
    int32_t head_dim;     /* D */
    int32_t page_size;    /* S */
    int32_t batch_size;   /* B, may be 0 */
    int64_t num_pages;    /* P, the pool size: page ids are in [0, P) */
    int64_t num_entries;  /* kv_indptr[B], page-table entries of all sequences */
    int64_t total_tokens; /* sum of sequence lengths */
    int64_t max_seq_len;  /* longest sequence, in tokens */
    float sm_scale;
    /* Added after the first release of version 1 (a plugin built before reads only the fields
     * above; kvfuzz always fills these): the layout of the case's buffers, the strides run()
     * will get in kvf_plugin_args, in elements. Dense NHD is q_stride_head = D, q_stride_batch
     * = Hq * D, kv_stride_head = D, kv_stride_slot = Hk * D, kv_stride_page = S * Hk * D, o as
     * q, lse_stride_batch = Hq. All 0 (a shape built without them): dense. */
    int64_t q_stride_batch, q_stride_head;
    int64_t kv_stride_page, kv_stride_slot, kv_stride_head;
    int64_t o_stride_batch, o_stride_head;
    int64_t lse_stride_batch;
    /* Added later still (0 for a shape built without them: bf16 caches, no scales): the
     * caches' element types (0 bf16, 1 e4m3, 2 e5m2) and the scales' granularity (0 none, 1
     * tensor, 2 per KV head, 3 per page slot and KV head). kvfuzz gives a kernel only the
     * dtypes and granularities its kv_dtypes and scale_granularities name. */
    int32_t k_dtype, v_dtype;
    int32_t scale_granularity;
} kvf_plugin_shape;

/* Host copies of the index arrays, for plan(). Valid during the call only. */
typedef struct kvf_plugin_index {
    const int32_t *kv_indptr;        /* [B+1] */
    const int32_t *kv_indices;       /* [kv_indptr[B]] */
    const int32_t *kv_last_page_len; /* [B] */
} kvf_plugin_index;

/* Everything run() works on. Pointers are device pointers for CUDA kernels and host pointers
 * for CPU kernels; all strides count elements, not bytes. Valid during the call only. */
typedef struct kvf_plugin_args {
    uint32_t struct_size; /* sizeof(kvf_plugin_args) of the kvfuzz that filled it */
    const kvf_plugin_shape *shape;

    const uint16_t *q; /* bf16 [B][Hq][D] */
    int64_t q_stride_batch, q_stride_head;

    const uint16_t *k_cache; /* bf16 [P][S][Hk][D] */
    const uint16_t *v_cache; /* bf16 [P][S][Hk][D] */
    int64_t kv_stride_page, kv_stride_slot, kv_stride_head;

    const int32_t *kv_indptr;        /* [B+1] */
    const int32_t *kv_indices;       /* [kv_indptr[B]] */
    const int32_t *kv_last_page_len; /* [B] */
    float sm_scale;

    uint16_t *o; /* bf16 [B][Hq][D], written */
    int64_t o_stride_batch, o_stride_head;
    float *lse; /* f32 [B][Hq], written */
    int64_t lse_stride_batch;

    void *workspace; /* workspace_bytes() bytes, 256-byte aligned; NULL when 0 */
    size_t workspace_bytes;

    void *stream; /* cudaStream_t for CUDA kernels, NULL for CPU kernels */

    /* Added later still (read only when shape->scale_granularity is not 0): the f32 scales,
     * 1, Hk or P x S x Hk of each, read-only, guarded and checked as the other inputs. With an
     * FP8 dtype, k_cache / v_cache above point to its bytes (cast them to const uint8_t *). */
    const float *k_scale;
    const float *v_scale;
} kvf_plugin_args;

typedef struct kvf_plugin_kernel kvf_plugin_kernel;

struct kvf_plugin_kernel {
    uint32_t struct_size;    /* sizeof(kvf_plugin_kernel) */
    const char *name;        /* unique within the plugin: letters, digits, '-', '_', '.', '/' */
    const char *description; /* one line */
    int32_t device;          /* kvf_plugin_device */
    int32_t role;            /* kvf_plugin_role */
    /* The plugin's own; kvfuzz never reads or writes through it, it only passes `self` back.
     * It may point to const data: store it as (void *)&table and read it back as
     * (const my_table *)self->user (casting away const is defined as long as nothing writes
     * through the pointer, and kvfuzz does not). */
    void *user;

    /* 1 when the kernel computes this shape, 0 when not (then `why`, if the plugin writes it,
     * says what it lacks, e.g. "group size 5 is not dispatched"). Required. */
    int (*supports)(const kvf_plugin_kernel *self, const kvf_plugin_shape *shape, char *why,
                    size_t why_size);
    /* Creates the kernel's state (may be left NULL). Optional. */
    int (*create)(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size);
    /* Releases it. Optional. */
    void (*destroy)(void *state);
    /* Plans one case from host copies of its index arrays. Optional. */
    int (*plan)(void *state, const kvf_plugin_shape *shape, const kvf_plugin_index *index,
                char *msg, size_t msg_size);
    /* Scratch bytes run() needs for the case last planned. Optional (none). */
    size_t (*workspace_bytes)(void *state, const kvf_plugin_shape *shape);
    /* Computes o and lse. Required. */
    int (*run)(void *state, const kvf_plugin_args *args, char *msg, size_t msg_size);
    /* One line of plan facts for the last plan, NUL-terminated into buf. Optional. */
    void (*describe)(void *state, char *buf, size_t buf_size);
    /* Added after the first release of version 1 (an entry whose struct_size ends before it
     * reads as 0): how many states one process may hold and run concurrently (see Calls
     * above). 0 or 1: one. */
    int32_t concurrent_states;
    /* Added later still (reads as NULL when struct_size ends before it): the precision model
     * the kernel implements, so that kvfuzz judges it within the roundings its design makes
     * and names any error beyond them a defect. NULL or "f32": fp32 weights and partials.
     * Otherwise components joined by '+': "bf16-p" (the softmax weights P rounded to bf16 for
     * the P.V product, the denominator summed from the unrounded P, as FlashAttention-2 and
     * cuDNN do), "bf16-p-rsum" (the denominator from the rounded P), "fp16-p", "fp16-p-rsum",
     * "bf16-partials" (split-KV partial outputs stored in bf16, their lse in f32, as
     * FlashInfer's decode does), "ftz" (flush-to-zero arithmetic: -use_fast_math). At most 63
     * characters. docs/precision.md defines each model; `kvfuzz kernels` shows it. */
    const char *precision;
    /* Added later still (reads as NULL when struct_size ends before it): the invariance
     * relations the kernel promises (docs/invariance.md), as changes to the default set
     * (placement, head-permutation, v-scaling), joined by ',': a name adds a relation
     * ("batch-invariance"; "graph-replay" for a CUDA kernel whose run() may be captured in a
     * CUDA graph on one case and replayed, after plan() on the next case of the same batch
     * size, heads, head dim, page size, pool and sm_scale, with its buffers at the same
     * addresses), a name after '-' withdraws one ("-v-scaling", for a kernel that quantizes
     * v). NULL or "": the defaults. A relation promised and broken is a finding; one
     * not promised is measured and reported as a property. At most 127 characters. */
    const char *promises;
    /* Added later still (reads as NULL when struct_size ends before it): for role
     * KVF_PLUGIN_ROLE_MUTANT, the bug class the mutant models ("B10", "int32-offset"), shown in
     * the kill table of `kvfuzz mutants --kernel PATH.so`. At most 31 printable characters; NULL
     * for other roles. */
    const char *models;
    /* Added later still (reads as 0 when struct_size ends before them): the cache dtypes the
     * kernel reads, as a mask of 1u << dtype (bf16 is always taken: 0 means bf16 only), and
     * the scale granularities it takes, as a mask of 1u << granularity (caches without scales
     * always: 0 means none but those). A case outside both masks never reaches supports(). */
    uint32_t kv_dtypes;
    uint32_t scale_granularities;
};

/* The size of a version-1 kernel entry without the fields added later: the smallest
 * struct_size and kernel_struct_size kvfuzz accepts. */
#define KVF_PLUGIN_KERNEL_V1_SIZE offsetof(kvf_plugin_kernel, concurrent_states)
/* kv_dtypes and scale_granularities bits. */
#define KVF_PLUGIN_KV_E4M3 (1u << 1)
#define KVF_PLUGIN_KV_E5M2 (1u << 2)
#define KVF_PLUGIN_SCALE_TENSOR (1u << 1)
#define KVF_PLUGIN_SCALE_HEAD (1u << 2)
#define KVF_PLUGIN_SCALE_TOKEN (1u << 3)
/* The longest precision model text kvfuzz accepts, without its NUL. */
#define KVF_PLUGIN_PRECISION_MAX 63
/* The longest promises text kvfuzz accepts, without its NUL. */
#define KVF_PLUGIN_PROMISES_MAX 127
/* The longest `models` text (a mutant's bug class) kvfuzz accepts, without its NUL. */
#define KVF_PLUGIN_MODELS_MAX 31

/* The most kernels one library may list: a larger num_kernels fails the load (exit status 2)
 * rather than costing thousands of worker processes in `replay --kernel PATH.so`. */
#define KVF_PLUGIN_MAX_KERNELS 4096u

/* The largest kernel_struct_size (the kernel array's stride) kvfuzz accepts; it must also be a
 * multiple of the entry's alignment. Entries grow by appended fields, far below this. */
#define KVF_PLUGIN_MAX_KERNEL_SIZE 4096u
/* The most scratch workspace_bytes() may ask for (64 GiB): more is the kernel's error. */
#define KVF_PLUGIN_MAX_WORKSPACE_BYTES ((size_t)1 << 36)

typedef struct kvf_plugin {
    uint32_t abi_version;        /* KVF_PLUGIN_ABI_VERSION */
    uint32_t struct_size;        /* sizeof(kvf_plugin) */
    const char *name;            /* the plugin's name, for messages */
    uint32_t kernel_struct_size; /* sizeof(kvf_plugin_kernel): the stride of `kernels` */
    uint32_t num_kernels;        /* 1 to KVF_PLUGIN_MAX_KERNELS */
    const kvf_plugin_kernel *kernels;
} kvf_plugin;

/* The entry point every plugin exports (declared here so the compiler checks its type). With
 * -fvisibility=hidden, define it with KVF_PLUGIN_EXPORT (kvfuzz/plugin_helpers.h) or
 * __attribute__((visibility("default"))). */
const kvf_plugin *kvf_plugin_v1(void);
typedef const kvf_plugin *(*kvf_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
