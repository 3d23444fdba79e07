#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: the CPU libFuzzer targets exactly as `KVF_FUZZERS=ON`
# builds them (fuzz_case and fuzz_decode_cpu with their options, dictionaries and seed corpora),
# copied to $OUT. The builder's CC, CFLAGS and sanitizer flags apply on top of the targets' own.
src=${SRC:?}/kvfuzz
build=${WORK:-/tmp}/kvfuzz-build
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVF_CUDA=OFF -DKVF_FUZZERS=ON \
  -DCMAKE_C_COMPILER="${CC:-clang}"
targets=(fuzz_case fuzz_decode_cpu)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" \
  "${targets[@]/%/_seed_corpus}"
for t in "${targets[@]}"; do
  cp "$build/fuzz/$t" "$build/fuzz/$t.options" "$build/fuzz/$t.dict" \
    "$build/fuzz/${t}_seed_corpus.zip" "$OUT/"
done
