"""kvfuzz's Python kernel worker: runs one Python decode-attention function for kvfuzz.

kvfuzz (kernels/python/: python_kernel.c runs the check, python_process.c starts the worker
and the probe and speaks their protocol, python_run.c sends the requests) starts this script in
one of three modes:

  kvfuzz_worker.py check PYTHON TARGET... imports torch and the target, checks the function's
                                          signature and its kvfuzz_* attributes, prints one line
                                          and exits: 0 and "KVFUZZ-OK<TAB>precision<TAB>supports
                                          <TAB>promises<TAB>description" when usable, 3 and one sentence when
                                          something is missing, 4 when something is wrong.
  kvfuzz_worker.py serve PYTHON SOCK MEMFD TARGET...
                                          the persistent worker: loads the target, answers
                                          "ready", then serves one request per launch (and the
                                          supports questions of the process that started it).
  kvfuzz_worker.py probe PYTHON SOCK TARGET...
                                          serve without shared memory: answers the function's
                                          supports questions only (kvfuzz asks them of every
                                          generated shape, away from the process running it).

PYTHON is the interpreter as kvfuzz names it (for messages). TARGET is `module NAME FUNCTION` (NAME a dotted module importable from the working directory or
PYTHONPATH, or a path to a .py file) or `solution DIR ENTRY_FILE FUNCTION NARGS` (the sources of a
FlashInfer-Bench solution written into DIR; NARGS 8 for a definition without kv_last_page_len,
whose function is called without it).

A module target's function may carry three attributes (docs/python-kernels.md):

  fn.kvfuzz_precision = "bf16-p"   the precision model it implements (absent: f32); at most 63
                                   characters of a-z, 0-9, '+' and '-', parsed by kvfuzz
  fn.kvfuzz_promises = "batch-invariance"
                                   the invariance relations it promises beyond the defaults, or
                                   "-name" to withdraw a default, joined by ',' (absent: the
                                   defaults; docs/invariance.md), parsed by kvfuzz
  fn.kvfuzz_supports = callable    called with the shape (a dict: SHAPE_KEYS, the layout's
                                   STRIDE_KEYS, "kv_layout", "dense", and "device", "cuda" or
                                   "cpu"; shape_dict) before kvfuzz spends a case on it: True
                                   accepts; False, None, a string (the reason) or
                                   (False, "reason") declines, which is not a finding; an
                                   exception is the kernel's error

A FlashInfer-Bench solution's function has neither: its definition fixes its shapes.

The protocol (all little-endian). Requests arrive on the socket SOCK; the tensors live in the
shared memory MEMFD, which kvfuzz lays out, grows and fills: q, the K/V page pool, the index
arrays, and two output regions, each `guard | data | guard` with the data poisoned. q, the pool
and the outputs lie there with the strides the request gives: the case's layout, padding and its
poison included, for a function named by module; dense for a solution. The worker builds torch
tensors over that memory with those strides (on the CPU they are views of it; on a GPU they are
copies, copied back after the call, inputs included, so kvfuzz sees every byte the kernel
changed), calls

  fn(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse)

in FlashInfer-Bench's destination-passing style, and replies with a status and one line. A
supports question (magic KVFS) carries a shape and gets status 0 with "1" (accepted) or "0" and
the reason, or status 1 and the exception's line. A launch asks supports() first too, so that
its exception becomes the launch's error whichever process asked before. It never writes to
stdout: kvfuzz points stdout at stderr anyway, since kernels may print. """

import importlib
import importlib.util
import inspect
import mmap
import os
import socket
import struct
import sys
import traceback

# A launch: flags, arena size, Hq, Hk, D, S, B, pages sent, entries, sm_scale, guard bytes, the
# eight offsets, the shape's num_pages, total_tokens and max_seq_len, then the eight strides of
# the tensors in the arena (STRIDE_KEYS' order, elements).
REQUEST = struct.Struct("<4sIQiiiiiqqfi8Qqqq8q")
REQUEST_MAGIC = b"KVFQ"
# A supports question: Hq, Hk, D, S, B, num_pages, num_entries, total_tokens, max_seq_len,
# sm_scale, then the layout's eight strides (STRIDE_KEYS' order, elements).
SUPPORTS = struct.Struct("<4siiiiiqqqqf8q")
SUPPORTS_MAGIC = b"KVFS"
REPLY = struct.Struct("<4sII")
REPLY_MAGIC = b"KVFA"
STATUS_OK, STATUS_EXCEPTION, STATUS_INTERNAL = 0, 1, 2
EXIT_OK, EXIT_NOTFOUND, EXIT_INVALID = 0, 3, 4
PRECISION_MAX = 63
PRECISION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+-")
PROMISES_MAX = 127
PROMISES_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz-,")
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


def short(value):
    """repr(value) for a message: ASCII, one line, at most 40 characters."""
    text = " ".join(ascii(value).split())
    return text if len(text) <= 40 else text[:37] + "..."


def attributes(fn, shown, kind):
    """The function's declared precision model (None: f32), supports callable (None: every
    shape) and promises (None: the defaults). Checked here, at load, so a wrong attribute is a load error and not a finding. A
    solution's function is not asked: FlashInfer-Bench solutions carry neither."""
    if kind != "module":
        return None, None, None
    try:
        precision = getattr(fn, "kvfuzz_precision", None)
        supports = getattr(fn, "kvfuzz_supports", None)
    except Exception as e:  # an object whose __getattr__ fails
        raise TargetError(EXIT_INVALID, "%s's attributes cannot be read: %s" % (shown, last_line(e)))
    if precision is not None:
        if not isinstance(precision, str):
            raise TargetError(EXIT_INVALID, "%s.kvfuzz_precision is %s of type %s, not a string "
                              "naming a precision model such as \"bf16-p\""
                              % (shown, short(precision), type(precision).__name__))
        if not precision:
            raise TargetError(EXIT_INVALID, "%s.kvfuzz_precision is empty; leave it out to declare "
                              "f32" % shown)
        if len(precision) > PRECISION_MAX:
            raise TargetError(EXIT_INVALID, "%s.kvfuzz_precision is %d characters long, more than "
                              "the %d a precision model may have" % (shown, len(precision), PRECISION_MAX))
        bad = [c for c in precision if c not in PRECISION_CHARS]
        if bad:
            raise TargetError(EXIT_INVALID, "%s.kvfuzz_precision %s has the character %s; a "
                              "precision model is written with a-z, 0-9, '+' and '-'"
                              % (shown, ascii(precision), ascii(bad[0])))
    promises = getattr(fn, "kvfuzz_promises", None)
    if promises is not None:
        if not isinstance(promises, str):
            raise TargetError(EXIT_INVALID, "%s.kvfuzz_promises is %s of type %s, not a string "
                              "naming relations such as \"batch-invariance\""
                              % (shown, short(promises), type(promises).__name__))
        if len(promises) > PROMISES_MAX or any(c not in PROMISES_CHARS for c in promises):
            raise TargetError(EXIT_INVALID, "%s.kvfuzz_promises %s is not relation names of a-z "
                              "and '-' joined by ',', at most %d characters"
                              % (shown, short(promises), PROMISES_MAX))
    if supports is not None and not callable(supports):
        raise TargetError(EXIT_INVALID, "%s.kvfuzz_supports is %s of type %s, not a function of "
                          "the shape" % (shown, short(supports), type(supports).__name__))
    return precision, supports, promises


SHAPE_KEYS = ("num_qo_heads", "num_kv_heads", "head_dim", "page_size", "batch_size", "num_pages",
              "num_entries", "total_tokens", "max_seq_len", "sm_scale")
STRIDE_KEYS = ("q_stride_batch", "q_stride_head", "o_stride_batch", "o_stride_head",
               "lse_stride_batch", "kv_stride_page", "kv_stride_slot", "kv_stride_head")


def shape_dict(values, strides, device):
    """The shape supports() sees: SHAPE_KEYS, the strides (elements), kv_layout ("NHD" when a
    slot's heads lie together, "HND" when a head's slots do), dense (every stride the contiguous
    one) and device."""
    shape = dict(zip(SHAPE_KEYS, values))
    shape.update(zip(STRIDE_KEYS, strides))
    hq, hk, d, s = (shape[k] for k in ("num_qo_heads", "num_kv_heads", "head_dim", "page_size"))
    shape["kv_layout"] = "HND" if shape["kv_stride_head"] > shape["kv_stride_slot"] else "NHD"
    shape["dense"] = tuple(strides) == (hq * d, d, hq * d, d, hq, s * hk * d, hk * d, d)
    shape["device"] = device
    return shape


class KernelError(Exception):
    """The kernel's own failure, reported as its error (a kernel-error finding)."""


def ask_supports(supports, shown, shape):
    """(1, "") when the function's supports() accepts the shape, (0, reason) when it declines.
    Raises KernelError with the exception's line when supports() raises."""
    try:
        answer = supports(dict(shape))
    except Exception as e:  # SystemExit and KeyboardInterrupt end the worker: a crash
        raise KernelError("%s.kvfuzz_supports raised %s" % (shown, last_line(e)))
    why = ""
    if isinstance(answer, tuple) and len(answer) == 2:
        answer, why = answer
        why = "" if why is None else str(why)
    elif isinstance(answer, str):
        answer, why = False, answer  # a string is a refusal that says why
    try:
        yes = bool(answer)
    except Exception as e:  # an object that refuses to be a truth value
        raise KernelError("%s.kvfuzz_supports returned %s, which is neither true nor false (%s)"
                          % (shown, type(answer).__name__, last_line(e)))
    return (1, "") if yes else (0, " ".join(why.split()))


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
        fn, shown, _ = load_function(target)
        precision, supports, promises = attributes(fn, shown, target[0])
    except TargetError as e:
        print(str(e), flush=True)
        return e.code
    # One tagged line, so that whatever the module printed on import cannot pass for it.
    print("KVFUZZ-OK\t%s\t%d\t%s\t%s with torch %s on %s"
          % (precision or "", supports is not None, promises or "", shown, torch.__version__,
             device), flush=True)
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
    """Serves launches (mem_fd: the shared memory) and supports questions; mem_fd None: a probe,
    which answers supports questions only."""
    sock = socket.socket(fileno=sock_fd)
    try:
        torch = import_torch()
        device = pick_device(torch)
        fn, shown, nargs = load_function(target)
        _, supports, _ = attributes(fn, shown, target[0])
    except TargetError as e:
        reply(sock, STATUS_INTERNAL, str(e))
        return 0
    reply(sock, STATUS_OK, "%s on %s" % (shown, device))

    arena, arena_size = None, 0
    while True:
        magic = recv_exact(sock, 4)
        if magic is None:
            return 0  # kvfuzz closed the socket: its kernel was destroyed
        if magic == SUPPORTS_MAGIC:
            body = recv_exact(sock, SUPPORTS.size - 4)
            if body is None:
                return 0
            fields = SUPPORTS.unpack(magic + body)[1:]
            shape = shape_dict(fields[:len(SHAPE_KEYS)], fields[len(SHAPE_KEYS):], device)
            if supports is None:
                reply(sock, STATUS_OK, "1")
                continue
            try:
                yes, why = ask_supports(supports, shown, shape)
            except KernelError as e:
                reply(sock, STATUS_EXCEPTION, str(e))
                continue
            reply(sock, STATUS_OK, "%d%s" % (yes, why))
            continue
        body = recv_exact(sock, REQUEST.size - 4) if magic == REQUEST_MAGIC else None
        if body is None or mem_fd is None:
            reply(sock, STATUS_INTERNAL, "the worker received a malformed request")
            return 1
        fields = REQUEST.unpack(magic + body)
        (magic, _flags, size, hq, hk, d, s, b, p, n_entries, sm_scale, guard,
         off_q, off_k, off_v, off_indptr, off_indices, off_last, off_o, off_lse,
         num_pages, total_tokens, max_seq_len) = fields[:-8]
        strides = fields[-8:]
        (sqb, sqh, sob, soh, slb, skp, sks, skh) = strides
        if supports is not None:
            # Whoever asked before (a probe, this worker) may have met an exception and let the
            # case through: asking again here makes it this launch's error. The answer itself
            # was given already.
            shape = shape_dict((hq, hk, d, s, b, num_pages, n_entries, total_tokens, max_seq_len,
                                sm_scale), strides, device)
            try:
                ask_supports(supports, shown, shape)
            except KernelError as e:
                reply(sock, STATUS_EXCEPTION, str(e))
                continue
        if size != arena_size:
            # The arena grew. Tensors of the last launch may still view the old mapping, so it
            # is dropped rather than closed.
            arena, arena_size = mmap.mmap(mem_fd, size), size

        def view(dtype, offset, count):
            if count == 0:
                return torch.empty(0, dtype=dtype)
            return torch.frombuffer(arena, dtype=dtype, count=count, offset=offset)

        # Each tensor spans its extent in the arena: from its first element to the end of its
        # last, padding included (the C side's run_dims).
        q_ext = (b - 1) * sqb + (hq - 1) * sqh + d if b else 0
        o_ext = (b - 1) * sob + (hq - 1) * soh + d if b else 0
        lse_ext = (b - 1) * slb + hq if b else 0
        g16, g32 = guard // 2, guard // 4
        shm = {
            "q": view(torch.int16, off_q, q_ext),
            "k": view(torch.int16, off_k, p * skp),
            "v": view(torch.int16, off_v, p * skp),
            "indptr": view(torch.int32, off_indptr, b + 1),
            "indices": view(torch.int32, off_indices, n_entries),
            "last": view(torch.int32, off_last, b),
            "o": view(torch.int16, off_o, g16 + o_ext + g16),
            "lse": view(torch.int32, off_lse, g32 + lse_ext + g32),
        }
        if device == "cpu":
            t = shm
        else:
            t = {k: x.to(device) for k, x in shm.items()}
        o_region, lse_region = t["o"], t["lse"]
        q = t["q"].view(torch.bfloat16).as_strided((b, hq, d), (sqb, sqh, 1))
        k_cache = t["k"].view(torch.bfloat16).as_strided((p, s, hk, d), (skp, sks, skh, 1))
        v_cache = t["v"].view(torch.bfloat16).as_strided((p, s, hk, d), (skp, sks, skh, 1))
        output = o_region[g16:g16 + o_ext].view(torch.bfloat16).as_strided((b, hq, d), (sob, soh, 1))
        lse = lse_region[g32:g32 + lse_ext].view(torch.float32).as_strided((b, hq), (slb, 1))
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
    if len(argv) >= 4 and argv[1] == "probe":
        PYTHON = argv[2]
        return serve(int(argv[3]), None, argv[4:])
    sys.stderr.write("kvfuzz_worker.py is started by kvfuzz; see docs/python-kernels.md\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
