#!/usr/bin/env python3
"""Golden FlashInfer-Bench data for kvfuzz's FIB interop tests, made independently of kvfuzz's
writers: only json and struct, every byte laid out here from FIB's documented formats.

  fib_golden.py make OUT SEED_DEFINITION.json
      OUT/good: a dataset (a tiny gqa_paged_decode definition, the seed definition, a gemm
      definition kvfuzz skips, workloads with safetensors, scalar and random inputs, their
      blobs, a trace whose errors are the strings "NaN" and "Infinity"); OUT/typeless: a
      definition and workloads as FIB's own serializer writes them with exclude_unset (axes
      {} and {"value": N}, inputs without "type"); OUT/empty: a batch whose every sequence is
      empty and one with an empty sequence between non-empty ones; OUT/bad/<name>/: one
      definition.json + workloads.jsonl (+ blob) per malformed input; OUT/fp8: kvfuzz's FP8
      definitions (float8 caches, k_scale and v_scale of shape [num_scales], num_scales const
      1) of the tiny shape, in e4m3 and e5m2, and a workload of each whose FP8 bytes hold NaN,
      inf, -0, subnormals and the largest values.
  fib_golden.py check-kvfz CASE.kvfz UUID
      decodes the .kvfz (docs/case-format.md) and compares its tensors bit for bit with what
      `make` wrote for workload UUID (an FP8 cache's bf16 images with the bytes' values, its
      scales and dtypes with the quantization section), and its origin with the workload's
      names.
  fib_golden.py check-export DIR UUID...
      reads the dataset kvfuzz exported and compares every blob tensor bit for bit with what
      `make` wrote, and checks the definition, workload and trace records.
  fib_golden.py check-fib DIR
      checks a dataset as FIB reads it: every file where FIB's validator looks for it
      (definitions/<op_type>/<def>.json, workloads/<op_type>/<def>.jsonl,
      solutions/<author>/<op_type>/<def>/<name>.json, traces/<author>/<op_type>/<def>.jsonl),
      every record valid under FIB's pydantic models (Definition, Trace, Workload, Solution,
      Evaluation, Correctness, Performance), validate_dataset's CPU checks (path fields,
      positive axes, inputs, blob keys and shapes, traces naming a solution it indexes), and
      the dtype check of load_safetensors (each stored tensor of its definition's dtype).
  fib_golden.py trace DIR UUID
      prints the status, max_absolute_error and max_relative_error of the trace of UUID, as
      FIB's models read them (JSON numbers, or "NaN" / "Infinity" strings).
The FIB rules are FlashInfer-Bench's as of commit 40e6ca78 (flashinfer_bench/data/*.py,
data/validate.py); no FIB code is used.
"""
import ast
import glob
import json
import math
import os
import struct
import sys

DEF = "gqa_paged_decode_h4_kv2_d8_ps4"
HQ, HK, D, S = 4, 2, 8, 4
SEED_DEF = "gqa_paged_decode_h20_kv4_d128_ps64"


def lcg(seed):
    x = seed & 0xFFFFFFFF
    while True:
        x = (1103515245 * x + 12345) & 0xFFFFFFFF
        yield x >> 8


def bf16_values(n, seed):
    """bf16 bit patterns: ordinary values with -0, +0, the smallest subnormal and the largest
    finite value salted in, so a reader that converts instead of copying shows."""
    g = lcg(seed)
    special = [0x8000, 0x0000, 0x0001, 0x7F7F, 0xFF7F, 0x0080]
    out = []
    for i in range(n):
        r = next(g)
        if r % 13 == 0:
            out.append(special[r % len(special)])
        else:
            # sign, an exponent around 1.0 (120..132), 7 mantissa bits
            out.append(((r >> 15) & 1) << 15 | (120 + r % 13) << 7 | (r >> 4) & 0x7F)
    return out


def bf16_plain(n, seed):
    """bf16_values without the largest finite values, whose products overflow float32 (rows
    out of kvfuzz's input model): for workloads whose every row a kernel can hold."""
    return [v if v & 0x7FFF != 0x7F7F else v & 0x8000 | 0x3F80 for v in bf16_values(n, seed)]


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def i32(values):
    return struct.pack("<%di" % len(values), *values)


def u16(values):
    return struct.pack("<%dH" % len(values), *values)


def definition(name, hq, hk, d, s, dtype_q="bfloat16", with_last=True):
    inputs = {
        "q": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": dtype_q},
        "k_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
        "v_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
        "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
        "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
    }
    if with_last:
        inputs["kv_last_page_len"] = {"shape": ["batch_size"], "dtype": "int32"}
    inputs["sm_scale"] = {"shape": None, "dtype": "float32"}
    return {
        "name": name,
        "op_type": "gqa_paged",
        "tags": ["stage:decode"],
        "axes": {
            "batch_size": {"type": "var"},
            "num_qo_heads": {"type": "const", "value": hq},
            "num_kv_heads": {"type": "const", "value": hk},
            "head_dim": {"type": "const", "value": d},
            "num_pages": {"type": "var"},
            "page_size": {"type": "const", "value": s},
            "len_indptr": {"type": "var"},
            "num_kv_indices": {"type": "var"},
        },
        "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
        "inputs": inputs,
        "outputs": {
            "output": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
            "lse": {"shape": ["batch_size", "num_qo_heads"], "dtype": "float32"},
        },
        "reference": "def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):\n    pass\n",
    }


# The tiny definition's workloads: uuid -> (indptr, indices, last_page_len, pool pages, stored
# inputs, sm_scale as (kind, value)). Sequence lengths 6, 0 (empty) and 4.
WORKLOADS = {
    "w-all-stored": dict(indptr=[0, 2, 2, 3], indices=[4, 1, 2], last=[2, 0, 4], pool=6,
                         stored=("q", "k_cache", "v_cache"), scale=("scalar", 0.35355339059327373)),
    "w-random-q": dict(indptr=[0, 1], indices=[0], last=[3], pool=2,
                       stored=("k_cache", "v_cache"), scale=("tensor", 0.125)),
    "w-random-qkv": dict(indptr=[0, 3, 4], indices=[3, 0, 2, 1], last=[1, 4], pool=5,
                         stored=(), scale=("scalar", 0.5)),
}


def tensors_of(uuid, w, hq=HQ, hk=HK, d=D, s=S):
    """Every input tensor the workload stores, by name: (dtype, shape, raw, values)."""
    b = len(w["indptr"]) - 1
    seed = sum(map(ord, uuid))
    out = {}
    sizes = {"q": [b, hq, d], "k_cache": [w["pool"], s, hk, d], "v_cache": [w["pool"], s, hk, d]}
    for i, name in enumerate(("q", "k_cache", "v_cache")):
        if name in w["stored"]:
            n = 1
            for x in sizes[name]:
                n *= x
            vals = (bf16_plain if w.get("plain") else bf16_values)(n, seed * 7 + i)
            out[name] = ("BF16", sizes[name], u16(vals), vals)
    out["kv_indptr"] = ("I32", [b + 1], i32(w["indptr"]), w["indptr"])
    out["kv_indices"] = ("I32", [len(w["indices"])], i32(w["indices"]), w["indices"])
    out["kv_last_page_len"] = ("I32", [b], i32(w["last"]), w["last"])
    if w["scale"][0] == "tensor":
        out["sm_scale"] = ("F32", [], struct.pack("<f", w["scale"][1]), [w["scale"][1]])
    return out


def blob_rel(defname, uuid):
    return "blob/workloads/gqa_paged/%s/%s_%s.safetensors" % (defname, defname, uuid)


def workload_line(defname, uuid, w, tensors, path=None):
    b = len(w["indptr"]) - 1
    inputs = {}
    rel = path or blob_rel(defname, uuid)
    for name in ("q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "kv_last_page_len", "sm_scale"):
        if name in tensors:
            inputs[name] = {"type": "safetensors", "path": rel, "tensor_key": name}
        elif name == "sm_scale":
            inputs[name] = {"type": "scalar", "value": w["scale"][1]}
        else:
            inputs[name] = {"type": "random"}
    return {"definition": defname, "solution": None,
            "workload": {"uuid": uuid, "axes": {"batch_size": b, "num_pages": w["pool"], "len_indptr": b + 1,
                                                "num_kv_indices": len(w["indices"])},
                         "inputs": inputs},
            "evaluation": None}


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def blob_bytes(tensors, order=None):
    names = order or list(tensors)
    return safetensors([(n, tensors[n][0], tensors[n][1], tensors[n][2]) for n in names])


PS1_DEF = "gqa_paged_decode_h4_kv2_d8_ps1"
PS1_W = dict(indptr=[0, 3, 5], indices=[5, 0, 2, 1, 4], last=[1, 1], pool=6,
             stored=("q", "k_cache", "v_cache"), scale=("scalar", 0.25))

# kvfuzz's FP8 definitions of the tiny shape (docs/fib.md, "FP8 caches"): float8 caches, and
# k_scale and v_scale of shape [num_scales] with num_scales const 1, after sm_scale.
FIB_FP8 = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
ST_FP8 = {"e4m3": "F8_E4M3", "e5m2": "F8_E5M2"}
FP8_DEFS = {dt: "%s_fp8_%s" % (DEF, dt) for dt in FIB_FP8}


def fp8_definition(dtype, v_dtype=None, scales=True):
    d = definition(FP8_DEFS[dtype], HQ, HK, D, S)
    d["axes"]["num_scales"] = {"type": "const", "value": 1}
    d["inputs"]["k_cache"]["dtype"] = FIB_FP8[dtype]
    d["inputs"]["v_cache"]["dtype"] = FIB_FP8[v_dtype or dtype]
    if scales:
        d["inputs"]["k_scale"] = {"shape": ["num_scales"], "dtype": "float32"}
        d["inputs"]["v_scale"] = {"shape": ["num_scales"], "dtype": "float32"}
    d["tags"].append("quantization:" + FIB_FP8[dtype])
    d["reference"] = ("def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, "
                      "k_scale, v_scale):\n    pass\n")
    return d


def fp8_bytes(n, seed, dtype):
    """FP8 bytes: ordinary ones with NaN, inf (e5m2), -0, the smallest subnormal and the largest
    finite value salted in."""
    special = {"e4m3": [0x7F, 0xFF, 0x80, 0x01, 0x7E, 0xFE], "e5m2": [0x7C, 0xFC, 0x7D, 0xFF, 0x80, 0x01, 0x7B]}[dtype]
    g = lcg(seed)
    out = []
    for _ in range(n):
        r = next(g)
        out.append(special[r % len(special)] if r % 11 == 0 else (r >> 5) & 0xFF)
    return out


def fp8_image(x, dtype):
    """The bf16 image kvfuzz keeps for an FP8 byte (kvfuzz/fp8.h): its value, or for a NaN byte
    the quiet bf16 NaN of its sign whose low six bits are the byte's."""
    mbits, bias, has_inf = (3, 7, False) if dtype == "e4m3" else (2, 15, True)
    sign, mag = x >> 7, x & 0x7F
    e, m = mag >> mbits, mag & ((1 << mbits) - 1)
    if (not has_inf and mag == 0x7F) or (has_inf and e == 31 and m):
        return sign << 15 | 0x7FC0 | (x & 0x3F)
    if has_inf and e == 31:
        return sign << 15 | 0x7F80
    v = math.ldexp(m, 1 - bias - mbits) if e == 0 else math.ldexp((1 << mbits) | m, e - bias - mbits)
    bits = struct.unpack("<I", struct.pack("<f", -v if sign else v))[0]
    if bits & 0xFFFF:
        raise ValueError("an FP8 value that is no bf16 value")
    return bits >> 16


FP8_W = {
    "w-fp8-e4m3": dict(dtype="e4m3", indptr=[0, 2, 2, 3], indices=[4, 1, 2], last=[2, 0, 4], pool=6,
                       stored=("q", "k_cache", "v_cache"), scale=("scalar", 0.25),
                       k_scale=0.375, v_scale=1.5e-3),
    "w-fp8-e5m2": dict(dtype="e5m2", indptr=[0, 1], indices=[0], last=[3], pool=2,
                       stored=("q", "k_cache"), scale=("scalar", 0.5),
                       k_scale=2.0 ** -20, v_scale=3.0e4),
}
FP8_INPUTS = ("q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "kv_last_page_len", "sm_scale",
              "k_scale", "v_scale")


def fp8_tensors_of(uuid, w):
    t = tensors_of(uuid, dict(w, stored=tuple(n for n in w["stored"] if n == "q")))
    seed = sum(map(ord, uuid))
    shape = [w["pool"], S, HK, D]
    for i, name in enumerate(("k_cache", "v_cache")):
        if name in w["stored"]:
            vals = fp8_bytes(w["pool"] * S * HK * D, seed * 7 + i + 1, w["dtype"])
            t[name] = (ST_FP8[w["dtype"]], shape, bytes(vals), vals)
    for name in ("k_scale", "v_scale"):
        t[name] = ("F32", [1], struct.pack("<f", w[name]), [w[name]])
    return t


def fp8_workload_line(defname, uuid, w, tensors, path=None):
    line = workload_line(defname, uuid, w, tensors, path)
    inputs = line["workload"]["inputs"]
    for name in FP8_INPUTS:
        if name in tensors:
            inputs[name] = {"type": "safetensors", "path": path or blob_rel(defname, uuid), "tensor_key": name}
    line["workload"]["inputs"] = {n: inputs[n] for n in FP8_INPUTS}
    return line


def make_fp8(out):
    for dt, name in FP8_DEFS.items():
        write(out + "/definitions/gqa_paged/%s.json" % name, json.dumps(fp8_definition(dt), indent=2))
    for uuid, w in FP8_W.items():
        name = FP8_DEFS[w["dtype"]]
        t = fp8_tensors_of(uuid, w)
        write(out + "/" + blob_rel(name, uuid), blob_bytes(t))
        write(out + "/workloads/gqa_paged/%s.jsonl" % name, json.dumps(fp8_workload_line(name, uuid, w, t)) + "\n")


SEED_W = dict(indptr=[0, 51], indices=[(7 * i + 3) % 52 for i in range(51)], last=[2], pool=52,
              stored=(), scale=("scalar", 0.08838834764831845))


def make_good(out, seed_def_path):
    write(out + "/definitions/gqa_paged/%s.json" % DEF, json.dumps(definition(DEF, HQ, HK, D, S), indent=2))
    with open(seed_def_path) as f:
        write(out + "/definitions/gqa_paged/%s.json" % SEED_DEF, f.read())
    write(out + "/definitions/gemm/gemm_n8_k8.json", json.dumps({
        "name": "gemm_n8_k8", "op_type": "gemm", "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8},
                                                          "K": {"type": "const", "value": 8}},
        "inputs": {"A": {"shape": ["M", "K"], "dtype": "bfloat16"}, "B": {"shape": ["N", "K"], "dtype": "bfloat16"}},
        "outputs": {"C": {"shape": ["M", "N"], "dtype": "bfloat16"}},
        "reference": "def run(A, B):\n    return A @ B.T\n"}))
    write(out + "/workloads/gemm/gemm_n8_k8.jsonl", json.dumps(
        {"definition": "gemm_n8_k8", "solution": None,
         "workload": {"uuid": "g1", "axes": {"M": 2}, "inputs": {"A": {"type": "random"}, "B": {"type": "random"}}},
         "evaluation": None}) + "\n")
    lines = []
    for uuid, w in WORKLOADS.items():
        t = tensors_of(uuid, w)
        write(out + "/" + blob_rel(DEF, uuid), blob_bytes(t))
        lines.append(json.dumps(workload_line(DEF, uuid, w, t)))
    write(out + "/workloads/gqa_paged/%s.jsonl" % DEF, "\n".join(lines) + "\n\n")
    t = tensors_of("seed", SEED_W, 20, 4, 128, 64)
    write(out + "/" + blob_rel(SEED_DEF, "seed-w1"), blob_bytes(t))
    write(out + "/workloads/gqa_paged/%s.jsonl" % SEED_DEF,
          json.dumps(workload_line(SEED_DEF, "seed-w1", SEED_W, t)) + "\n")
    # Page size 1: FIB's definitions have no kv_last_page_len (every last page is full).
    w = PS1_W
    t = tensors_of("w-ps1", w, s=1)
    del t["kv_last_page_len"]
    write(out + "/definitions/gqa_paged/%s.json" % PS1_DEF, json.dumps(definition(PS1_DEF, HQ, HK, D, 1, with_last=False)))
    write(out + "/" + blob_rel(PS1_DEF, "w-ps1"), blob_bytes(t))
    line = workload_line(PS1_DEF, "w-ps1", w, t)
    del line["workload"]["inputs"]["kv_last_page_len"]
    write(out + "/workloads/gqa_paged/%s.jsonl" % PS1_DEF, json.dumps(line) + "\n")
    # A trace as FIB writes a failed evaluation (traces/<author>/<op_type>/<def>.jsonl): non-finite
    # errors as strings.
    trace = workload_line(DEF, "w-all-stored", WORKLOADS["w-all-stored"], tensors_of("w-all-stored", WORKLOADS["w-all-stored"]))
    trace["solution"] = "some_solution"
    trace["evaluation"] = {"status": "INCORRECT_NUMERICAL", "environment": {"hardware": "NVIDIA_H200", "libs": {}},
                           "timestamp": "2026-01-01T00:00:00", "log": "",
                           "correctness": {"max_relative_error": "NaN", "max_absolute_error": "Infinity", "extra": None}}
    write(out + "/traces/some_author/gqa_paged/%s.jsonl" % DEF, json.dumps(trace) + "\n")


# FIB's save_json_file writes model_dump_json(exclude_unset=True): a field left at its default
# is not written, so AxisVar() is {}, AxisConst(value=2) is {"value": 2}, and a TensorSpec, a
# SafetensorsInput or a ScalarInput built without "type" has none (flashinfer_bench/data/
# json_utils.py, definition.py, workload.py). Definition's fields in their declared order:
# name, op_type, axes, inputs, outputs, reference (tags, description, constraints unset).
TYPELESS_DEF = "gqa_paged_decode_h4_kv2_d8_ps2"
TYPELESS = {
    # every input stored, as Trace(...).model_dump_json(exclude_unset=True) writes it
    "w-typeless": dict(indptr=[0, 2, 3], indices=[3, 0, 1], last=[1, 2], pool=4,
                       stored=("q", "k_cache", "v_cache"), scale=("scalar", 0.25)),
    # q as {} (RandomInput: the only member that validates), sm_scale {"value": "0.125"} (a
    # string pydantic's lax mode reads as a ScalarInput's number)
    "w-lax": dict(indptr=[0, 1], indices=[2], last=[2], pool=3, stored=("k_cache", "v_cache"),
                  scale=("scalar", 0.125)),
}


def typeless_definition():
    d = definition(TYPELESS_DEF, HQ, HK, D, 2)
    axes = {k: ({"value": v["value"]} if v["type"] == "const" else {}) for k, v in d["axes"].items()}
    return {"name": d["name"], "op_type": d["op_type"], "axes": axes, "inputs": d["inputs"],
            "outputs": d["outputs"], "reference": d["reference"]}


def make_typeless(out):
    write(out + "/definitions/gqa_paged/%s.json" % TYPELESS_DEF,
          json.dumps(typeless_definition(), indent=2))
    lines = []
    for uuid, w in TYPELESS.items():
        t = tensors_of(uuid, w, s=2)
        write(out + "/" + blob_rel(TYPELESS_DEF, uuid), blob_bytes(t))
        typed = workload_line(TYPELESS_DEF, uuid, w, t)["workload"]
        inputs = {}
        for name, desc in typed["inputs"].items():
            desc = {k: v for k, v in desc.items() if k != "type"}
            if name == "sm_scale" and uuid == "w-lax":
                desc = {"value": str(w["scale"][1])}
            inputs[name] = desc
        # Workload's fields in their declared order (axes, inputs, uuid); Trace's solution and
        # evaluation unset, so absent; compact, as model_dump_json(indent=None) writes.
        rec = {"definition": TYPELESS_DEF,
               "workload": {"axes": typed["axes"], "inputs": inputs, "uuid": uuid}}
        lines.append(json.dumps(rec, separators=(",", ":")))
    write(out + "/workloads/gqa_paged/%s.jsonl" % TYPELESS_DEF, "\n".join(lines) + "\n")


# An empty batch: every sequence empty, so num_kv_indices = kv_indptr[-1] = 0, which FIB's
# validator rejects (axis values must be positive); and an empty sequence between non-empty
# ones, on values no row overflows.
EMPTY = {
    "w-all-empty": dict(indptr=[0, 0, 0], indices=[], last=[1, 1], pool=1,
                        stored=("q", "k_cache", "v_cache"), scale=("scalar", 0.5), plain=True),
    "w-empty-mid": dict(indptr=[0, 2, 2, 3], indices=[1, 0, 2], last=[3, 1, 4], pool=3,
                        stored=("q", "k_cache", "v_cache"), scale=("scalar", 0.5), plain=True),
}


def make_empty(out):
    write(out + "/definitions/gqa_paged/%s.json" % DEF, json.dumps(definition(DEF, HQ, HK, D, S)))
    lines = []
    for uuid, w in EMPTY.items():
        t = tensors_of(uuid, w)
        write(out + "/" + blob_rel(DEF, uuid), blob_bytes(t))
        lines.append(json.dumps(workload_line(DEF, uuid, w, t)))
    write(out + "/workloads/gqa_paged/%s.jsonl" % DEF, "\n".join(lines) + "\n")


def make_bad(out):
    """One malformed input per folder: definition.json, workloads.jsonl and a blob."""
    def case(name, w=None, tensors=None, blob=None, defn=None, line=None, uuid="bad"):
        d = out + "/bad/" + name
        write(d + "/definition.json", json.dumps(defn or definition(DEF, HQ, HK, D, S)))
        w = w or dict(WORKLOADS["w-all-stored"])
        tensors = tensors if tensors is not None else tensors_of(uuid, w)
        write(d + "/blob.safetensors", blob if blob is not None else blob_bytes(tensors))
        if line is None:
            line = workload_line(DEF, uuid, w, tensors, path="blob.safetensors")
        write(d + "/workloads.jsonl", json.dumps(line) + "\n")
    base = WORKLOADS["w-all-stored"]
    case("lfs-pointer", blob=b"version https://git-lfs.github.com/spec/v1\n"
         b"oid sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\nsize 2048\n")
    t = tensors_of("bad", base)
    t["q"] = ("BF16", [3, HQ, D + 1], u16(bf16_values(3 * HQ * (D + 1), 1)), None)
    case("shape-mismatch", tensors=t)
    t = tensors_of("bad", base)
    t["kv_indices"] = ("I64", [3], struct.pack("<3q", 4, 1, 2), None)
    case("dtype-mismatch", tensors=t)
    for name in ("kv_indptr", "kv_indices", "kv_last_page_len"):
        t = tensors_of("bad", base)
        line = workload_line(DEF, "bad", base, t, path="blob.safetensors")
        line["workload"]["inputs"][name] = {"type": "random"}
        case("random-" + name.replace("_", "-"), tensors=t, line=line)
    w = dict(base, indptr=[0, 2, 2, 2])  # ends at 2, three indices
    case("indptr-end", w=w, tensors=tensors_of("bad", w))
    for label, value in (("last-len-zero", 0), ("last-len-past-page", S + 1)):
        w = dict(base, last=[2, 0, value])
        case(label, w=w, tensors=tensors_of("bad", w))
    prefill = definition("gqa_paged_prefill_causal_h4_kv2_d8_ps4", HQ, HK, D, S)
    prefill["inputs"] = dict([("q", prefill["inputs"]["q"]), ("k_cache", prefill["inputs"]["k_cache"]),
                              ("v_cache", prefill["inputs"]["v_cache"]),
                              ("qo_indptr", {"shape": ["len_indptr"], "dtype": "int32"})] +
                             [(k, v) for k, v in prefill["inputs"].items() if k not in ("q", "k_cache", "v_cache")])
    case("not-decode", defn=prefill)
    case("unknown-dtype-definition", defn=definition(DEF, HQ, HK, D, S, dtype_q="bfloat17"))
    t = tensors_of("bad", base)
    names = list(t)
    raw = safetensors([(n, t[n][0] if n != "q" else "BF17", t[n][1], t[n][2]) for n in names])
    case("unknown-dtype-blob", blob=raw)

    def with_offsets(fix):
        header = {}
        data = b""
        for n in names:
            header[n] = {"dtype": t[n][0], "shape": t[n][1], "data_offsets": [len(data), len(data) + len(t[n][2])]}
            data += t[n][2]
        fix(header)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        return struct.pack("<Q", len(text)) + text + data
    def overlap(h):
        h["kv_indices"]["data_offsets"] = [h["kv_indices"]["data_offsets"][0] - 4, h["kv_indices"]["data_offsets"][1] - 4]
    def gap(h):
        h["kv_last_page_len"]["data_offsets"] = [h["kv_last_page_len"]["data_offsets"][0] + 4, h["kv_last_page_len"]["data_offsets"][1] + 4]
    def past(h):
        end = h["kv_last_page_len"]["data_offsets"][1]
        h["kv_last_page_len"]["data_offsets"] = [end, end + 12]
    case("offsets-overlap", blob=with_offsets(overlap))
    case("offsets-gap", blob=with_offsets(gap) + b"\0\0\0\0")
    case("offsets-past-end", blob=with_offsets(past)[:-12])
    case("header-over-100MB", blob=struct.pack("<Q", 100_000_001) + b"{" + b" " * 15)
    # Without "type", {"value": 3} is an AxisConst and {} an AxisVar (pydantic picks the union
    # member with the most fields set): a var axis with a value, or a const one without, is
    # not what the definition says.
    d = typeless_definition()
    d["name"] = DEF
    d["axes"]["page_size"] = {"value": S}
    d["axes"]["batch_size"] = {"value": 3}
    case("typeless-var-axis-with-value", defn=d)
    d = typeless_definition()
    d["name"] = DEF
    d["axes"]["page_size"] = {"value": S}
    d["axes"]["num_kv_heads"] = {"description": "no value: an AxisVar"}
    case("typeless-const-axis-without-value", defn=d)

    # FP8: one malformed input each, beside an e4m3 workload that imports.
    fw = FP8_W["w-fp8-e4m3"]

    def fp8_case(name, tensors=None, defn=None, edit=None):
        t = tensors or fp8_tensors_of("bad", fw)
        line = fp8_workload_line(FP8_DEFS["e4m3"], "bad", fw, t, path="blob.safetensors")
        if edit:
            edit(line["workload"]["inputs"])
        case(name, tensors=t, defn=defn or fp8_definition("e4m3"), line=line)
    t = fp8_tensors_of("bad", fw)
    t["k_cache"] = ("BF16", t["k_cache"][1], u16(bf16_values(len(t["k_cache"][2]), 3)), None)
    fp8_case("fp8-cache-dtype", tensors=t)
    t = fp8_tensors_of("bad", fw)
    t["k_scale"] = ("F32", [2], struct.pack("<2f", 0.5, 0.5), None)
    fp8_case("fp8-scale-shape", tensors=t)
    t = fp8_tensors_of("bad", fw)
    t["k_scale"] = ("F32", [1], struct.pack("<I", 0x7FC00000), None)
    fp8_case("fp8-scale-nan", tensors=t)
    t = fp8_tensors_of("bad", fw)
    t["v_scale"] = ("F32", [1], struct.pack("<f", -1.5), None)
    fp8_case("fp8-scale-negative", tensors=t)
    fp8_case("fp8-scale-random", edit=lambda inputs: inputs.update(k_scale={"type": "random"}))
    fp8_case("fp8-mixed-definition", defn=fp8_definition("e4m3", v_dtype="e5m2"))

    def no_scales(inputs):
        del inputs["k_scale"], inputs["v_scale"]
    fp8_case("fp8-no-scales", defn=fp8_definition("e4m3", scales=False), edit=no_scales)


# ---- checks ---------------------------------------------------------------------------------

def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def decode_kvfz(path):
    b = open(path, "rb").read()
    if b[:4] != b"KVFZ" or b[4] != 1:
        fail("%s is not a version 1 case" % path)
    sections = b[5]
    hq, hk = b[8], b[9]
    d, s, batch = struct.unpack_from("<HHH", b, 10)
    scale = struct.unpack_from("<f", b, 28)[0]
    at = 52
    seqs = [struct.unpack_from("<HH", b, at + 4 * i) for i in range(batch)]
    at += 4 * batch
    if sections & 1:
        n = struct.unpack_from("<I", b, at)[0]
        at += 4 + 13 * n
    case = dict(hq=hq, hk=hk, d=d, s=s, batch=batch, scale=scale, seqs=seqs, bytes=b)
    if sections & 2:
        pool = struct.unpack_from("<I", b, at)[0]
        at += 4
        entries = sum(n for n, _ in seqs)
        case["indices"] = list(struct.unpack_from("<%di" % entries, b, at))
        at += 4 * entries
        nq = batch * hq * d
        case["q"] = list(struct.unpack_from("<%dH" % nq, b, at))
        at += 2 * nq
        npool = pool * s * hk * d
        case["k_cache"] = list(struct.unpack_from("<%dH" % npool, b, at))
        at += 2 * npool
        case["v_cache"] = list(struct.unpack_from("<%dH" % npool, b, at))
        at += 2 * npool
        case["pool"] = pool
    if sections & 4:
        n = b[at]
        case["definition"] = b[at + 1:at + 1 + n].decode()
        at += 1 + n
        n = b[at]
        case["uuid"] = b[at + 1:at + 1 + n].decode()
        at += 1 + n
        case["random_inputs"] = b[at]
        case["random_seed"] = struct.unpack_from("<Q", b, at + 4)[0]
        at += 12
    if sections & 8:
        fail("%s has a layout section, which no import writes" % path)
    if sections & 16:
        case["quant"] = tuple(b[at:at + 5])  # k dtype, v dtype, granularity, spread, fine
        case["k_scale"], case["v_scale"] = b[at + 8:at + 12], b[at + 12:at + 16]
        at += 16
    if at != len(b):
        fail("%s: %d bytes left after the sections" % (path, len(b) - at))
    return case


def expected(uuid):
    if uuid in FP8_W:
        return FP8_DEFS[FP8_W[uuid]["dtype"]], FP8_W[uuid], fp8_tensors_of(uuid, FP8_W[uuid])
    if uuid in TYPELESS:
        return TYPELESS_DEF, TYPELESS[uuid], tensors_of(uuid, TYPELESS[uuid], s=2)
    if uuid in EMPTY:
        return DEF, EMPTY[uuid], tensors_of(uuid, EMPTY[uuid])
    if uuid == "w-ps1":
        t = tensors_of("w-ps1", PS1_W, s=1)
        del t["kv_last_page_len"]
        return PS1_DEF, PS1_W, t
    if uuid == "seed-w1":
        return SEED_DEF, SEED_W, tensors_of("seed", SEED_W, 20, 4, 128, 64)
    return DEF, WORKLOADS[uuid], tensors_of(uuid, WORKLOADS[uuid])


def check_kvfz(path, uuid):
    c = decode_kvfz(path)
    defname, w, t = expected(uuid)
    if c.get("definition") != defname or c.get("uuid") != uuid:
        fail("%s: origin %r / %r, wanted %s / %s" % (path, c.get("definition"), c.get("uuid"), defname, uuid))
    rnd = sum(1 << i for i, n in enumerate(("q", "k_cache", "v_cache")) if n not in w["stored"])
    if c["random_inputs"] != rnd:
        fail("%s: random-input flags %d, wanted %d" % (path, c["random_inputs"], rnd))
    want_seqs = []
    for b in range(len(w["indptr"]) - 1):
        n = w["indptr"][b + 1] - w["indptr"][b]
        want_seqs.append((n, w["last"][b] if n else 0))
    if c["seqs"] != want_seqs or c["indices"] != w["indices"] or c["pool"] != w["pool"]:
        fail("%s: page table %r %r (pool %d) differs from the workload's" % (path, c["seqs"], c["indices"], c["pool"]))
    if struct.pack("<f", c["scale"]) != struct.pack("<f", w["scale"][1]):
        fail("%s: sm_scale %r, wanted %r" % (path, c["scale"], w["scale"][1]))
    dtype = w.get("dtype")
    want = {n: t[n][3] for n in ("q", "k_cache", "v_cache") if n in t}
    if dtype:  # FP8: the bytes' images, one scale each, both caches of the dtype
        code = {"e4m3": 1, "e5m2": 2}[dtype]
        if c.get("quant") != (code, code, 1, 0, 0):
            fail("%s: quantization %r, wanted %s caches with tensor scales" % (path, c.get("quant"), dtype))
        for name in ("k_scale", "v_scale"):
            if c[name] != t[name][2]:
                fail("%s: %s bits %s, wanted %s" % (path, name, c[name].hex(), t[name][2].hex()))
        for n in ("k_cache", "v_cache"):
            if n in t:
                want[n] = [fp8_image(x, dtype) for x in t[n][3]]
        for n in ("k_cache", "v_cache"):  # a random one: FIB's randn clamped to [-2, 2], rounded
            if n not in t and any(fp8_from_image(v, dtype) < 0 or not abs(bf16_value(v)) <= 2
                                  for v in c[n]):
                fail("%s: the random %s holds values no clamped %s draw gives" % (path, n, dtype))
    elif "quant" in c:
        fail("%s: a quantization section for bf16 caches" % path)
    for name, values in want.items():
        if c[name] != values:
            bad = next(i for i, (a, e) in enumerate(zip(c[name], values)) if a != e)
            fail("%s: %s[%d] = 0x%04x, wanted 0x%04x" % (path, name, bad, c[name][bad], values[bad]))
    print("%s: %s bit for bit" % (path, ", ".join(n for n in ("q", "k_cache", "v_cache") if n in t) or "table"))


def bf16_value(v):
    return struct.unpack("<f", struct.pack("<I", v << 16))[0]


def fp8_from_image(v, dtype):
    """The byte whose image v is, or -1."""
    for x in range(256):
        if fp8_image(x, dtype) == v:
            return x
    return -1


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b, 0)[0]
    h = json.loads(b[8:8 + n])
    data = b[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__"}, h.get("__metadata__", {})


def check_export(root, uuids):
    defs = {}
    for uuid in uuids:
        defname, w, t = expected(uuid)
        dpath = root + "/definitions/gqa_paged/%s.json" % defname
        if defname not in defs:
            defs[defname] = json.load(open(dpath))
            d = defs[defname]
            want = ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "kv_last_page_len", "sm_scale"]
            if d["axes"]["page_size"]["value"] == 1:
                want.remove("kv_last_page_len")
            if list(d["inputs"]) != want:
                fail("%s: inputs %r" % (dpath, list(d["inputs"])))
        blob, meta = read_safetensors(root + "/" + blob_rel(defname, uuid))
        if set(blob) != {"q", "k_cache", "v_cache", "kv_indptr", "kv_indices"} | ({"kv_last_page_len"} if "kv_last_page_len" in t else set()):
            fail("blob of %s holds %r" % (uuid, sorted(blob)))
        for name, (dtype, shape, raw, _) in t.items():
            if name == "sm_scale":
                continue
            if blob[name][0] != dtype or blob[name][1] != shape or blob[name][2] != raw:
                fail("exported %s of %s differs from the golden bytes (%s %r)" % (name, uuid, blob[name][0], blob[name][1]))
        rnd = [n for n in ("q", "k_cache", "v_cache") if n not in w["stored"]]
        if meta.get("kvfuzz.random_inputs") != ",".join(rnd):
            fail("blob of %s records random inputs %r, wanted %r" % (uuid, meta.get("kvfuzz.random_inputs"), rnd))
        found = None
        for line in open(root + "/workloads/gqa_paged/%s.jsonl" % defname):
            rec = json.loads(line)
            if rec["workload"]["uuid"] == uuid:
                found = rec
        if not found or found["solution"] is not None or found["evaluation"] is not None:
            fail("workloads file has no workload record for %s" % uuid)
        sc = found["workload"]["inputs"]["sm_scale"]
        if sc["type"] != "scalar" or struct.pack("<f", sc["value"]) != struct.pack("<f", w["scale"][1]):
            fail("exported sm_scale of %s is %r" % (uuid, sc))
        traces = [json.loads(l) for f in sorted(glob.glob(root + "/traces/*/gqa_paged/%s.jsonl" % defname))
                  for l in open(f)]
        tr = [x for x in traces if x["workload"]["uuid"] == uuid]
        if len(tr) != 1:
            fail("%d traces for %s" % (len(tr), uuid))
        ev = tr[0]["evaluation"]
        extra = ev["correctness"]["extra"]["kvfuzz"]
        rules = [v["rule"] for v in extra["verdicts"]]
        if rules != ["strict", "fa", "fib"] or not extra["signature"] or "o_max_ulps" not in extra["ulp"]:
            fail("trace of %s lacks the verdicts, signature or ulp statistics: %r" % (uuid, extra))
        fibv = extra["verdicts"][2]
        if ev["status"] != ("PASSED" if fibv["pass"] else "INCORRECT_NUMERICAL"):
            fail("trace of %s has status %s but the fib verdict pass=%s" % (uuid, ev["status"], fibv["pass"]))
    print("export: %d workload(s) bit for bit, with definitions, workloads and traces" % len(uuids))


# ---- FIB's schema and validator (commit 40e6ca78), without FIB ------------------------------

DTYPES = {"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1", "int64",
          "int32", "int16", "int8", "bool"}
# safetensors' dtypes as torch reads them, in FIB's names (load_safetensors compares the two)
ST_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
             "F8_E5M2": "float8_e5m2", "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
             "BOOL": "bool"}
LANGUAGES = {"python", "triton", "cpp", "cuda", "tilelang"}
STATUSES = {"PASSED", "INCORRECT_SHAPE", "INCORRECT_NUMERICAL", "INCORRECT_DTYPE", "RUNTIME_ERROR",
            "COMPILE_ERROR", "TIMEOUT"}


def nonempty(v):
    return isinstance(v, str) and len(v) >= 1


def fib_uint(v):
    """NonNegativeInt as FIB's JSON carries it (kvfuzz writes plain integers)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def fib_float(v):
    """A float field of a model with ser_json_inf_nan="strings": a number or one of those
    strings; None if it is neither."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    return None


def axis_kind(a):
    """Union[AxisConst, AxisVar]: the "type" given, else const when "value" is an integer."""
    if not isinstance(a, dict):
        return None
    t = a.get("type")
    if t is None:
        return "const" if fib_uint(a.get("value")) else "var"
    if t == "const":
        return "const" if fib_uint(a.get("value")) else None
    return "var" if t == "var" else None


def lax_number(v):
    """ScalarInput.value, Union[int, float, bool], in pydantic's lax mode: numbers, booleans and
    numeric strings."""
    if isinstance(v, (int, float)):
        return True
    if isinstance(v, str) and "x" not in v.lower():
        try:
            float(v)
            return True
        except ValueError:
            return False
    return False


def input_kind(i):
    """Union[RandomInput, SafetensorsInput, ScalarInput]: the "type" given, else the member that
    validates with the most fields set."""
    if not isinstance(i, dict):
        return None
    t = i.get("type")
    if t is None:
        t = "safetensors" if nonempty(i.get("path")) and nonempty(i.get("tensor_key")) else \
            "scalar" if lax_number(i.get("value")) else "random"
    if t == "safetensors" and not (nonempty(i.get("path")) and nonempty(i.get("tensor_key"))):
        return None
    if t == "scalar" and not lax_number(i.get("value")):
        return None
    return t if t in ("random", "scalar", "safetensors") else None


def definition_errors(d):
    """Definition's fields and model validators."""
    e = []
    if not (isinstance(d, dict) and nonempty(d.get("name")) and nonempty(d.get("op_type"))):
        return ["name or op_type missing"]
    axes = d.get("axes")
    if not isinstance(axes, dict) or any(axis_kind(a) is None for a in axes.values()):
        return ["axes are not const / var axes"]
    for part in ("inputs", "outputs"):
        specs = d.get(part)
        if not isinstance(specs, dict):
            return ["%s is not an object" % part]
        for name, spec in specs.items():
            shape = spec.get("shape", "missing") if isinstance(spec, dict) else "missing"
            if spec.get("dtype") not in DTYPES or not (shape is None or (
                    isinstance(shape, list) and all(nonempty(x) for x in shape))):
                e.append("%s %s: shape %r dtype %r" % (part, name, shape, spec.get("dtype")))
            elif shape is not None and any(x not in axes for x in shape):
                e.append("%s %s references an undefined axis" % (part, name))
    if set(d["inputs"]) & set(d["outputs"]):
        e.append("input and output names overlap")
    try:
        mod = ast.parse(d.get("reference") or "", mode="exec")
        if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in mod.body):
            e.append("reference has no top-level run")
    except SyntaxError as x:
        e.append("reference is not Python: %s" % x)
    for c in d.get("constraints", []):
        try:
            ast.parse(c, mode="eval")
        except SyntaxError:
            e.append("constraint %r is not an expression" % c)
    return e


def workload_errors(t):
    """Trace's and Workload's fields."""
    w = t.get("workload") if isinstance(t, dict) else None
    if not (isinstance(t, dict) and nonempty(t.get("definition")) and isinstance(w, dict)):
        return ["not a trace with a definition and a workload"]
    e = []
    if not nonempty(w.get("uuid")):
        e.append("workload without uuid")
    if not isinstance(w.get("axes"), dict) or not all(fib_uint(v) for v in w["axes"].values()):
        e.append("workload axes are not non-negative integers")
    if not isinstance(w.get("inputs"), dict) or any(input_kind(i) is None for i in w["inputs"].values()):
        e.append("workload inputs are not random / scalar / safetensors inputs")
    return e


def evaluation_errors(ev):
    """Evaluation, Environment, Correctness and Performance, with their model validators."""
    if not isinstance(ev, dict) or ev.get("status") not in STATUSES:
        return ["evaluation status %r" % (ev or {}).get("status")]
    e = []
    env = ev.get("environment")
    if not (isinstance(env, dict) and nonempty(env.get("hardware")) and
            all(isinstance(v, str) for v in env.get("libs", {}).values())):
        e.append("environment")
    if not nonempty(ev.get("timestamp")) or not isinstance(ev.get("log", ""), str):
        e.append("timestamp or log")
    corr, perf = ev.get("correctness"), ev.get("performance")
    if corr is not None:
        for k in ("max_relative_error", "max_absolute_error"):
            x = fib_float(corr.get(k, 0.0))
            if x is None or (not math.isnan(x) and x < 0):
                e.append("correctness.%s %r is not non-negative or NaN" % (k, corr.get(k)))
        if not (corr.get("extra") is None or isinstance(corr.get("extra"), dict)):
            e.append("correctness.extra")
    if perf is not None and any(not isinstance(perf.get(k, 0.0), (int, float)) or perf.get(k, 0.0) < 0
                                for k in ("latency_ms", "reference_latency_ms", "speedup_factor")):
        e.append("performance")
    st = ev["status"]
    if st == "PASSED" and (corr is None or perf is None):
        e.append("PASSED without correctness and performance")
    elif st == "INCORRECT_NUMERICAL" and (corr is None or perf is not None):
        e.append("INCORRECT_NUMERICAL needs correctness and no performance")
    elif st not in ("PASSED", "INCORRECT_NUMERICAL") and (corr is not None or perf is not None):
        e.append("%s must carry neither correctness nor performance" % st)
    return e


def solution_errors(s):
    """Solution, BuildSpec and SourceFile, with their model validators."""
    if not (isinstance(s, dict) and all(nonempty(s.get(k)) for k in ("name", "definition", "author"))):
        return ["name, definition or author missing"]
    e = []
    spec = s.get("spec")
    if not isinstance(spec, dict) or spec.get("language") not in LANGUAGES:
        return ["spec.language %r" % (spec or {}).get("language")]
    hw = spec.get("target_hardware")
    if not (isinstance(hw, list) and len(hw) >= 1 and all(isinstance(x, str) for x in hw)):
        e.append("spec.target_hardware must list at least one")
    ep = spec.get("entry_point")
    if not nonempty(ep) or ep.count("::") != 1:
        e.append("spec.entry_point %r is not FILE::FUNCTION" % ep)
    if not all(nonempty(x) for x in spec.get("dependencies", [])):
        e.append("spec.dependencies")
    if not isinstance(spec.get("destination_passing_style", True), bool):
        e.append("spec.destination_passing_style")
    if spec.get("binding") not in (None, "tvm-ffi", "torch"):
        e.append("spec.binding")
    src = s.get("sources")
    if not (isinstance(src, list) and len(src) >= 1):
        return e + ["no sources"]
    paths = []
    for f in src:
        p = f.get("path") if isinstance(f, dict) else None
        if not (nonempty(p) and nonempty(f.get("content"))) or p.startswith("/") or ".." in p.split("/"):
            e.append("source %r" % p)
        paths.append(p)
    if len(set(paths)) != len(paths):
        e.append("duplicate source paths")
    if nonempty(ep) and ep.split("::")[0] not in paths:
        e.append("entry file %s is not among the sources" % ep.split("::")[0])
    return e


def check_fib(root):
    errors = []

    def err(where, msg):
        errors.append("%s: %s" % (where, msg))

    def rel(p):
        return os.path.relpath(p, root)

    # FIB's validator indexes only these depths; anything else under its folders it skips
    # without a word, which is a file FIB does not read.
    depth = {"definitions": 2, "workloads": 2, "solutions": 4, "traces": 3}
    for top, n in depth.items():
        for p in glob.glob(root + "/" + top + "/**/*", recursive=True):
            if os.path.isfile(p) and len(rel(p).split(os.sep)) - 1 != n:
                err(rel(p), "not where FIB's validator looks (%s/ holds files %d deep)" % (top, n))
    defs, workloads, solutions = {}, {}, {}
    for p in sorted(glob.glob(root + "/definitions/*/*.json")):
        d = json.load(open(p))
        op, name = rel(p).split(os.sep)[1], os.path.basename(p)[:-5]
        for m in definition_errors(d):
            err(rel(p), m)
        if d.get("name") != name or d.get("op_type") != op:
            err(rel(p), "name / op_type %r / %r differ from the path" % (d.get("name"), d.get("op_type")))
        if name in defs:
            err(rel(p), "duplicate definition name")
        defs[name] = (op, d)
    for p in sorted(glob.glob(root + "/solutions/*/*/*/*.json")):
        s = json.load(open(p))
        author, op, dname, fname = rel(p).split(os.sep)[1:]
        for m in solution_errors(s):
            err(rel(p), m)
        if (s.get("author"), s.get("definition"), s.get("name")) != (author, dname, fname[:-5]):
            err(rel(p), "author / definition / name differ from the path")
        if dname in defs and defs[dname][0] != op:
            err(rel(p), "op_type folder differs from the definition's")
        if s.get("name") in [x for v in solutions.values() for x in v]:
            err(rel(p), "duplicate solution name (TraceSet.from_path refuses it)")
        solutions.setdefault(dname, []).append(fname[:-5])
    for p in sorted(glob.glob(root + "/workloads/*/*.jsonl")):
        op, name = rel(p).split(os.sep)[1], os.path.basename(p)[:-6]
        if name not in defs:
            err(rel(p), "no definition")
            continue
        d = defs[name][1]
        if op != defs[name][0]:
            err(rel(p), "op_type folder differs from the definition's")
        var = {k for k, a in d["axes"].items() if axis_kind(a) == "var"}
        for n, line in enumerate(l for l in open(p) if l.strip()):
            t = json.loads(line)
            where = "%s line %d" % (rel(p), n + 1)
            ms = workload_errors(t)
            for m in ms:
                err(where, m)
            if ms:
                continue
            w = t["workload"]
            workloads.setdefault(name, set()).add(w["uuid"])
            if t.get("solution") is not None or t.get("evaluation") is not None:
                err(where, "a workload entry with a solution or evaluation")
            if t["definition"] != name:
                err(where, "definition %s" % t["definition"])
            if set(w["axes"]) != var:
                err(where, "axes %s, the definition's var axes are %s" % (sorted(w["axes"]), sorted(var)))
            for k, v in w["axes"].items():
                if v <= 0:
                    err(where, "axis %s has non-positive value %d" % (k, v))
            if set(w["inputs"]) != set(d["inputs"]):
                err(where, "inputs %s differ from the definition's" % sorted(w["inputs"]))
                continue
            sizes = dict(w["axes"], **{k: a["value"] for k, a in d["axes"].items() if axis_kind(a) == "const"})
            for k, i in w["inputs"].items():
                spec, kind = d["inputs"][k], input_kind(i)
                if (kind == "scalar") == (spec["shape"] is not None) or \
                        (kind != "scalar" and spec["shape"] is None):
                    err(where, "%s is %s but the definition expects %s" % (
                        k, kind, "a scalar" if spec["shape"] is None else "a tensor"))
                    continue
                if kind == "safetensors":
                    bp = os.path.join(root, i["path"])
                    if not os.path.exists(bp):
                        err(where, "blob missing at %s" % i["path"])
                        continue
                    tensors, _ = read_safetensors(bp)
                    if i["tensor_key"] not in tensors:
                        err(where, "tensor key %s not in %s" % (i["tensor_key"], i["path"]))
                    elif ST_DTYPES.get(tensors[i["tensor_key"]][0]) != spec["dtype"]:
                        err(where, "load_safetensors: '%s' expected %s, got %s" % (
                            k, spec["dtype"], tensors[i["tensor_key"]][0]))
                    elif tensors[i["tensor_key"]][1] != [sizes.get(a) for a in spec["shape"]]:
                        err(where, "%s shape %r, the definition gives %r" % (
                            k, tensors[i["tensor_key"]][1], [sizes.get(a) for a in spec["shape"]]))
    for p in sorted(glob.glob(root + "/traces/*/*/*.jsonl")):
        author, op, fname = rel(p).split(os.sep)[1:]
        name = fname[:-6]
        if name not in defs:
            err(rel(p), "no definition %s" % name)
            continue
        if op != defs[name][0]:
            err(rel(p), "op_type folder differs from the definition's")
        covered = set()
        for n, line in enumerate(l for l in open(p) if l.strip()):
            t = json.loads(line)
            where = "%s line %d" % (rel(p), n + 1)
            for m in workload_errors(t):
                err(where, m)
            if t.get("definition") != name:
                err(where, "definition %s" % t.get("definition"))
            if t.get("solution") is None or t.get("evaluation") is None:
                err(where, "missing solution or evaluation")
                continue
            for m in evaluation_errors(t["evaluation"]):
                err(where, m)
            if t["solution"] not in solutions.get(name, []):
                err(where, "trace references unknown solution '%s'" % t["solution"])
            covered.add(t["workload"]["uuid"])
        if workloads.get(name, set()) - covered:  # a warning in FIB's validator
            print("FIB warning: %s: author %s misses %d workload(s)" % (
                rel(p), author, len(workloads[name] - covered)))
    for e in errors:
        print("FIB: " + e)
    if errors:
        fail("%s: %d error(s) as FIB reads it" % (root, len(errors)))
    print("%s: %d definition(s), %d workload(s), %d solution(s) valid as FIB reads them" % (
        root, len(defs), sum(map(len, workloads.values())), sum(map(len, solutions.values()))))


def show_trace(root, uuid):
    for p in glob.glob(root + "/traces/*/*/*.jsonl"):
        for line in open(p):
            t = json.loads(line)
            if t["workload"]["uuid"] == uuid:
                ev = t["evaluation"]
                c = ev.get("correctness") or {}
                print(ev["status"], c.get("max_absolute_error"), c.get("max_relative_error"))
                return
    fail("no trace of %s in %s" % (uuid, root))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make_good(sys.argv[2] + "/good", sys.argv[3])
        make_typeless(sys.argv[2] + "/typeless")
        make_empty(sys.argv[2] + "/empty")
        make_fp8(sys.argv[2] + "/fp8")
        make_bad(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check-kvfz":
        check_kvfz(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "check-export":
        check_export(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "check-fib":
        check_fib(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "trace":
        show_trace(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
