"""A pure-torch reference paged GQA decode, in FlashInfer-Bench's destination-passing style.

    kvfuzz fuzz --kernel python:examples/python/torch_decode.py:decode --time 60

Shapes: q [B, Hq, D] bf16; k_cache, v_cache [P, S, Hk, D] bf16; kv_indptr [B+1], kv_indices
[kv_indptr[B]], kv_last_page_len [B] int32; output [B, Hq, D] bf16 and lse [B, Hq] f32, written.
Sequence b owns pages kv_indices[kv_indptr[b]:kv_indptr[b+1]]; with n pages it has
(n - 1) * S + kv_last_page_len[b] tokens. Query head h reads KV head h // (Hq // Hk).

Numerics are FlashInfer-Bench's reference: fp32 logits times sm_scale, softmax with the maximum
subtracted, the weights normalised before P.V, one rounding to bf16 at the end, lse in base 2.
An empty sequence gives output 0 and lse -inf. Only tokens inside a sequence are read: the
slots past its last token hold NaN in kvfuzz's pools. Runs on the CPU or a GPU. Every step is in
f32 with one rounding at the end: it declares the precision model f32."""

import math

import torch

LOG2E = 1.0 / math.log(2.0)


def decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
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
        k = k_cache[pages].reshape(-1, hk, dim)[:n].float()  # [n, Hk, D]
        v = v_cache[pages].reshape(-1, hk, dim)[:n].float()
        qb = q[b].float().view(hk, group, dim)
        logits = torch.einsum("hgd,nhd->hgn", qb, k) * sm_scale  # [Hk, group, n]
        m = logits.max(dim=-1, keepdim=True).values
        e = torch.exp(logits - m)
        z = e.sum(dim=-1, keepdim=True)
        o = torch.einsum("hgn,nhd->hgd", e / z, v)
        output[b] = o.reshape(hq, dim).to(torch.bfloat16)
        lse[b] = ((m + torch.log(z)) * LOG2E).reshape(hq)


decode.kvfuzz_precision = "f32"
