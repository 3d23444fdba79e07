"""kvfuzz's Python kernel worker: runs one Python decode-attention function for kvfuzz.

kvfuzz (kernels/python/: python_kernel.c runs the check, python_process.c starts the worker
and the probe and speaks their protocol, python_run.c sends the requests) starts this script in
one of three modes:

  kvfuzz_worker.py check PYTHON TARGET... imports torch and the target, checks the function's
                                          signature and its kvfuzz_* attributes, prints one line
                                          and exits: 0 and "KVFUZZ-OK<TAB>precision<TAB>supports
                                          <TAB>promises<TAB>kv_dtypes<TAB>scale_granularities<TAB>
                                          description" when usable, 3 and one sentence when
                                          something is missing, 4 when something is wrong.
  kvfuzz_worker.py serve PYTHON SOCK MEMFD TARGET...
                                          the persistent worker: loads the target, answers
                                          "ready", then serves one request per launch (and the
                                          supports questions of the process that started it).
  kvfuzz_worker.py probe PYTHON SOCK TARGET...
                                          serve without shared memory: answers the function's
                                          supports questions only (kvfuzz asks them of every
                                          generated shape, away from the process running it).

PYTHON is the interpreter as kvfuzz names it (for messages). TARGET is `module NAME FUNCTION`
(NAME a dotted module importable from the working directory or PYTHONPATH, or a path to a .py
file) or `solution DIR ENTRY_FILE FUNCTION NARGS [KV_DTYPE]` (the sources of a FlashInfer-Bench
solution written into DIR; NARGS 8 for a definition without kv_last_page_len, whose function
is called without it; 10 or 11 for a definition with FP8 caches of KV_DTYPE, e4m3 or e5m2,
whose function takes k_scale and v_scale after sm_scale, in the definition's order).

A module target's function may carry these attributes (docs/python-kernels.md):

  fn.kvfuzz_precision = "bf16-p"   the precision model it implements (absent: f32); at most 63
                                   characters of a-z, 0-9, '+' and '-', parsed by kvfuzz
  fn.kvfuzz_promises = "batch-invariance"
                                   the invariance relations it promises beyond the defaults, or
                                   "-name" to withdraw a default, joined by ',' (absent: the
                                   defaults; docs/invariance.md), parsed by kvfuzz
  fn.kvfuzz_supports = callable    called with the shape (a dict: SHAPE_KEYS, the layout's
                                   STRIDE_KEYS, "kv_layout", "dense", the caches' "k_dtype",
                                   "v_dtype" and "scale_granularity", and "device", "cuda" or
                                   "cpu"; shape_dict) before kvfuzz spends a case on it: True
                                   accepts; False, None, a string (the reason) or
                                   (False, "reason") declines, which is not a finding; an
                                   exception is the kernel's error
  fn.kvfuzz_kv_dtypes = "e4m3,e5m2"
  fn.kvfuzz_scale_granularities = "tensor,head,token"
                                   the FP8 caches it reads and the scales it takes (absent: bf16
                                   caches only; KV_DTYPES, SCALE_GRANULARITIES), a string joined
                                   by ',' or a list of names, checked here against this torch (FP8
                                   tensors need torch 2.1) and parsed again by kvfuzz

A FlashInfer-Bench solution's function has none of them: its definition fixes its shapes.

The protocol (all little-endian). Requests arrive on the socket SOCK; the tensors live in the
shared memory MEMFD, which kvfuzz lays out, grows and fills: q, the K/V page pool, the index
arrays, two output regions, each `guard | data | guard` with the data poisoned, and for scaled
FP8 caches the two scale arrays (an FP8 cache is its bytes, one per element). q, the pool and
the outputs lie there with the strides the request gives: the case's layout, padding and its
poison included, for a function named by module; dense for a solution. The worker builds torch
tensors over that memory with those strides (on the CPU they are views of it; on a GPU they are
copies, copied back after the call, inputs included, so kvfuzz sees every byte the kernel
changed), calls

  fn(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse)

in FlashInfer-Bench's destination-passing style (with k_scale= and v_scale= keywords when the
case has scales: launch_plan says what each tensor is), and replies with a status and one line. A
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
# eight offsets, the shape's num_pages, total_tokens and max_seq_len, the eight strides of the
# tensors in the arena (STRIDE_KEYS' order, elements), then the caches' dtypes (KV_DTYPES' codes),
# the scale granularity (SCALE_GRANULARITIES' code), the offsets of k_scale and v_scale and the
# scales in each (0 without scales).
REQUEST = struct.Struct("<4sIQiiiiiqqfi8Qqqq8qiiiQQq")
REQUEST_MAGIC = b"KVFQ"
# A supports question: Hq, Hk, D, S, B, num_pages, num_entries, total_tokens, max_seq_len,
# sm_scale, the layout's eight strides (STRIDE_KEYS' order, elements), then k_dtype, v_dtype and
# scale_granularity (codes).
SUPPORTS = struct.Struct("<4siiiiiqqqqf8qiii")
SUPPORTS_MAGIC = b"KVFS"
REPLY = struct.Struct("<4sII")
REPLY_MAGIC = b"KVFA"
STATUS_OK, STATUS_EXCEPTION, STATUS_INTERNAL = 0, 1, 2
EXIT_OK, EXIT_NOTFOUND, EXIT_INVALID = 0, 3, 4
PRECISION_MAX = 63
PRECISION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+-")
PROMISES_MAX = 127
PROMISES_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz-,")
# The caches' element types and the scales' granularities, by their codes in kvfuzz (kvfuzz/fp8.h,
# kvfuzz/kv_quant.h), and the names a declaration may use for them.
KV_DTYPES = ("bf16", "e4m3", "e5m2")
KV_DTYPE_NAMES = {"bf16": "bf16", "bfloat16": "bf16", "e4m3": "e4m3", "float8_e4m3fn": "e4m3",
                  "e5m2": "e5m2", "float8_e5m2": "e5m2"}
TORCH_FP8 = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
SCALE_GRANULARITIES = ("none", "tensor", "head", "token")
ARGS = "q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse"
ARGS_8 = "q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale, output, lse"


def solution_args(nargs):
    """The arguments a solution's function takes, as text: its definition's inputs and outputs in
    order (FP8 definitions put k_scale and v_scale after sm_scale)."""
    args = ARGS if nargs in (9, 11) else ARGS_8
    if nargs >= 10:
        args = args.replace("sm_scale,", "sm_scale, k_scale, v_scale,")
    return args

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
        if nargs not in (8, 9, 10, 11) or (nargs >= 10) != (len(target) > 5):
            raise TargetError(EXIT_INVALID, "solution target with %d arguments and %s" % (
                nargs, "a KV dtype" if len(target) > 5 else "no KV dtype"))
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
    sig = signature_of(fn)
    if sig is not None:
        try:
            sig.bind(*range(nargs))
        except TypeError:
            raise TargetError(
                EXIT_INVALID, "%s.%s%s cannot take kvfuzz's %s arguments (%s)"
                % (name, func, sig, {8: "eight", 9: "nine", 10: "ten", 11: "eleven"}[nargs],
                   solution_args(nargs)))
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


def declared_names(fn, shown, attr, known, order, what, whats):
    """The names an attribute declares (a string joined by ',' or a list of strings), as
    `known` maps them, in `order`'s order; () when the attribute is absent. `what` and `whats`
    name one and several, for messages."""
    value = getattr(fn, attr, None)
    if value is None:
        return ()
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",")] if value.strip() else []
    elif isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        items = list(value)
    else:
        raise TargetError(EXIT_INVALID, "%s.%s is %s of type %s, not a string naming %s such as "
                          "\"%s\"" % (shown, attr, short(value), type(value).__name__, whats,
                                      ",".join(order[1:])))
    names = set()
    for item in items:
        if item not in known:
            raise TargetError(EXIT_INVALID, "%s.%s names %s, which is not a %s (%s)"
                              % (shown, attr, short(item), what, ", ".join(order)))
        names.add(known[item])
    return tuple(name for name in order if name in names)


def signature_of(fn):
    """The function's signature, or None for a builtin or a jitted object (then trusted)."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def need_float8(torch, d, who):
    """Refuses FP8 dtype d under a torch without its float8 dtype (before 2.1): one sentence,
    `who` saying what takes the FP8 caches."""
    if getattr(torch, TORCH_FP8[d], None) is None:
        raise TargetError(EXIT_NOTFOUND, "%s but torch %s under %s has no torch.%s, as FP8 "
                          "tensors need torch 2.1 or later"
                          % (who, torch.__version__, PYTHON, TORCH_FP8[d]))


def declared_caches(fn, shown, target, nargs, torch):
    """The cache dtypes and scale granularities the function declares, each a tuple of names in
    code order (() for bf16 caches only, as every solution's function). Checked at load, against
    this torch and the function's signature, so that a kernel kvfuzz would send FP8 caches to can
    take them: FP8 dtypes need scales to be drawn (kvfuzz's campaigns draw FP8 caches with scales
    for kernels that take both), scales need FP8 dtypes to dequantize, FP8 tensors need torch's
    float8 dtypes (torch 2.1 and later), and scales arrive as the keywords k_scale and v_scale."""
    if target[0] != "module":
        # A solution takes its definition's caches: FP8 ones (NARGS 10 or 11, the dtype in the
        # target) with one scale each, passed in the definition's order.
        if nargs < 10:
            return (), ()
        d = KV_DTYPE_NAMES.get(target[5])
        if d not in TORCH_FP8:
            raise TargetError(EXIT_INVALID, "solution target with KV dtype %s" % short(target[5]))
        need_float8(torch, d, "%s's definition has %s caches" % (shown, d))
        return ("bf16", d), ("none", "tensor")
    dtypes = declared_names(fn, shown, "kvfuzz_kv_dtypes", KV_DTYPE_NAMES, KV_DTYPES,
                            "KV cache dtype", "KV cache dtypes")
    grans = declared_names(fn, shown, "kvfuzz_scale_granularities",
                           dict((g, g) for g in SCALE_GRANULARITIES), SCALE_GRANULARITIES,
                           "scale granularity", "scale granularities")
    fp8 = [d for d in dtypes if d in TORCH_FP8]
    scaled = [g for g in grans if g != "none"]
    if scaled and not fp8:
        raise TargetError(EXIT_INVALID, "%s.kvfuzz_scale_granularities names %s scales but "
                          "%s.kvfuzz_kv_dtypes names no FP8 dtype (e4m3, e5m2), and scales "
                          "dequantize FP8 caches only" % (shown, ",".join(scaled), shown))
    if fp8 and not scaled:
        raise TargetError(EXIT_INVALID, "%s.kvfuzz_kv_dtypes names %s caches but "
                          "%s.kvfuzz_scale_granularities names no scales (tensor, head, token), "
                          "and kvfuzz draws FP8 caches only for kernels that take scales"
                          % (shown, ",".join(fp8), shown))
    for d in fp8:
        need_float8(torch, d, "%s declares %s caches (kvfuzz_kv_dtypes)" % (shown, d))
    if scaled:
        sig = signature_of(fn)
        if sig is not None:
            try:
                sig.bind(*range(nargs), k_scale=None, v_scale=None)
            except TypeError:
                raise TargetError(EXIT_INVALID, "%s%s takes scaled FP8 caches "
                                  "(kvfuzz_scale_granularities) but not the keyword arguments "
                                  "k_scale and v_scale that carry the scales" % (shown, sig))
    return dtypes, grans


SHAPE_KEYS = ("num_qo_heads", "num_kv_heads", "head_dim", "page_size", "batch_size", "num_pages",
              "num_entries", "total_tokens", "max_seq_len", "sm_scale")
STRIDE_KEYS = ("q_stride_batch", "q_stride_head", "o_stride_batch", "o_stride_head",
               "lse_stride_batch", "kv_stride_page", "kv_stride_slot", "kv_stride_head")


def code_name(names, code):
    return names[code] if 0 <= code < len(names) else "?"


def shape_dict(values, strides, quant, device):
    """The shape supports() sees: SHAPE_KEYS, the strides (elements), kv_layout ("NHD" when a
    slot's heads lie together, "HND" when a head's slots do), dense (every stride the contiguous
    one), the caches' k_dtype and v_dtype (KV_DTYPES' names) and scale_granularity
    (SCALE_GRANULARITIES' name) from quant's codes, and device."""
    shape = dict(zip(SHAPE_KEYS, values))
    shape.update(zip(STRIDE_KEYS, strides))
    hq, hk, d, s = (shape[k] for k in ("num_qo_heads", "num_kv_heads", "head_dim", "page_size"))
    shape["kv_layout"] = "HND" if shape["kv_stride_head"] > shape["kv_stride_slot"] else "NHD"
    shape["dense"] = tuple(strides) == (hq * d, d, hq * d, d, hq, s * hk * d, hk * d, d)
    shape["k_dtype"] = code_name(KV_DTYPES, quant[0])
    shape["v_dtype"] = code_name(KV_DTYPES, quant[1])
    shape["scale_granularity"] = code_name(SCALE_GRANULARITIES, quant[2])
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
        fn, shown, nargs = load_function(target)
        precision, supports, promises = attributes(fn, shown, target[0])
        dtypes, grans = declared_caches(fn, shown, target, nargs, torch)
    except TargetError as e:
        print(str(e), flush=True)
        return e.code
    # One tagged line, so that whatever the module printed on import cannot pass for it.
    print("KVFUZZ-OK\t%s\t%d\t%s\t%s\t%s\t%s with torch %s on %s"
          % (precision or "", supports is not None, promises or "", ",".join(dtypes),
             ",".join(grans), shown, torch.__version__, device), flush=True)
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
        declared_caches(fn, shown, target, nargs, torch)
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
            n = len(SHAPE_KEYS)
            shape = shape_dict(fields[:n], fields[n:n + 8], fields[n + 8:], device)
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
        r = dict(zip(REQUEST_KEYS, REQUEST.unpack(magic + body)[1:]))
        if supports is not None:
            # Whoever asked before (a probe, this worker) may have met an exception and let the
            # case through: asking again here makes it this launch's error. The answer itself
            # was given already.
            shape = shape_dict([r[k] for k in REQUEST_SHAPE_KEYS], [r[k] for k in STRIDE_KEYS],
                               [r[k] for k in QUANT_KEYS], device)
            try:
                ask_supports(supports, shown, shape)
            except KernelError as e:
                reply(sock, STATUS_EXCEPTION, str(e))
                continue
        if r["size"] != arena_size:
            # The arena grew. Tensors of the last launch may still view the old mapping, so it
            # is dropped rather than closed.
            arena, arena_size = mmap.mmap(mem_fd, r["size"]), r["size"]
        status, text = launch(torch, device, fn, nargs, arena, r)
        reply(sock, status, text)


# A launch request's fields after its magic, by name (REQUEST's order), and those that make the
# shape supports() sees.
REQUEST_KEYS = (("flags", "size", "hq", "hk", "d", "s", "b", "p", "n_entries", "sm_scale", "guard",
                 "off_q", "off_k", "off_v", "off_indptr", "off_indices", "off_last", "off_o",
                 "off_lse", "num_pages", "total_tokens", "max_seq_len") + STRIDE_KEYS
                + ("k_dtype", "v_dtype", "scale_granularity", "off_k_scale", "off_v_scale",
                   "n_scales"))
REQUEST_SHAPE_KEYS = ("hq", "hk", "d", "s", "b", "num_pages", "n_entries", "total_tokens",
                      "max_seq_len", "sm_scale")
QUANT_KEYS = ("k_dtype", "v_dtype", "scale_granularity")
# Each cache dtype's element as the arena stores it (copied to a GPU as such) and as torch's
# dtype the function gets.
CACHE_STORE = {"bf16": "int16", "e4m3": "uint8", "e5m2": "uint8"}
CACHE_DTYPE = {"bf16": "bfloat16", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def launch_plan(r):
    """What a launch request (REQUEST_KEYS -> values) lays out in the arena, without torch:
    (regions, tensors). regions maps a name to (store, byte offset, elements): one tensor of
    torch dtype `store` over the arena each, copied to the GPU and back as a whole. tensors maps
    each of the function's arguments to (region, dtype, first element, shape, strides): a view of
    its region from that element, as torch dtype `dtype` (of the store's element size), with that
    shape and those strides (elements). k_scale and v_scale are there only for a case with
    scales: [1], [Hk] or [P, S, Hk] f32, contiguous (per-slot scales of the pages sent, in
    kv_indices' numbering)."""
    hq, hk, d, s, b, p = (r[k] for k in ("hq", "hk", "d", "s", "b", "p"))
    sqb, sqh, sob, soh, slb, skp, sks, skh = (r[k] for k in STRIDE_KEYS)
    # Each tensor spans its extent in the arena: from its first element to the end of its last,
    # padding included (the C side's run_dims).
    q_ext = (b - 1) * sqb + (hq - 1) * sqh + d if b else 0
    o_ext = (b - 1) * sob + (hq - 1) * soh + d if b else 0
    lse_ext = (b - 1) * slb + hq if b else 0
    g16, g32 = r["guard"] // 2, r["guard"] // 4
    kd, vd = code_name(KV_DTYPES, r["k_dtype"]), code_name(KV_DTYPES, r["v_dtype"])
    if kd not in CACHE_STORE or vd not in CACHE_STORE:
        raise KernelError("the worker received a request for cache dtype codes %d and %d"
                          % (r["k_dtype"], r["v_dtype"]))
    regions = {
        "q": ("int16", r["off_q"], q_ext),
        "k": (CACHE_STORE[kd], r["off_k"], p * skp),
        "v": (CACHE_STORE[vd], r["off_v"], p * skp),
        "indptr": ("int32", r["off_indptr"], b + 1),
        "indices": ("int32", r["off_indices"], r["n_entries"]),
        "last": ("int32", r["off_last"], b),
        "o": ("int16", r["off_o"], g16 + o_ext + g16),
        "lse": ("int32", r["off_lse"], g32 + lse_ext + g32),
    }
    kv = ((p, s, hk, d), (skp, sks, skh, 1))
    tensors = {
        "q": ("q", "bfloat16", 0, (b, hq, d), (sqb, sqh, 1)),
        "k_cache": ("k", CACHE_DTYPE[kd], 0) + kv,
        "v_cache": ("v", CACHE_DTYPE[vd], 0) + kv,
        "kv_indptr": ("indptr", "int32", 0, (b + 1,), (1,)),
        "kv_indices": ("indices", "int32", 0, (r["n_entries"],), (1,)),
        "kv_last_page_len": ("last", "int32", 0, (b,), (1,)),
        "output": ("o", "bfloat16", g16, (b, hq, d), (sob, soh, 1)),
        "lse": ("lse", "float32", g32, (b, hq), (slb, 1)),
    }
    gran = code_name(SCALE_GRANULARITIES, r["scale_granularity"])
    if gran != "none":
        shape, strides = {"tensor": ((1,), (1,)), "head": ((hk,), (1,)),
                          "token": ((p, s, hk), (s * hk, hk, 1))}.get(gran, ((-1,), (1,)))
        n = r["n_scales"]
        if n != (p * s * hk if gran == "token" else shape[0]):
            raise KernelError("the worker received %d scales for scale granularity code %d"
                              % (n, r["scale_granularity"]))
        for name in ("k_scale", "v_scale"):
            regions[name] = ("float32", r["off_" + name], n)
            tensors[name] = (name, "float32", 0, shape, strides)
    return regions, tensors


def launch(torch, device, fn, nargs, arena, r):
    """Runs the function on one launch request (REQUEST_KEYS -> values) over the arena: builds
    the tensors of launch_plan (on the CPU views of the shared memory, on a GPU copies of it),
    calls the function, copies every region back from the GPU. Returns the reply's (status,
    text)."""
    try:
        regions, tensors = launch_plan(r)
    except KernelError as e:
        return STATUS_INTERNAL, str(e)
    for _, dtype, _, _, _ in tensors.values():
        if getattr(torch, dtype, None) is None:  # the check refuses such a kernel; said again
            return STATUS_INTERNAL, ("torch %s under %s has no torch.%s, as FP8 tensors need "
                                     "torch 2.1 or later" % (torch.__version__, PYTHON, dtype))

    def view(store, offset, count):
        dtype = getattr(torch, store)
        if count == 0:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer(arena, dtype=dtype, count=count, offset=offset)

    shm = {name: view(*region) for name, region in regions.items()}
    t = shm if device == "cpu" else {name: x.to(device) for name, x in shm.items()}
    a = {arg: t[region][first:].view(getattr(torch, dtype)).as_strided(shape, strides)
         for arg, (region, dtype, first, shape, strides) in tensors.items()}
    args = [a["q"], a["k_cache"], a["v_cache"], a["kv_indptr"], a["kv_indices"]]
    if nargs in (9, 11):  # else page size 1: every last page holds its one token
        args.append(a["kv_last_page_len"])
    args.append(float(r["sm_scale"]))
    scales = dict((name, a[name]) for name in ("k_scale", "v_scale") if name in a)
    if nargs >= 10:  # a FlashInfer-Bench FP8 definition: the scales in its order
        if len(scales) != 2:  # kvfuzz's supports() sends it scaled FP8 cases only
            return STATUS_INTERNAL, "a FlashInfer-Bench FP8 solution got a case without scales"
        args += [scales.pop("k_scale"), scales.pop("v_scale")]
    args += [a["output"], a["lse"]]
    try:
        fn(*args, **scales)
        if device != "cpu":
            torch.cuda.synchronize()
    except Exception as e:  # SystemExit and KeyboardInterrupt end the worker: a crash
        return STATUS_EXCEPTION, last_line(e)
    if device != "cpu":
        for name, x in t.items():
            shm[name].copy_(x.cpu())
    return STATUS_OK, ""


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
