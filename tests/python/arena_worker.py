"""kvfuzz's Python worker (kernels/python/kvfuzz_worker.py) with its launch replaced, for the tests
of what kvfuzz sends a Python kernel (test_python_worker's fp8_arena_reaches_the_worker): set
KVF_PYTHON_WORKER to this file. It needs no torch (tests/python/stub_torch stands in), so the
message can be checked where no torch with float8 dtypes is installed.

Each launch reads the tensors the worker would build (its launch_plan, over the shared memory,
element by element through their strides) instead of calling the function, and writes into the
folder KVF_TEST_ARENA_DUMP:
  ARG.bin      each argument's elements in row-major order of its shape, as their bytes (k_cache
               of an FP8 cache: one byte each; k_scale and v_scale only when the case has scales)
  tensors.txt  one line per argument: its name, torch dtype and shape
It then writes 0 into every element of output and lse, so the launch succeeds. When the folder
holds a file `poke` naming k_cache or k_scale, it first changes that input's first element (the
first referenced page's slot 0 for k_cache), as a kernel that modifies its inputs would."""

import itertools
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels",
                                "python"))
import kvfuzz_worker as worker  # noqa: E402

BYTES = {"int16": 2, "uint8": 1, "int32": 4, "float32": 4, "bfloat16": 2, "float8_e4m3fn": 1,
         "float8_e5m2": 1}


def positions(region, view):
    """Byte offsets in the arena of a view's elements, row-major."""
    _, offset, count = region
    _, dtype, first, shape, strides = view
    size = BYTES[dtype]
    for index in itertools.product(*(range(n) for n in shape)):
        at = first + sum(i * s for i, s in zip(index, strides))
        if not 0 <= at < count:
            raise worker.KernelError("element %s of a view lies outside its region" % (index,))
        yield offset + at * size


def launch(torch, device, fn, nargs, arena, r):
    folder = os.environ["KVF_TEST_ARENA_DUMP"]
    try:
        regions, tensors = worker.launch_plan(r)
        poke = os.path.join(folder, "poke")
        if os.path.exists(poke):
            with open(poke) as f:
                name = f.read().strip()
            at = next(positions(regions[tensors[name][0]], tensors[name]))
            if name == "k_cache":  # the first referenced page, not page 0
                page = struct.unpack_from("<i", arena, regions["indices"][1])[0]
                at += page * r["kv_stride_page"] * BYTES[tensors[name][1]]
            arena[at] ^= 0x01
        lines = []
        for name, view in tensors.items():
            size = BYTES[view[1]]
            with open(os.path.join(folder, name + ".bin"), "wb") as f:
                f.write(b"".join(arena[at:at + size] for at in positions(regions[view[0]], view)))
            lines.append(" ".join([name, view[1]] + [str(n) for n in view[3]]))
        with open(os.path.join(folder, "tensors.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        for name in ("output", "lse"):
            view = tensors[name]
            for at in positions(regions[view[0]], view):
                arena[at:at + BYTES[view[1]]] = bytes(BYTES[view[1]])
    except (worker.KernelError, KeyError, OSError) as e:
        return worker.STATUS_EXCEPTION, worker.last_line(e)
    return worker.STATUS_OK, ""


worker.launch = launch

if __name__ == "__main__":
    sys.exit(worker.main(sys.argv))
