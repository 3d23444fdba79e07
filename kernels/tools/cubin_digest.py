#!/usr/bin/env python3
"""One line per kernel of the given sm_90 cubins: the sha256 of its machine code (the .text
section of the kernel), and the sizes of its parameter block (.nv.constant0) and static shared
memory (.nv.shared). Comparing two trees' digests shows whether their kernels' code changed
(docs/mutants.md), without cuobjdump or nvdisasm.

Kernel names are normalised so that two trees compare: the split, merge and naive kernels by
their (D, G) / (D) template arguments only (the bug policy argument and the parameter type
spelling are dropped), and the anonymous-namespace hash of a file's kernels is dropped.

A cubin of a kernel file, with the flags kernels/CMakeLists.txt uses:
  nvcc -O2 -DNDEBUG -DKVF_HAVE_CUDA=1 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L \
    -Ikernels/include -Icore/include -Iinclude -gencode arch=compute_90,code=sm_90 \
    -lineinfo --expt-relaxed-constexpr -cubin -o X.cubin kernels/cuda/X.cu
Usage: cubin_digest.py A.cubin [B.cubin ...] > digest.txt"""
import hashlib
import re
import struct
import sys


def sections(path):
    d = open(path, 'rb').read()
    if d[:4] != b'\x7fELF' or d[4] != 2:
        sys.exit('%s is not a 64-bit ELF file (a cubin)' % path)
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3A)
    hdrs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    stro = hdrs[shstrndx][4]
    for h in hdrs:
        end = d.index(b'\0', stro + h[0])
        typ, off, size = h[1], h[4], h[5]
        yield d[stro + h[0]:end].decode(), (b'' if typ == 8 else d[off:off + size]), size


def kernel_name(k):
    for pat, fmt in ((r'_ZN3kvf14splitkv_kernelILi(\d+)ELi(\d+)E', 'splitkv_kernel<%s,%s>'),
                     (r'_ZN3kvf12merge_kernelILi(\d+)E', 'merge_kernel<%s>'),
                     (r'_ZN3kvf17merge_warp_kernelILi(\d+)E', 'merge_warp_kernel<%s>'),
                     (r'_ZN3kvf12naive_kernelILi(\d+)E', 'naive_kernel<%s>')):
        m = re.match(pat, k)
        if m:
            return fmt % m.groups()
    return re.sub(r'_GLOBAL__N__[0-9a-f]+_', '_GLOBAL__N__', k)


out = {}
for path in sys.argv[1:]:
    for name, data, size in sections(path):
        for pre in ('.text.', '.nv.constant0.', '.nv.shared.'):
            if name.startswith(pre) and not name.startswith('.nv.shared.reserved'):
                k = pre + kernel_name(name[len(pre):])
                if k in out:
                    sys.exit('%s appears twice' % k)
                out[k] = ('%d %s' % (len(data), hashlib.sha256(data).hexdigest()[:16])
                          if pre == '.text.' else '%d' % size)
for k in sorted(out):
    print(k, out[k])
