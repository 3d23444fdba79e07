"""A small Triton paged GQA decode kernel (GPU only), in FlashInfer-Bench's
destination-passing style.

    kvfuzz fuzz --kernel python:examples/python/triton_decode.py:decode --time 60

Same contract as torch_decode.py. One program per (sequence, query head) walks the sequence in
blocks of BLOCK_N tokens with an online softmax in fp32 (running maximum, rescaled sum and
accumulator), masks the slots past the last token so their NaN poison is never loaded, and
rounds to bf16 once at the end: it declares the precision model f32. An empty sequence gives
output 0 and lse -inf. Its kvfuzz_supports declines every shape where kvfuzz puts the tensors on
the CPU (no GPU, or KVF_PYTHON_DEVICE=cpu), so a CPU-only machine finds no shape to run rather
than an error per case."""

import math
import os

import torch
import triton
import triton.language as tl

LOG2E = 1.0 / math.log(2.0)


@triton.jit
def _decode_kernel(Q, K, V, Indptr, Indices, Last, O, Lse, sm_scale,
                   stride_qb, stride_qh, stride_kp, stride_ks, stride_kh,
                   stride_ob, stride_oh, stride_lb,
                   GROUP: tl.constexpr, PAGE: tl.constexpr, D: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, LOG2E_C: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    g = h // GROUP
    start = tl.load(Indptr + b)
    npages = tl.load(Indptr + b + 1) - start
    last = tl.load(Last + b)
    n = tl.where(npages > 0, (npages - 1) * PAGE + last, 0)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    q = tl.load(Q + b * stride_qb + h * stride_qh + d, mask=dmask, other=0.0).to(tl.float32)
    m = tl.zeros([], dtype=tl.float32) - float("inf")
    z = tl.zeros([], dtype=tl.float32)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for t0 in range(0, n, BLOCK_N):
        t = t0 + tl.arange(0, BLOCK_N)
        tmask = t < n
        page = tl.load(Indices + start + t // PAGE, mask=tmask, other=0).to(tl.int64)
        off = page * stride_kp + (t % PAGE).to(tl.int64) * stride_ks + g * stride_kh
        kvmask = tmask[:, None] & dmask[None, :]
        k = tl.load(K + off[:, None] + d[None, :], mask=kvmask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * sm_scale
        s = tl.where(tmask, s, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(V + off[:, None] + d[None, :], mask=kvmask, other=0.0).to(tl.float32)
        z = z * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    o = tl.where(n > 0, acc / z, 0.0)
    tl.store(O + b * stride_ob + h * stride_oh + d, o.to(tl.bfloat16), mask=dmask)
    lse = tl.where(n > 0, (m + tl.log(z)) * LOG2E_C, -float("inf"))
    tl.store(Lse + b * stride_lb + h, lse)


def decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
    batch, hq, dim = q.shape
    _, page, hk, _ = k_cache.shape
    if batch == 0:
        return
    if not q.is_cuda:
        raise RuntimeError("triton_decode runs on a GPU only")
    block_d = triton.next_power_of_2(dim)
    block_n = 64 if block_d <= 128 else 32
    _decode_kernel[(batch, hq)](
        q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, output, lse, sm_scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        output.stride(0), output.stride(1), lse.stride(0),
        GROUP=hq // hk, PAGE=page, D=dim, BLOCK_D=block_d, BLOCK_N=block_n, LOG2E_C=LOG2E)


def _supports(shape):
    if shape.get("device", "cuda" if torch.cuda.is_available() else "cpu") == "cuda":
        return True
    where = ("KVF_PYTHON_DEVICE=cpu" if os.environ.get("KVF_PYTHON_DEVICE") == "cpu"
             else "torch sees no CUDA device")
    return False, "triton_decode runs on a GPU only, and the tensors are on the CPU (%s)" % where


decode.kvfuzz_precision = "f32"
decode.kvfuzz_supports = _supports
