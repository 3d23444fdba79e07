"""A stand-in for torch, for kvfuzz's tests on machines without it (put tests/python/stub_torch on
PYTHONPATH). It has what kvfuzz_worker.py needs to load a kernel and answer its supports(): a
version and torch.cuda.is_available(). Nothing computes: a launch that builds tensors fails, so
tests that use it never launch (their kernels decline, or their supports() raises first).

It stands for a torch before 2.1, without float8 dtypes, unless KVF_STUB_TORCH_FLOAT8=1 stands it
for a later one: then torch.float8_e4m3fn and torch.float8_e5m2 exist (as names only), so that a
kernel declaring FP8 caches loads."""

import os

__version__ = "0+kvfuzz.stub"

if os.environ.get("KVF_STUB_TORCH_FLOAT8") == "1":
    __version__ = "2.1.0+kvfuzz.stub"
    float8_e4m3fn = "torch.float8_e4m3fn"
    float8_e5m2 = "torch.float8_e5m2"


class cuda:  # noqa: N801 (torch's name)
    @staticmethod
    def is_available():
        return False
