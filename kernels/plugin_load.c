/* Opening and checking plugin libraries (plugin_load.h). Every check a descriptor can fail is
 * made here, before kvfuzz calls any of its kernels, so a malformed plugin is one sentence at
 * load time rather than a crash later. */
#include "plugin_load.h"

#include "kvfuzz/kv_quant.h"
#include "kvfuzz/relation.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

const kvf_plugin_kernel *kvf__plugin_kernel_at(const kvf_plugin *p, uint32_t i) {
    if (i >= p->num_kernels) return NULL;
    return (const kvf_plugin_kernel *)((const char *)p->kernels +
                                       (size_t)i * p->kernel_struct_size);
}

int32_t kvf__plugin_kernel_states(const kvf_plugin_kernel *k) {
    const size_t end = offsetof(kvf_plugin_kernel, concurrent_states) + sizeof k->concurrent_states;
    return k->struct_size >= end ? k->concurrent_states : 0;
}

const char *kvf__plugin_kernel_precision(const kvf_plugin_kernel *k) {
    const size_t end = offsetof(kvf_plugin_kernel, precision) + sizeof k->precision;
    return k->struct_size >= end ? k->precision : NULL;
}

const char *kvf__plugin_kernel_models(const kvf_plugin_kernel *k) {
    const size_t end = offsetof(kvf_plugin_kernel, models) + sizeof k->models;
    return k->struct_size >= end ? k->models : NULL;
}

const char *kvf__plugin_kernel_promises(const kvf_plugin_kernel *k) {
    const size_t end = offsetof(kvf_plugin_kernel, promises) + sizeof k->promises;
    return k->struct_size >= end ? k->promises : NULL;
}

uint32_t kvf__plugin_kernel_kv_dtypes(const kvf_plugin_kernel *k) {
    const size_t end = offsetof(kvf_plugin_kernel, kv_dtypes) + sizeof k->kv_dtypes;
    return k->struct_size >= end ? k->kv_dtypes : 0;
}

uint32_t kvf__plugin_kernel_scale_granularities(const kvf_plugin_kernel *k) {
    const size_t end =
        offsetof(kvf_plugin_kernel, scale_granularities) + sizeof k->scale_granularities;
    return k->struct_size >= end ? k->scale_granularities : 0;
}

void kvf__plugin_text_flatten(char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f) s[n] = ' ';
    while (n > 0 && s[n - 1] == ' ')
        s[--n] = 0;
}

int kvf__plugin_kernel_supports(const kvf_plugin_kernel *k, const kvf_plugin_shape *shape,
                                char *why, size_t why_size) {
    const uint32_t dtypes = kvf__plugin_kernel_kv_dtypes(k) | 1u;
    const uint32_t grans = kvf__plugin_kernel_scale_granularities(k) | 1u;
    const int32_t kd = shape->k_dtype, vd = shape->v_dtype, gr = shape->scale_granularity;
    const int dtype_ok =
        kd >= 0 && kd < 32 && vd >= 0 && vd < 32 && (dtypes >> kd & 1u) && (dtypes >> vd & 1u);
    if (!dtype_ok || gr < 0 || gr >= 32 || !(grans >> gr & 1u)) {
        if (why && why_size)
            snprintf(why, why_size, "%s takes %s caches, not k %s and v %s with %s scales", k->name,
                     dtypes == 1u ? "only bf16" : "declared", kvf_kv_dtype_name(kd),
                     kvf_kv_dtype_name(vd), kvf_scale_granularity_name(gr));
        return 0;
    }
    const int yes = k->supports(k, shape, why, why_size) ? 1 : 0;
    if (!yes && why && why_size) {
        why[why_size - 1] = 0;
        kvf__plugin_text_flatten(why);
    }
    return yes;
}

/* A precision model text as the ABI allows it: lower-case letters, digits, '-' and '+', at most
 * KVF_PLUGIN_PRECISION_MAX of them. Whether it names a model is for the command that judges to
 * say (kvfuzz/precision.h is the oracle's). */
static int precision_text_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++) {
        char ch = s[n];
        if (n >= KVF_PLUGIN_PRECISION_MAX ||
            !((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '+'))
            return 0;
    }
    return 1;
}

static int models_text_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= KVF_PLUGIN_MODELS_MAX || s[n] < 0x20 || s[n] > 0x7e) return 0;
    return n > 0;
}

int kvf__plugin_kernel_index(const kvf_plugin *p, const char *name) {
    for (uint32_t i = 0; i < p->num_kernels; i++)
        if (strcmp(kvf__plugin_kernel_at(p, i)->name, name) == 0) return (int)i;
    return -1;
}

static int name_ok(const char *s) {
    if (!s || !*s || strlen(s) > 128) return 0;
    for (; *s; s++) {
        char ch = *s;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '-' || ch == '_' || ch == '.' || ch == '/' || ch == '=';
        if (!ok) return 0;
    }
    return 1;
}

static int check_descriptor(const char *path, const kvf_plugin *p, kvf_error *err) {
    if (p->abi_version != KVF_PLUGIN_ABI_VERSION)
        return kvf_error_set(
            err, KVF_EINVAL,
            "plugin %s speaks plugin ABI version %u; this kvfuzz speaks version %u", path,
            p->abi_version, KVF_PLUGIN_ABI_VERSION);
    if (p->struct_size < sizeof(kvf_plugin))
        return kvf_error_set(err, KVF_EINVAL,
                             "plugin %s's descriptor is %u bytes, smaller than the %zu bytes of "
                             "ABI version %u",
                             path, p->struct_size, sizeof(kvf_plugin), KVF_PLUGIN_ABI_VERSION);
    if (p->kernel_struct_size < KVF_PLUGIN_KERNEL_V1_SIZE)
        return kvf_error_set(err, KVF_EINVAL,
                             "plugin %s's kernel entries are %u bytes, smaller than the %zu "
                             "bytes of ABI version %u",
                             path, p->kernel_struct_size, (size_t)KVF_PLUGIN_KERNEL_V1_SIZE,
                             KVF_PLUGIN_ABI_VERSION);
    /* The array's stride: an absurd or misaligned one would walk far past the array, or read
     * its entries' pointers misaligned, before any entry could be checked. */
    if (p->kernel_struct_size > KVF_PLUGIN_MAX_KERNEL_SIZE ||
        p->kernel_struct_size % _Alignof(kvf_plugin_kernel) != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "plugin %s's kernel entries are %u bytes; kvfuzz takes a multiple "
                             "of %zu up to %u",
                             path, p->kernel_struct_size, (size_t) _Alignof(kvf_plugin_kernel),
                             (unsigned)KVF_PLUGIN_MAX_KERNEL_SIZE);
    if (p->num_kernels == 0 || !p->kernels)
        return kvf_error_set(err, KVF_EINVAL, "plugin %s lists no kernels", path);
    /* Checked before any entry is read: a garbage count would otherwise walk far past the
     * array, and every kernel listed costs a worker process in `replay`. */
    if (p->num_kernels > KVF_PLUGIN_MAX_KERNELS)
        return kvf_error_set(err, KVF_EINVAL,
                             "plugin %s lists %u kernels; kvfuzz loads at most %u from one "
                             "library",
                             path, p->num_kernels, (unsigned)KVF_PLUGIN_MAX_KERNELS);
    for (uint32_t i = 0; i < p->num_kernels; i++) {
        const kvf_plugin_kernel *k = kvf__plugin_kernel_at(p, i);
        if (k->struct_size < KVF_PLUGIN_KERNEL_V1_SIZE || k->struct_size > p->kernel_struct_size)
            return kvf_error_set(err, KVF_EINVAL,
                                 "plugin %s: kernel %u's entry is %u bytes, not between the %zu "
                                 "bytes of ABI version %u and the array's stride",
                                 path, i, k->struct_size, (size_t)KVF_PLUGIN_KERNEL_V1_SIZE,
                                 KVF_PLUGIN_ABI_VERSION);
        if (!name_ok(k->name))
            return kvf_error_set(err, KVF_EINVAL,
                                 "plugin %s: kernel %u has no usable name (1-128 of letters, "
                                 "digits and - _ . / =)",
                                 path, i);
        if (!k->supports || !k->run)
            return kvf_error_set(err, KVF_EINVAL, "plugin %s: kernel %s has no %s function", path,
                                 k->name, !k->supports ? "supports" : "run");
        if (k->device != KVF_PLUGIN_DEVICE_CPU && k->device != KVF_PLUGIN_DEVICE_CUDA)
            return kvf_error_set(err, KVF_EINVAL, "plugin %s: kernel %s has unknown device %d",
                                 path, k->name, (int)k->device);
        if (k->role != KVF_PLUGIN_ROLE_UNDER_TEST && k->role != KVF_PLUGIN_ROLE_REFERENCE &&
            k->role != KVF_PLUGIN_ROLE_MUTANT)
            return kvf_error_set(err, KVF_EINVAL, "plugin %s: kernel %s has unknown role %d", path,
                                 k->name, (int)k->role);
        const int32_t states = kvf__plugin_kernel_states(k);
        if (states < 0 || states > KVF_PLUGIN_MAX_STATES)
            return kvf_error_set(err, KVF_EINVAL,
                                 "plugin %s: kernel %s sets concurrent_states to %d; it must be "
                                 "0 to %d",
                                 path, k->name, (int)states, KVF_PLUGIN_MAX_STATES);
        const char *precision = kvf__plugin_kernel_precision(k);
        if (precision && !precision_text_ok(precision))
            return kvf_error_set(err, KVF_EINVAL,
                                 "plugin %s: kernel %s declares a precision model that is not "
                                 "1-%d of a-z, 0-9, '-' and '+' (as bf16-p+ftz)",
                                 path, k->name, KVF_PLUGIN_PRECISION_MAX);
        const char *models = kvf__plugin_kernel_models(k);
        if (models && !models_text_ok(models))
            return kvf_error_set(err, KVF_EINVAL,
                                 "plugin %s: kernel %s: the bug class it models must be 1-%d "
                                 "printable characters",
                                 path, k->name, KVF_PLUGIN_MODELS_MAX);
        const char *promises = kvf__plugin_kernel_promises(k);
        unsigned mask;
        kvf_error perr = {0};
        if (promises && strnlen(promises, KVF_PLUGIN_PROMISES_MAX + 1) > KVF_PLUGIN_PROMISES_MAX)
            return kvf_error_set(err, KVF_EINVAL,
                                 "plugin %s: kernel %s declares promises longer than %d "
                                 "characters",
                                 path, k->name, KVF_PLUGIN_PROMISES_MAX);
        if (promises && kvf_relation_promises_parse(promises, &mask, &perr))
            return kvf_error_set(err, KVF_EINVAL, "plugin %s: kernel %s: %s", path, k->name,
                                 perr.msg);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(kvf__plugin_kernel_at(p, j)->name, k->name) == 0)
                return kvf_error_set(err, KVF_EINVAL, "plugin %s lists kernel %s twice", path,
                                     k->name);
    }
    return 0;
}

int kvf__plugin_open(const char *path, kvf__plugin_lib *lib, kvf_error *err) {
    memset(lib, 0, sizeof *lib);
    struct stat st;
    if (stat(path, &st) != 0)
        return kvf_error_set(err, KVF_ENOTFOUND, "plugin %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return kvf_error_set(err, KVF_EINVAL, "plugin %s is not a regular file", path);
    /* dlopen searches the library path for a bare name; a path with a slash is taken as is. */
    char local[4096];
    const char *open_path = path;
    if (!strchr(path, '/')) {
        snprintf(local, sizeof local, "./%s", path);
        open_path = local;
    }
    dlerror();
    void *h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return kvf_error_set(err, KVF_EINVAL, "plugin %s is not a loadable shared object: %s", path,
                             why ? why : "dlopen failed");
    }
    kvf_plugin_entry_fn entry;
    void *sym = dlsym(h, KVF_PLUGIN_ENTRY);
    memcpy(&entry, &sym, sizeof entry); /* object to function pointer, as POSIX allows */
    if (!sym) {
        dlclose(h);
        return kvf_error_set(err, KVF_EINVAL,
                             "plugin %s does not export %s(), the kvfuzz plugin entry point", path,
                             KVF_PLUGIN_ENTRY);
    }
    const kvf_plugin *p = entry();
    if (!p) {
        dlclose(h);
        return kvf_error_set(err, KVF_EINVAL, "plugin %s: %s() returned no descriptor", path,
                             KVF_PLUGIN_ENTRY);
    }
    int rc = check_descriptor(path, p, err);
    if (rc) {
        dlclose(h);
        return rc;
    }
    lib->handle = h;
    lib->desc = p;
    return 0;
}

void kvf__plugin_close(kvf__plugin_lib *lib) {
    if (lib->handle) dlclose(lib->handle);
    memset(lib, 0, sizeof *lib);
}
