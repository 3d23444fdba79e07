/* The GPUs a campaign spreads over (`kvfuzz fuzz --devices all|LIST`): one kernel worker
 * process per listed device, each pinned to it by CUDA_VISIBLE_DEVICES set in the worker
 * before the kernel starts (the campaign's own process never initialises CUDA, so each forked
 * worker picks its device up at its first CUDA call).
 *
 * Device numbers are the ordinals this process sees: 0 .. n-1 of the GPUs it could use. Where
 * CUDA_VISIBLE_DEVICES is already set, ordinal i is its i-th entry (a number or a GPU UUID) and
 * the worker gets that entry; otherwise the worker gets the number itself. `all` is every
 * visible GPU: the entries of CUDA_VISIBLE_DEVICES where set, else the GPUs the NVIDIA driver
 * lists under /proc/driver/nvidia/gpus (read without touching CUDA). Where neither says and no
 * GPU device file exists (/dev/nvidia0, /dev/nvidiactl, WSL's /dev/dxg), no GPU is visible;
 * where such a file exists but nothing counts the GPUs, a list is taken as given.
 *
 * Ownership: kvf_device_set is a plain value, filled by kvf_devices_parse; nothing to free.
 * Errors: KVF_EINVAL with one sentence for an empty list, a list entry that is not a decimal
 * device number, a device listed twice, a number past the visible devices, more than
 * KVF_MAX_DEVICES devices, or `all` or any list when no GPU is visible. */
#ifndef KVFUZZ_DEVICES_H
#define KVFUZZ_DEVICES_H

#include "kvfuzz/error.h"

#define KVF_MAX_DEVICES 16
#define KVF_DEVICE_ID_MAX 64 /* a CUDA_VISIBLE_DEVICES entry: a number or a GPU UUID */

typedef struct kvf_device_set {
    int n;
    int ordinal[KVF_MAX_DEVICES];                     /* as the user numbered them */
    char visible[KVF_MAX_DEVICES][KVF_DEVICE_ID_MAX]; /* the worker's CUDA_VISIBLE_DEVICES */
} kvf_device_set;

/* Parses "all" or a comma-separated list of device ordinals ("0,1,3"). */
int kvf_devices_parse(kvf_device_set *out, const char *text, kvf_error *err);

#endif
