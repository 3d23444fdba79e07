"""Paged GQA decode through PyTorch's three fused attention backends (GPU only), in
FlashInfer-Bench's destination-passing style: `flash` (FlashAttention-2), `efficient` (the
CUTLASS memory-efficient kernel) and `cudnn` (cuDNN's fused attention), each called through its
aten op, so that kvfuzz judges the backend itself and not SDPA's choice among them.

    kvfuzz fuzz --kernel python:examples/python/sdpa_decode.py:flash --time 60
    kvfuzz fuzz --kernel python:examples/python/sdpa_decode.py:efficient --time 60
    kvfuzz fuzz --kernel python:examples/python/sdpa_decode.py:cudnn --time 60

Same contract as torch_decode.py. The backends take dense tensors, so each sequence's pages are
gathered into contiguous K and V holding its tokens only (the poisoned slots past its last token
are never read), the KV heads are repeated to the query heads (query head h reads KV head
h // (Hq // Hk)), and the query is one token. Sequences of equal length go to the backend as one
batch. The op's output is written as bf16 and its logsumexp, a natural log, is converted to base
2. An empty sequence gives output 0 and lse -inf without calling the backend.

Precision model bf16-p: all three compute the logits and the softmax's exponentials in f32,
round the weights P to bf16 for the P.V tensor-core product (accumulated in f32), and divide by
the sum of the unrounded f32 weights.

The aten ops, as torch 2.11 declares them (query, key, value: [batch, heads, tokens, head_dim],
in memory [batch, tokens, heads, head_dim], which is how they are built here and the layout cuDNN
requires):

  _scaled_dot_product_flash_attention(query, key, value, dropout_p=0., is_causal=False,
      return_debug_mask=False, *, scale=None) -> (output, logsumexp, cum_seq_q, cum_seq_k,
      max_q, max_k, philox_seed, philox_offset, debug_attn_mask)
  _scaled_dot_product_efficient_attention(query, key, value, attn_bias, compute_log_sumexp,
      dropout_p=0., is_causal=False, *, scale=None) -> (output, log_sumexp, philox_seed,
      philox_offset)
  _scaled_dot_product_cudnn_attention(query, key, value, attn_bias, compute_log_sumexp,
      dropout_p=0., is_causal=False, return_debug_mask=False, *, scale=None) -> (output,
      logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset,
      debug_attn_mask)

The logsumexp is [batch, heads, tokens] for flash, padded to a multiple of 32 tokens for
efficient, and may carry a trailing 1 for cuDNN: token 0 of it is the one query's.

Each function's kvfuzz_supports declines what its backend cannot run, with the reason: tensors
on the CPU (no CUDA device, or KVF_PYTHON_DEVICE=cpu), a head dim that is not a multiple of 8
(all three), over 256 (flash) or, for cuDNN, over 256 on sm90/sm100 with a cuDNN newer than
9.22 and over 128 elsewhere (torch's own rule; cuDNN 9.19 on an H100 ran 192 and 256 through
the op, unchecked, and is held to 128),
a GPU older than sm80 (flash; bf16 for efficient), a cuDNN older than 9.0 (no queries of one
token), more query heads than a CUDA grid dimension holds (65535). Batches are split at 65535
sequences for the same reason. cuDNN does not run key/value sequences of one token: those rows
are computed here, exactly (P = 1, so o = v and lse = the scaled logit), without cuDNN.

Found with them (H100, torch 2.11.0+cu130): `flash` writes NaN when sm_scale is negative and
the sequence's length is not a multiple of 128 (FlashAttention-2 masks the last block's missing
keys with -inf before it scales, and a negative scale turns them into +inf); kvfuzz files it as
a nonfinite finding within seconds, and `efficient` and `cudnn` pass the same cases. Its
kvfuzz_supports leaves negative scales in on purpose: the backend runs them, wrongly.
"""

import functools
import math
import os

try:
    import torch
except ImportError as e:
    raise ImportError("examples/python/sdpa_decode.py needs torch (2.11 or newer, built with "
                      "CUDA): %s" % e) from e

LOG2E = 1.0 / math.log(2.0)
MAX_GRID = 65535  # CUDA's limit on a grid's y and z dimensions, which the backends give to
                  # batch and heads


def _decode(attend, q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
            output, lse):
    """Runs attend(q, k, v, scale) -> (o, logsumexp) over every group of equal-length
    sequences and writes output and lse."""
    batch, hq, dim = q.shape
    _, page, hk, _ = k_cache.shape
    if batch == 0:
        return
    if not q.is_cuda:
        raise RuntimeError("the SDPA backends run on a CUDA device, and the tensors are on the CPU")
    group = hq // hk
    indptr = kv_indptr.tolist()
    last = kv_last_page_len.tolist()
    by_length = {}
    for b in range(batch):
        pages = indptr[b + 1] - indptr[b]
        by_length.setdefault((pages - 1) * page + last[b] if pages else 0, []).append(b)
    indices = kv_indices.long()
    for n, rows in by_length.items():
        for at in range(0, len(rows), MAX_GRID):
            chunk = rows[at:at + MAX_GRID]
            g = len(chunk)
            idx = torch.tensor(chunk, dtype=torch.long, device=q.device)
            if n == 0:
                output[idx] = 0
                lse[idx] = -math.inf
                continue
            pages = -(-n // page)  # every sequence of n tokens has this many pages
            starts = torch.tensor([indptr[b] for b in chunk], dtype=torch.long, device=q.device)
            table = indices[starts[:, None] + torch.arange(pages, device=q.device)]  # [g, pages]
            # [g, n, Hq, D], contiguous: the first n slots of the sequence's pages, KV heads
            # repeated so that query head h meets KV head h // group.
            k = k_cache[table].reshape(g, pages * page, hk, dim)[:, :n]
            v = v_cache[table].reshape(g, pages * page, hk, dim)[:, :n]
            k = k.repeat_interleave(group, dim=2).contiguous()
            v = v.repeat_interleave(group, dim=2).contiguous()
            qg = q[idx].unsqueeze(1).contiguous()  # [g, 1, Hq, D]
            o, lse_e = attend(qg.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), sm_scale)
            output[idx] = o[:, :, 0, :].to(torch.bfloat16)
            lse[idx] = lse_e.reshape(g, hq, -1)[:, :, 0].float() * LOG2E


def _flash(q, k, v, scale):
    out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False,
                                                             scale=scale)
    return out[0], out[1]


def _efficient(q, k, v, scale):
    out = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, False,
                                                                 scale=scale)
    return out[0], out[1]


def _cudnn(q, k, v, scale):
    if k.shape[2] == 1:
        # One key: its weight is exactly 1, so o = v and the logsumexp is the scaled logit (in
        # f32, from exact products of bf16 values).
        logit = (q.float() * k.float()).sum(-1) * scale  # [g, Hq, 1]
        return v, logit
    out = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, False,
                                                             False, scale=scale)
    return out[0], out[1]


def flash(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
    _decode(_flash, q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
            output, lse)


def efficient(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output,
              lse):
    _decode(_efficient, q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
            output, lse)


def cudnn(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
    _decode(_cudnn, q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
            output, lse)


# ---- which shapes each backend runs ----------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _capability():
    return torch.cuda.get_device_capability()


def _has_op(name):
    return hasattr(torch.ops.aten, name)


def _common(shape, backend, op):
    """The reason the backend cannot run the shape on any account, or None."""
    if shape.get("device", "cuda" if torch.cuda.is_available() else "cpu") != "cuda":
        where = ("KVF_PYTHON_DEVICE=cpu" if os.environ.get("KVF_PYTHON_DEVICE") == "cpu"
                 else "torch sees no CUDA device")
        return "%s runs on a CUDA device, and the tensors are on the CPU (%s)" % (backend, where)
    if not _has_op(op):
        return "torch %s has no aten.%s" % (torch.__version__, op)
    d = shape["head_dim"]
    if d % 8:
        return "%s needs a head dim that is a multiple of 8, not %d" % (backend, d)
    if shape["num_qo_heads"] > MAX_GRID:
        return "%s takes at most %d heads, not %d" % (backend, MAX_GRID, shape["num_qo_heads"])
    return None


def _supports_flash(shape):
    why = _common(shape, "flash attention", "_scaled_dot_product_flash_attention")
    if why:
        return False, why
    available = getattr(torch.backends.cuda, "is_flash_attention_available", lambda: True)
    if not available():
        return False, "this torch was built without flash attention"
    if shape["head_dim"] > 256:
        return False, "flash attention takes head dims up to 256, not %d" % shape["head_dim"]
    major, minor = _capability()
    if major < 8:
        return False, "flash attention needs sm80 or newer, not sm%d%d" % (major, minor)
    return True


def _supports_efficient(shape):
    why = _common(shape, "memory-efficient attention", "_scaled_dot_product_efficient_attention")
    if why:
        return False, why
    major, minor = _capability()
    if major < 8:
        return False, "memory-efficient attention in bf16 needs sm80 or newer, not sm%d%d" % (
            major, minor)
    return True


def _supports_cudnn(shape):
    why = _common(shape, "cuDNN attention", "_scaled_dot_product_cudnn_attention")
    if why:
        return False, why
    if not torch.backends.cudnn.is_available():
        return False, "this torch has no cuDNN"
    version = torch.backends.cudnn.version() or 0
    if version < 90000:
        return False, "cuDNN attention needs cuDNN 9.0 or newer for one-token queries, not %d" % (
            version)
    # torch's own rule: 256 on sm90 and sm100 with cuDNN past 9.22, else 128. (torch also
    # needs a cuDNN frontend new enough for 256, compiled in; torch 2.11's has it.)
    major, minor = _capability()
    wide = ((major, minor) == (9, 0) or major == 10) and version > 92200
    limit = 256 if wide else 128
    if shape["head_dim"] > limit:
        return False, "cuDNN attention takes head dims up to %d on sm%d%d with cuDNN %d, not %d" % (
            limit, major, minor, version, shape["head_dim"])
    return True


for _fn, _supports in ((flash, _supports_flash), (efficient, _supports_efficient),
                       (cudnn, _supports_cudnn)):
    _fn.kvfuzz_precision = "bf16-p"
    _fn.kvfuzz_supports = _supports
del _fn, _supports
