/* A probe process for one plugin library: opens it away from the caller and answers questions
 * about its kernels (the list, and supports() per shape), so the caller can list kernels and
 * steer case generation without loading the library itself. The caller stays free of the
 * plugin's code: a crash in a plugin's supports() ends the probe, not the caller, and a
 * process that will fork CUDA workers never runs a plugin's initialisers. Internal to kernels/.
 *
 * Ownership: kvf__probe_start allocates the probe and the kernel list (free with
 * kvf__probe_stop and free()). Errors: the library's load error as kvf__plugin_open gives it,
 * KVF_EIO when the process cannot be started or dies. Safe to call kvf__probe_supports from
 * several threads. */
#ifndef KVFUZZ_PLUGIN_PROBE_H
#define KVFUZZ_PLUGIN_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/error.h"
#include "kvfuzz/plugin.h"

typedef struct kvf__probe kvf__probe;

typedef struct kvf__probe_kernel {
    char name[132];
    char description[256];
    int32_t device, role;
    char precision[64]; /* the declared precision model, "" for none */
    char promises[128]; /* the declared promises, "" for the defaults */
    char models[32];    /* a mutant's bug class, "" for none */
} kvf__probe_kernel;

int kvf__probe_start(const char *path, kvf__probe **out, kvf__probe_kernel **kernels,
                     uint32_t *count, kvf_error *err);
/* 1 supported, 0 not (reason in why), KVF_EIO when the probe is gone (it is not restarted). */
int kvf__probe_supports(kvf__probe *p, uint32_t index, const kvf_plugin_shape *shape, char *why,
                        size_t why_size);
/* The probe is reference-counted: start returns it with one reference, retain adds one, stop
 * drops one and ends the process with the last. NULL is fine. */
void kvf__probe_retain(kvf__probe *p);
void kvf__probe_stop(kvf__probe *p);

#endif
