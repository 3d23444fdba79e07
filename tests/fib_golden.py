#!/usr/bin/env python3
"""Golden FlashInfer-Bench data for kvfuzz's FIB interop tests, made independently of kvfuzz's
writers: only json and struct, every byte laid out here from FIB's documented formats.

  fib_golden.py make OUT SEED_DEFINITION.json
      OUT/good: a dataset (a tiny gqa_paged_decode definition, the seed definition, a gemm
      definition kvfuzz skips, workloads with safetensors, scalar and random inputs, their
      blobs, a trace whose errors are the strings "NaN" and "Infinity"); OUT/bad/<name>/: one
      definition.json + workloads.jsonl (+ blob) per malformed input.
  fib_golden.py check-kvfz CASE.kvfz UUID
      decodes the .kvfz (docs/case-format.md) and compares its tensors bit for bit with what
      `make` wrote for workload UUID, and its origin with the workload's names.
  fib_golden.py check-export DIR UUID...
      reads the dataset kvfuzz exported and compares every blob tensor bit for bit with what
      `make` wrote, and checks the definition, workload and trace records.
"""
import json
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
            vals = bf16_values(n, seed * 7 + i)
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
    # A trace as FIB writes a failed evaluation: non-finite errors as strings.
    trace = workload_line(DEF, "w-all-stored", WORKLOADS["w-all-stored"], tensors_of("w-all-stored", WORKLOADS["w-all-stored"]))
    trace["solution"] = "some_solution"
    trace["evaluation"] = {"status": "INCORRECT_NUMERICAL", "environment": {"hardware": "NVIDIA_H200", "libs": {}},
                           "timestamp": "2026-01-01T00:00:00", "log": "",
                           "correctness": {"max_relative_error": "NaN", "max_absolute_error": "Infinity", "extra": None}}
    write(out + "/traces/gqa_paged/%s.jsonl" % DEF, json.dumps(trace) + "\n")


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
    if at != len(b):
        fail("%s: %d bytes left after the sections" % (path, len(b) - at))
    return case


def expected(uuid):
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
    for name in ("q", "k_cache", "v_cache"):
        if name in t and c[name] != t[name][3]:
            bad = next(i for i, (a, e) in enumerate(zip(c[name], t[name][3])) if a != e)
            fail("%s: %s[%d] = 0x%04x, wanted 0x%04x" % (path, name, bad, c[name][bad], t[name][3][bad]))
    print("%s: %s bit for bit" % (path, ", ".join(n for n in ("q", "k_cache", "v_cache") if n in t) or "table"))


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
        traces = [json.loads(l) for l in open(root + "/traces/gqa_paged/%s.jsonl" % defname)]
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


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make_good(sys.argv[2] + "/good", sys.argv[3])
        make_bad(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check-kvfz":
        check_kvfz(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "check-export":
        check_export(sys.argv[2], sys.argv[3:])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
