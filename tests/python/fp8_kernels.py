"""Python kernels that read FP8 KV caches (fn.kvfuzz_kv_dtypes, fn.kvfuzz_scale_granularities),
declared well and badly, for the test_python_* tests and python_fp8_cli_test.sh.

`reference` computes, with a torch that has float8 dtypes (2.1 or later): it dequantizes each
cache element in f32 (value times scale, as cpu-ref and FlashInfer-Bench's reference do), then
runs torch_decode's numerics (fp32 logits, the maximum subtracted, weights normalised before P.V,
one rounding to bf16, lse in base 2). The rest are never launched, so the module loads under
tests/python/stub_torch (no torch needed) as well as under torch."""

import math

import torch

LOG2E = 1.0 / math.log(2.0)


def _tokens(cache, scale, pages, n):
    """The first n tokens of `pages` in `cache` ([P, S, Hk, D], bf16 or FP8), dequantized to f32:
    [n, Hk, D]. scale: None (no scales), [1], [Hk] or [P, S, Hk] f32."""
    _, _, hk, dim = cache.shape
    if cache.dtype == torch.bfloat16:
        x = cache[pages]
    else:
        # Gathered as bytes, then read as FP8 again: indexing works on every dtype.
        x = cache.view(torch.uint8)[pages].view(cache.dtype)
    x = x.float().reshape(-1, hk, dim)[:n]
    if scale is None:
        return x
    if scale.dim() == 3:  # per page slot and KV head
        return x * scale[pages].reshape(-1, hk)[:n].unsqueeze(-1)
    return x * scale.reshape(1, -1, 1)  # one scale, or one per KV head


def reference(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse,
              k_scale=None, v_scale=None):
    batch, hq, dim = q.shape
    _, page, hk, _ = k_cache.shape
    group = hq // hk
    indptr = kv_indptr.tolist()
    last = kv_last_page_len.tolist()
    for b in range(batch):
        start, end = indptr[b], indptr[b + 1]
        if start == end:
            output[b].zero_()
            lse[b].fill_(-math.inf)
            continue
        pages = kv_indices[start:end].long()
        n = (end - start - 1) * page + last[b]
        k = _tokens(k_cache, k_scale, pages, n)  # [n, Hk, D]
        v = _tokens(v_cache, v_scale, pages, n)
        qb = q[b].float().view(hk, group, dim)
        logits = torch.einsum("hgd,nhd->hgn", qb, k) * sm_scale  # [Hk, group, n]
        m = logits.max(dim=-1, keepdim=True).values
        e = torch.exp(logits - m)
        z = e.sum(dim=-1, keepdim=True)
        o = torch.einsum("hgn,nhd->hgd", e / z, v)
        output[b] = o.reshape(hq, dim).to(torch.bfloat16)
        lse[b] = ((m + torch.log(z)) * LOG2E).reshape(hq)


reference.kvfuzz_precision = "f32"
reference.kvfuzz_kv_dtypes = "e4m3,e5m2"
reference.kvfuzz_scale_granularities = ("tensor", "head", "token")


def _never(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse,
           k_scale=None, v_scale=None):
    raise AssertionError("a kernel of fp8_kernels.py that only declares was launched")


def _with(**attributes):
    def fn(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse,
           k_scale=None, v_scale=None):
        _never(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output,
               lse)
    for name, value in attributes.items():
        setattr(fn, "kvfuzz_" + name, value)
    return fn


def _describe_caches(shape):
    """Declines every shape, naming its caches."""
    return False, " ".join("%s=%s" % (key, shape[key])
                           for key in ("k_dtype", "v_dtype", "scale_granularity"))


# e4m3 with one scale per tensor only (torch's names for the dtype are taken too).
e4m3_tensor = _with(kv_dtypes=["float8_e4m3fn"], scale_granularities="tensor")
# Both dtypes and every granularity; supports() declines, naming the caches it was asked about.
describes_caches = _with(kv_dtypes="e5m2, e4m3", scale_granularities="token,head,tensor,none",
                         supports=_describe_caches)
# bf16 named alone is the default.
bf16_only = _with(kv_dtypes="bf16")

dtypes_not_a_string = _with(kv_dtypes=8, scale_granularities="tensor")
dtypes_unknown = _with(kv_dtypes="e4m3,fp4", scale_granularities="tensor")
scales_unknown = _with(kv_dtypes="e4m3", scale_granularities="tensor,channel")
scales_not_a_string = _with(kv_dtypes="e4m3", scale_granularities=[1])
scales_without_fp8 = _with(scale_granularities="head")
fp8_without_scales = _with(kv_dtypes="e5m2")


def no_scale_keywords(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                      output, lse):
    raise AssertionError("no_scale_keywords was launched")


no_scale_keywords.kvfuzz_kv_dtypes = "e4m3"
no_scale_keywords.kvfuzz_scale_granularities = "tensor"
