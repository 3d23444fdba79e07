"""kvfuzz's Python kernel worker: runs one Python decode-attention function for kvfuzz.

kvfuzz (kernels/python/python_kernel.c) starts this script in one of two modes:

  kvfuzz_worker.py check PYTHON TARGET... imports torch and the target, checks the function's
                                          signature, prints one line and exits: 0 and a
                                          description when usable, 3 and one sentence when
                                          something is missing, 4 when something is wrong.
  kvfuzz_worker.py serve PYTHON SOCK MEMFD TARGET...
                                          the persistent worker: loads the target, answers
                                          "ready", then serves one request per launch.

PYTHON is the interpreter as kvfuzz names it (for messages). TARGET is `module NAME FUNCTION` (NAME a dotted module importable from the working directory or
PYTHONPATH, or a path to a .py file) or `solution DIR ENTRY_FILE FUNCTION NARGS` (the sources of a
FlashInfer-Bench solution written into DIR; NARGS 8 for a definition without kv_last_page_len,
whose function is called without it).

The protocol (all little-endian). Requests arrive on the socket SOCK; the tensors live in the
shared memory MEMFD, which kvfuzz lays out, grows and fills: q, the K/V page pool, the index
arrays, and two output regions, each `guard | data | guard` with the data poisoned. The worker
builds torch tensors over that memory (on the CPU they are views of it; on a GPU they are
copies, copied back after the call, inputs included, so kvfuzz sees every byte the kernel
changed), calls

  fn(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse)

in FlashInfer-Bench's destination-passing style, and replies with a status and one line. It
never writes to stdout: kvfuzz points stdout at stderr anyway, since kernels may print. """

import importlib
import importlib.util
import inspect
import mmap
import os
import socket
import struct
import sys
import traceback

REQUEST = struct.Struct("<4sIQiiiiiqqfi8Q")
REQUEST_MAGIC = b"KVFQ"
REPLY = struct.Struct("<4sII")
REPLY_MAGIC = b"KVFA"
STATUS_OK, STATUS_EXCEPTION, STATUS_INTERNAL = 0, 1, 2
EXIT_OK, EXIT_NOTFOUND, EXIT_INVALID = 0, 3, 4
ARGS = "q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse"
ARGS_8 = "q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale, output, lse"

# torch's words for CUDA faults, and the CUDA error names kvfuzz files as crashes (an illegal
# address in a kernel is a crash, whichever language launched it).
CUDA_FAULTS = (
    ("illegal memory access", "cudaErrorIllegalAddress"),
    ("misaligned address", "cudaErrorMisalignedAddress"),
    ("unspecified launch failure", "cudaErrorLaunchFailure"),
    ("illegal instruction", "cudaErrorIllegalInstruction"),
    ("device-side assert", "cudaErrorAssert"),
)


class TargetError(Exception):
    """A target that cannot be used; `code` is the exit status of the check mode."""

    def __init__(self, code, sentence):
        super().__init__(sentence)
        self.code = code


def last_line(exc):
    """The exception as the last line of its traceback: "ValueError: boom"."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    line = lines[-1].strip() if lines else type(exc).__name__
    for words, name in CUDA_FAULTS:
        if words in line and name not in line:
            line += " (" + name + ")"
    return line


PYTHON = sys.executable


def import_torch():
    try:
        import torch  # noqa: F401
    except Exception as e:  # torch missing or broken: say which interpreter looked
        raise TargetError(EXIT_NOTFOUND, "%s cannot import torch (%s)" % (PYTHON, last_line(e)))
    return torch


def load_function(target):
    """Imports the target and returns (function, its display name, its argument count)."""
    kind = target[0]
    nargs = 9
    if kind == "module":
        name, func = target[1], target[2]
        sys.path.insert(0, os.getcwd())
        try:
            if name.endswith(".py"):
                if not os.path.isfile(name):
                    raise TargetError(EXIT_NOTFOUND, "no Python file %s" % name)
                sys.path.insert(0, os.path.dirname(os.path.abspath(name)))
                spec = importlib.util.spec_from_file_location(
                    os.path.splitext(os.path.basename(name))[0], name)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            else:
                module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and (name == e.name or name.startswith(e.name + ".")):
                raise TargetError(EXIT_NOTFOUND, "no Python module %s (%s)" % (name, last_line(e)))
            raise TargetError(EXIT_INVALID, "module %s does not import: %s" % (name, last_line(e)))
        except TargetError:
            raise
        except BaseException as e:
            raise TargetError(EXIT_INVALID, "module %s does not import: %s" % (name, last_line(e)))
        where = "module %s" % name
        if name.endswith(".py"):
            name = os.path.splitext(os.path.basename(name))[0]
    elif kind == "solution":
        folder, entry, func = target[1], target[2], target[3]
        nargs = int(target[4]) if len(target) > 4 else 9
        sys.path.insert(0, folder)
        path = os.path.join(folder, entry)
        modname = os.path.splitext(entry)[0].replace("/", ".")
        try:
            spec = importlib.util.spec_from_file_location(modname, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module
            spec.loader.exec_module(module)
        except BaseException as e:
            raise TargetError(EXIT_INVALID, "solution entry file %s does not import: %s" % (entry, last_line(e)))
        name = entry
        where = "entry file %s" % entry
    else:
        raise TargetError(EXIT_INVALID, "unknown target kind %r" % kind)
    fn = getattr(module, func, None)
    if fn is None:
        raise TargetError(EXIT_NOTFOUND, "%s has no function %s" % (where, func))
    if not callable(fn):
        raise TargetError(EXIT_INVALID, "%s.%s is not a function" % (name, func))
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None  # a builtin or a jitted object: trust it
    if sig is not None:
        try:
            sig.bind(*range(nargs))
        except TypeError:
            raise TargetError(
                EXIT_INVALID, "%s.%s%s cannot take kvfuzz's %s arguments (%s)"
                % (name, func, sig, "nine" if nargs == 9 else "eight", ARGS if nargs == 9 else ARGS_8))
    return fn, "%s.%s" % (name, func), nargs


def pick_device(torch):
    want = os.environ.get("KVF_PYTHON_DEVICE", "")
    if want == "cpu":
        return "cpu"
    if want not in ("", "cuda"):
        raise TargetError(EXIT_INVALID, "KVF_PYTHON_DEVICE is %r, not cpu or cuda" % want)
    if torch.cuda.is_available():
        return "cuda"
    if want == "cuda":
        raise TargetError(EXIT_NOTFOUND, "KVF_PYTHON_DEVICE=cuda but torch sees no CUDA device")
    return "cpu"


def check(target):
    try:
        torch = import_torch()
        device = pick_device(torch)
        _, shown, _ = load_function(target)
    except TargetError as e:
        print(str(e))
        return e.code
    print("%s with torch %s on %s" % (shown, torch.__version__, device))
    return EXIT_OK


def recv_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def reply(sock, status, text):
    body = text.encode("utf-8", "replace")[:1000]
    sock.sendall(REPLY.pack(REPLY_MAGIC, status, len(body)) + body)


def serve(sock_fd, mem_fd, target):
    sock = socket.socket(fileno=sock_fd)
    try:
        torch = import_torch()
        device = pick_device(torch)
        fn, shown, nargs = load_function(target)
    except TargetError as e:
        reply(sock, STATUS_INTERNAL, str(e))
        return 0
    reply(sock, STATUS_OK, "%s on %s" % (shown, device))

    arena, arena_size = None, 0
    while True:
        head = recv_exact(sock, REQUEST.size)
        if head is None:
            return 0  # kvfuzz closed the socket: its kernel was destroyed
        (magic, _flags, size, hq, hk, d, s, b, p, n_entries, sm_scale, guard,
         off_q, off_k, off_v, off_indptr, off_indices, off_last, off_o, off_lse) = REQUEST.unpack(head)
        if magic != REQUEST_MAGIC:
            reply(sock, STATUS_INTERNAL, "the worker received a malformed request")
            return 1
        if size != arena_size:
            # The arena grew. Tensors of the last launch may still view the old mapping, so it
            # is dropped rather than closed.
            arena, arena_size = mmap.mmap(mem_fd, size), size

        def view(dtype, offset, count):
            if count == 0:
                return torch.empty(0, dtype=dtype)
            return torch.frombuffer(arena, dtype=dtype, count=count, offset=offset)

        page = s * hk * d
        g16, g32 = guard // 2, guard // 4
        shm = {
            "q": view(torch.int16, off_q, b * hq * d),
            "k": view(torch.int16, off_k, p * page),
            "v": view(torch.int16, off_v, p * page),
            "indptr": view(torch.int32, off_indptr, b + 1),
            "indices": view(torch.int32, off_indices, n_entries),
            "last": view(torch.int32, off_last, b),
            "o": view(torch.int16, off_o, g16 + b * hq * d + g16),
            "lse": view(torch.int32, off_lse, g32 + b * hq + g32),
        }
        if device == "cpu":
            t = shm
        else:
            t = {k: x.to(device) for k, x in shm.items()}
        o_region, lse_region = t["o"], t["lse"]
        q = t["q"].view(torch.bfloat16).view(b, hq, d)
        k_cache = t["k"].view(torch.bfloat16).view(p, s, hk, d)
        v_cache = t["v"].view(torch.bfloat16).view(p, s, hk, d)
        output = o_region[g16:g16 + b * hq * d].view(torch.bfloat16).view(b, hq, d)
        lse = lse_region[g32:g32 + b * hq].view(torch.float32).view(b, hq)
        try:
            if nargs == 9:
                fn(q, k_cache, v_cache, t["indptr"], t["indices"], t["last"], float(sm_scale),
                   output, lse)
            else:  # page size 1: every last page holds its one token
                fn(q, k_cache, v_cache, t["indptr"], t["indices"], float(sm_scale), output, lse)
            if device != "cpu":
                torch.cuda.synchronize()
        except Exception as e:  # SystemExit and KeyboardInterrupt end the worker: a crash
            reply(sock, STATUS_EXCEPTION, last_line(e))
            continue
        if device != "cpu":
            for k, x in t.items():
                shm[k].copy_(x.cpu())
        reply(sock, STATUS_OK, "")


def main(argv):
    global PYTHON
    if len(argv) >= 3 and argv[1] == "check":
        PYTHON = argv[2]
        return check(argv[3:])
    if len(argv) >= 5 and argv[1] == "serve":
        PYTHON = argv[2]
        return serve(int(argv[3]), int(argv[4]), argv[5:])
    sys.stderr.write("kvfuzz_worker.py is started by kvfuzz; see docs/python-kernels.md\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
