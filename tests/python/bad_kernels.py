"""Python kernels that break the contract on purpose, one way each, for the test_python_* tests.
Each takes kvfuzz's nine arguments; all but the broken part follow torch_decode.decode."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "python"))
from torch_decode import decode  # noqa: E402


def raises(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
    raise ValueError("planted failure in the Python kernel")


def segfaults(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output,
              lse):
    os.kill(os.getpid(), signal.SIGSEGV)


def exits(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
    os._exit(7)


def writes_nothing(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                   output, lse):
    pass


def writes_past_output(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                       output, lse):
    decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse)
    # The element right after the view's last element, through its storage: out of bounds for
    # the view whatever its strides (a padded layout's view does not end at offset + numel).
    last = output.storage_offset() + sum((n - 1) * s for n, s in zip(output.shape, output.stride()))
    past = output.as_strided((1,), (1,), last + 1)
    past.fill_(1.0)


def scales_q_in_place(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                      output, lse):
    q.mul_(2.0)
    decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale / 2, output,
           lse)


def two_arguments(q, k_cache):
    pass


not_a_function = 42


def hangs(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):
    while True:
        time.sleep(1)


def _as_dense(t):
    """t's storage read as if t were contiguous from its first element: right only when it is."""
    strides, step = [], 1
    for n in reversed(t.shape):
        strides.insert(0, step)
        step *= n
    return t.as_strided(t.shape, tuple(strides), t.storage_offset())


def ignores_strides(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                    output, lse):
    """Takes every tensor for contiguous: right on dense buffers, wrong on a padded layout."""
    decode(_as_dense(q), _as_dense(k_cache), _as_dense(v_cache), kv_indptr, kv_indices,
           kv_last_page_len, sm_scale, _as_dense(output), _as_dense(lse))
