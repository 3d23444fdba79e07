// The CUDA plan's lifetime, info and launch preconditions (plan.cuh, cuda_kernels.h). Its
// preparation and launch are the production kernels' (decode.cu) or a mutant's own.
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_error.cuh"
#include "plan.cuh"

extern "C" int kvf_cuda_plan_create(kvf_cuda_plan **out, kvf_cuda_algo algo, kvf_error *err) {
    *out = NULL;
    if (algo != KVF_CUDA_ALGO_SPLITKV && algo != KVF_CUDA_ALGO_NAIVE)
        return kvf_error_set(err, KVF_EINVAL, "Unknown CUDA algorithm %d.", (int)algo);
    kvf_cuda_plan *p = (kvf_cuda_plan *)calloc(1, sizeof *p);
    if (!p) return kvf_error_set(err, KVF_ENOMEM, "Out of host memory for a CUDA plan.");
    p->algo = algo;
    cudaError_t e = cudaGetDevice(&p->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&p->num_sms, cudaDevAttrMultiProcessorCount, p->device);
    if (e == cudaSuccess) e = kvf__cuda_sched_init(&p->sched);
    if (e != cudaSuccess) {
        free(p);
        return kvf__cuda_fail(err, e, "Initializing CUDA");
    }
    *out = p;
    return 0;
}

extern "C" void kvf_cuda_plan_destroy(kvf_cuda_plan *p) {
    if (!p) return;
    kvf__cuda_sched_destroy(&p->sched);
    free(p);
}

extern "C" int kvf_cuda_plan_get_info(const kvf_cuda_plan *p, kvf_cuda_plan_info *info) {
    if (!p || !p->ready) return KVF_EINVAL;
    *info = p->info;
    return 0;
}

extern "C" size_t kvf_cuda_plan_workspace_bytes(const kvf_cuda_plan *p) {
    return p && p->ready ? p->ws_bytes : 0;
}

void kvf__cuda_plan_set_problem(kvf_cuda_plan *p, const kvf_cuda_problem *pr, float scale_log2) {
    p->Hq = pr->num_qo_heads, p->Hk = pr->num_kv_heads, p->D = pr->head_dim;
    p->S = pr->page_size, p->B = pr->batch_size;
    p->scale_log2 = scale_log2;
    p->k_dtype = pr->k_dtype, p->v_dtype = pr->v_dtype, p->scale_gran = pr->scale_granularity;
    p->num_pages = pr->num_pages;
    p->n_entries = pr->batch_size > 0 ? pr->kv_indptr[pr->batch_size] : 0;
    memset(&p->info, 0, sizeof p->info);
    p->info.num_sms = p->num_sms;
}

int kvf__cuda_plan_check_launch(const kvf_cuda_plan *p, const kvf_cuda_tensors *t, kvf_error *err) {
    if (!p || !p->ready) return kvf_error_set(err, KVF_EINVAL, "The CUDA plan was not prepared.");
    if (p->B == 0) return 1;
    if (!t->q || !t->kv_indptr || !t->kv_last_page_len || !t->o || !t->lse)
        return kvf_error_set(err, KVF_EINVAL, "A device tensor pointer is NULL.");
    // A pool without pages has no per-slot scales (none to pass); a page read needs them.
    if (p->scale_gran && p->n_entries > 0 && (!t->k_scale || !t->v_scale))
        return kvf_error_set(err, KVF_EINVAL,
                             "The prepared problem has scales and k_scale or v_scale is NULL.");
    if (p->ws_bytes &&
        (!t->workspace || t->workspace_bytes < p->ws_bytes || ((uintptr_t)t->workspace & 255) != 0))
        return kvf_error_set(err, KVF_EINVAL,
                             "The plan needs a 256-byte aligned workspace of %zu bytes (%zu "
                             "given).",
                             p->ws_bytes, t->workspace ? t->workspace_bytes : (size_t)0);
    return 0;
}
