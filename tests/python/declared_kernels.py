"""Python kernels that declare a precision model (fn.kvfuzz_precision) or the shapes they handle
(fn.kvfuzz_supports), well and badly, for the test_python_* tests and python_declared_cli_test.sh.
Those that run compute with torch_decode.decode; the rest are never launched, so the module loads
under tests/python/stub_torch (no torch needed) as well as under torch."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "python"))
from torch_decode import decode  # noqa: E402


def precise(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
    decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse)


precise.kvfuzz_precision = "bf16-partials+ftz"
precise.kvfuzz_promises = "batch-invariance,-v-scaling"


def _small_head_dims(shape):
    d = shape["head_dim"]
    if d % 8:
        return False, "head_dim %d is not a multiple of 8" % d
    if d > 128:
        return "head_dim %d is over 128" % d  # a string: declined, and why
    return True


def small_head_dims(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output,
                    lse):
    """torch_decode.decode that takes only head dims of at most 128 that are multiples of 8."""
    decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse)


small_head_dims.kvfuzz_supports = _small_head_dims


def declines_all(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output,
                 lse):
    raise AssertionError("declines_all was launched on a shape its supports() declined")


declines_all.kvfuzz_supports = lambda shape: "this kernel declines every shape"


LAYOUT_KEYS = ("q_stride_batch", "q_stride_head", "o_stride_batch", "o_stride_head",
               "lse_stride_batch", "kv_stride_page", "kv_stride_slot", "kv_stride_head",
               "kv_layout", "dense")


def _describe_shape(shape):
    """The shape without its layout (a reason has room for one of the two)."""
    return False, " ".join("%s=%s" % (key, shape[key]) for key in sorted(shape)
                           if key not in LAYOUT_KEYS)


def _describe_layout(shape):
    return False, " ".join("%s=%s" % (key, shape[key]) for key in LAYOUT_KEYS)


def declines_with_shape(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                        output, lse):
    """Declines every shape, naming what supports() was given."""
    raise AssertionError("declines_with_shape was launched on a shape its supports() declined")


declines_with_shape.kvfuzz_supports = _describe_shape


def declines_with_layout(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                         output, lse):
    """Declines every shape, naming the layout supports() was given."""
    raise AssertionError("declines_with_layout was launched on a shape its supports() declined")


declines_with_layout.kvfuzz_supports = _describe_layout


def _raise(shape):
    raise ValueError("planted failure in supports")


def supports_raises(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output,
                    lse):
    decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse)


supports_raises.kvfuzz_supports = _raise


def _with(attr, value):
    def fn(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
        pass
    setattr(fn, attr, value)
    return fn


precision_not_a_string = _with("kvfuzz_precision", 16)
precision_too_long = _with("kvfuzz_precision", "bf16-p" + "+ftz" * 15)  # 66 characters
precision_bad_character = _with("kvfuzz_precision", "BF16_P")
precision_empty = _with("kvfuzz_precision", "")
supports_not_callable = _with("kvfuzz_supports", 3)
promises_not_a_string = _with("kvfuzz_promises", ["batch-invariance"])
promises_bad_character = _with("kvfuzz_promises", "Batch")
promises_unknown = _with("kvfuzz_promises", "batch-invariance,graph-safety")
