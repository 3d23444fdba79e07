/* The buffer host: runs one kernel descriptor (plugin.h) on kvfuzz-owned buffers.
 *
 * For each case the host asks supports(), calls plan() with host copies of the index arrays,
 * sizes the workspace, lays out the buffers and runs the kernel, then checks them:
 *   - inputs: q, the index arrays and the K/V page pools. Slots past each page's last used
 *     token and pages no sequence references hold KVF_HOST_POISON_INPUT (a NaN), so a kernel
 *     that reads them unmasked produces NaN (see KVF_HOST_POISON_POOL_BYTES for large pools);
 *   - outputs o and lse and the workspace: filled with poison (KVF_HOST_POISON_O,
 *     KVF_HOST_POISON_LSE, bytes KVF_HOST_POISON_BYTE) before the run, each with
 *     KVF_HOST_GUARD_BYTES guard bytes (KVF_HOST_GUARD_BYTE) before and after.
 * After the run: an output element still holding its poison bits is KVF_EUNWRITTEN, a changed
 * guard byte KVF_EOOBWRITE, a changed input byte KVF_EINPUTMOD, each with one sentence naming
 * the first place (buffer, b, h, d or byte offset). A kernel whose supports() accepted the
 * shape but whose plan or run refused it is KVF_EKERNEL ("claims support it lacks").
 * host.c chooses the host for a descriptor: the CPU host (host_cpu.c) or the CUDA host (device
 * buffers, stream, synchronization; cuda/host_cuda.cu and its neighbours); both use the layout
 * and checks of host_check.c, declared with the other internals in kernels/host_internal.h.
 *
 * Ownership: a host is created per worker process by kvf_host_create and released by
 * kvf_host_destroy; it owns the descriptor's state and every buffer. The descriptor must
 * outlive it. o and lse passed to kvf_host_run belong to the caller and receive the outputs
 * (also when a check fails, so a finding can show what the kernel wrote). */
#ifndef KVFUZZ_KERNEL_HOST_H
#define KVFUZZ_KERNEL_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/plugin.h"

#define KVF_HOST_POISON_INPUT 0x7FA1u   /* bf16 signalling NaN in unused slots and pages */
#define KVF_HOST_POISON_O 0xFFA5u       /* bf16 NaN in o before the run */
#define KVF_HOST_POISON_LSE 0xFFA5A5A5u /* f32 NaN in lse before the run */
#define KVF_HOST_POISON_BYTE 0xFFu      /* workspace bytes before the run (NaN as f32, bf16) */
#define KVF_HOST_GUARD_BYTE 0xA5u       /* guard bytes around outputs and workspace */
#define KVF_HOST_GUARD_BYTES 256        /* on each side */
/* Pools of at most this many bytes per cache are poisoned whole; in larger ones, the pages a
 * sequence references and the pages next to them (reading a neighbour is the common bug; a
 * sparse pool of gigabytes is not written whole for every case). */
#define KVF_HOST_POISON_POOL_BYTES ((size_t)4 << 20)

typedef struct kvf_host kvf_host;

int kvf_host_create(const kvf_plugin_kernel *desc, kvf_host **out, kvf_error *err);
int kvf_host_run(kvf_host *h, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err);
void kvf_host_describe(kvf_host *h, char *buf, size_t buf_size);
void kvf_host_destroy(kvf_host *h); /* NULL is fine */

/* A run in two phases, so that one thread can keep several hosts' devices busy: submit starts
 * the run of the case, collect finishes it and returns what kvf_host_run would have (a submit's
 * error comes back from its collect too), writing o and lse. kvf_host_run is submit + collect.
 * The case must stay alive and unchanged until the collect; each submit is followed by one
 * collect before the host's next submit or run (KVF_EINVAL otherwise). The CUDA host loads the
 * case and queues every call of the run in submit, then returns before the device has run it
 * (kvf_host_overlaps: 1); the CPU host runs the case in collect (0). */
int kvf_host_submit(kvf_host *h, const kvf_case *c, kvf_error *err);
/* The graph-replay relation's run (docs/invariance.md): capture, replay, compare elsewhere.
 * `capture` and c have the same batch size, heads, head dim, page size, pool size and sm_scale,
 * and capture's page table is no longer than c's (KVF_EINVAL otherwise). The host plans c (to
 * size the buffers for both), loads capture into buffers laid out for the larger of the two,
 * captures the descriptor's run() on its stream in a CUDA graph and replays it once (checked
 * as any run is), then loads c into the same buffers, calls plan() again and replays the graph
 * (checked again), o and lse receiving c's outputs. A run() that cannot be captured (it
 * synchronizes, allocates, or its capture is invalidated) is KVF_EKERNEL naming the CUDA
 * error; a CPU descriptor is KVF_EUNSUPPORTED. */
int kvf_host_graph_replay(kvf_host *h, const kvf_case *capture, const kvf_case *c, kvf_bf16 *o,
                          float *lse, kvf_error *err);
int kvf_host_collect(kvf_host *h, kvf_bf16 *o, float *lse, kvf_error *err);
int kvf_host_overlaps(const kvf_host *h);

/* CUDA descriptors (KVF_PLUGIN_DEVICE_CUDA; builds with CUDA only, else kvf_host_create is
 * KVF_EDEVICE): device and CUDA API errors are KVF_EDEVICE, with the cudaError name
 * (cudaErrorIllegalAddress, ...) in the sentence. The host runs the kernel on a stream of its
 * own and synchronizes that stream, never the device, before its checks. Its device pools are
 * poisoned whole (stronger than KVF_HOST_POISON_POOL_BYTES asks) and kept between runs: a run
 * writes only the pages the case reads and the next re-poisons them. The input check is a
 * checksum of q, the index arrays and the pools (the whole pools while each is at most 64 MiB,
 * else the pages the case reads), before and after the run, on the device.
 * Environment, read at creation: KVF_CUDA_VERIFY_POOL=1 checks, once a run's pages are written,
 * that no pool byte outside them is anything but poison (tests: it reads both pools whole);
 * KVF_CUDA_HOST_TIMING=1 prints, every 5 s, where the runs' host and device time went;
 * KVF_CUDA_STAGE_BYTES=N (a multiple of 16, 32 to 2^30) sizes the pinned staging buffer the
 * pages go up through (default 64 MiB; tests of uploads in several batches), KVF_EINVAL on a
 * malformed value, KVF_EUNSUPPORTED from run when a K/V page pair does not fit. */

/* Tokens used in each page of the pool: for page p, the largest number of leading slots any
 * sequence reads (S for a page that is not some sequence's last, last_page_len for a last
 * page), 0 for pages no sequence references. Returns a malloc'd array of c->num_pages entries
 * for pools of at most `max_pages` pages, else NULL with *err set (KVF_ELIMIT).
 * Internal to the kernels module (host_check.c; the rest of the hosts' internals are in
 * kernels/host_internal.h): declared here for the CUDA host's files and the test kernels
 * (kernels/test_kernels.c), which do not include that header. */
int32_t *kvf__host_used_slots(const kvf_case *c, int64_t max_pages, kvf_error *err);

#endif
