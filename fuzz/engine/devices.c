/* `--devices all|LIST` (kvfuzz/devices.h): which GPUs a campaign's workers are pinned to. */
#include "kvfuzz/devices.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether CUDA takes a CUDA_VISIBLE_DEVICES entry as a device: an ordinal (digits) or a GPU or
 * MIG UUID. CUDA stops at the first entry that is neither (`-1`, or Slurm's `NoDevFiles` for a
 * GPU allocation without device files): it and the entries after it are hidden, so a worker
 * pinned to one would see no GPU. */
static int cuda_entry(const char *p, size_t len) {
    if (len >= 5 && (strncmp(p, "GPU-", 4) == 0 || strncmp(p, "MIG-", 4) == 0)) return 1;
    if (len == 0) return 0;
    for (size_t i = 0; i < len; i++)
        if (p[i] < '0' || p[i] > '9') return 0;
    return 1;
}

/* Whether the NVIDIA character devices or WSL's GPU paravirtualisation device exist: where
 * /proc/driver/nvidia/gpus is missing (WSL has none, nor do some containers), a GPU may still
 * be usable through them. */
static int gpu_device_files(void) {
    static const char *const files[] = {"/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (access(files[i], F_OK) == 0) return 1;
    return 0;
}

/* The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (or driver ordinals).
 * Returns how many; 0 when none can be (an empty variable, or no driver listing and no GPU
 * device file); -1 when a GPU may be there but nothing says how many. */
static int visible_devices(char ids[][KVF_DEVICE_ID_MAX], int max) {
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    if (env) { /* set, even empty: CUDA sees exactly these (none when empty) */
        int n = 0;
        const char *p = env;
        while (*p && n < max) {
            size_t len = strcspn(p, ",");
            if (!cuda_entry(p, len)) break; /* as CUDA reads it: this and the rest are hidden */
            if (len < KVF_DEVICE_ID_MAX) {
                memcpy(ids[n], p, len);
                ids[n][len] = 0;
                n++;
            }
            p += len;
            if (*p == ',') p++;
        }
        return n;
    }
    /* One directory per GPU, named by its PCI address; the driver numbers them in that order
     * by default, but all that matters here is how many there are. */
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d) return gpu_device_files() ? -1 : 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max)
        if (e->d_name[0] != '.') {
            snprintf(ids[n], KVF_DEVICE_ID_MAX, "%d", n);
            n++;
        }
    closedir(d);
    return n;
}

static int parse_ordinal(const char *s, size_t len, int *out) {
    if (len == 0 || len > 4) return -1;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int kvf_devices_parse(kvf_device_set *out, const char *text, kvf_error *err) {
    memset(out, 0, sizeof *out);
    char ids[KVF_MAX_DEVICES][KVF_DEVICE_ID_MAX];
    int nvis = visible_devices(ids, KVF_MAX_DEVICES);
    if (!text || !*text)
        return kvf_error_set(err, KVF_EINVAL, "--devices needs `all` or a list such as 0,1");
    if (strcmp(text, "all") == 0) {
        const char *env = getenv("CUDA_VISIBLE_DEVICES");
        if (nvis <= 0 && env)
            return kvf_error_set(err, KVF_EINVAL,
                                 "--devices all: no GPU is visible (CUDA_VISIBLE_DEVICES=\"%.64s\" "
                                 "names none)",
                                 env);
        if (nvis <= 0)
            return kvf_error_set(err, KVF_EINVAL,
                                 "--devices all: no GPU is visible (no NVIDIA driver lists a GPU "
                                 "under /proc/driver/nvidia/gpus)");
        for (int i = 0; i < nvis; i++) {
            out->ordinal[i] = i;
            snprintf(out->visible[i], KVF_DEVICE_ID_MAX, "%s", ids[i]);
        }
        out->n = nvis;
        return 0;
    }
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        int v;
        if (parse_ordinal(p, len, &v))
            return kvf_error_set(err, KVF_EINVAL,
                                 "--devices: \"%.*s\" is not a device number (use `all` or a "
                                 "comma-separated list such as 0,1)",
                                 (int)(len < 40 ? len : 40), p);
        if (out->n == KVF_MAX_DEVICES)
            return kvf_error_set(err, KVF_EINVAL, "--devices: more than %d devices",
                                 KVF_MAX_DEVICES);
        for (int i = 0; i < out->n; i++)
            if (out->ordinal[i] == v)
                return kvf_error_set(err, KVF_EINVAL, "--devices: device %d is listed twice", v);
        if (nvis == 0 && getenv("CUDA_VISIBLE_DEVICES"))
            return kvf_error_set(err, KVF_EINVAL,
                                 "--devices: CUDA_VISIBLE_DEVICES is set and lists no GPU");
        if (nvis == 0)
            return kvf_error_set(err, KVF_EINVAL,
                                 "--devices: no GPU is visible (no NVIDIA driver lists one and "
                                 "no GPU device file exists), so there is no device %d",
                                 v);
        if (nvis > 0 && v >= nvis)
            return kvf_error_set(err, KVF_EINVAL,
                                 "--devices: device %d does not exist (%d visible: 0..%d)", v, nvis,
                                 nvis - 1);
        out->ordinal[out->n] = v;
        if (nvis > 0)
            snprintf(out->visible[out->n], KVF_DEVICE_ID_MAX, "%s", ids[v]);
        else
            snprintf(out->visible[out->n], KVF_DEVICE_ID_MAX, "%d", v);
        out->n++;
        p += len;
        if (!*p) break;
        p++; /* the comma */
    }
    return 0;
}
