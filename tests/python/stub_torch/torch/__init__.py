"""A stand-in for torch, for kvfuzz's tests on machines without it (put tests/python/stub_torch on
PYTHONPATH). It has what kvfuzz_worker.py needs to load a kernel and answer its supports(): a
version and torch.cuda.is_available(). Nothing computes: a launch that builds tensors fails, so
tests that use it never launch (their kernels decline, or their supports() raises first)."""

__version__ = "0+kvfuzz.stub"


class cuda:  # noqa: N801 (torch's name)
    @staticmethod
    def is_available():
        return False
