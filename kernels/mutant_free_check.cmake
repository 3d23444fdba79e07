# Fails when a production source under kernels/ holds a preprocessor conditional on a mutant
# macro (KVF_MUTANT_*): a mutant is a constant KVF_MUT(X) test or a Bug policy, so that every
# branch compiles in every build (kernels/mutants.h, docs/mutants.md). The mutant sources
# (cpu/cpu_mutant.c, cuda/mutants/) are the only ones the build gives such macros.
# Usage: cmake -DKERNELS_DIR=<kernels/> -P mutant_free_check.cmake
if(NOT IS_DIRECTORY "${KERNELS_DIR}")
  message(FATAL_ERROR "KERNELS_DIR (${KERNELS_DIR}) is not a directory")
endif()
file(GLOB_RECURSE srcs "${KERNELS_DIR}/*.c" "${KERNELS_DIR}/*.h" "${KERNELS_DIR}/*.cu"
  "${KERNELS_DIR}/*.cuh" "${KERNELS_DIR}/*.def")
set(scanned 0)
set(bad "")
foreach(f IN LISTS srcs)
  if(f MATCHES "/cuda/mutants/" OR f MATCHES "/cpu/cpu_mutant\\.c$")
    continue()
  endif()
  math(EXPR scanned "${scanned} + 1")
  file(STRINGS "${f}" hits REGEX "^[ \t]*#[ \t]*(if|ifdef|ifndef|elif)[^\n]*KVF_MUTANT_")
  foreach(h IN LISTS hits)
    string(APPEND bad "\n  ${f}: ${h}")
  endforeach()
endforeach()
# The scan must have seen the sources the mutants live in, or it proves nothing.
if(scanned LESS 10 OR NOT EXISTS "${KERNELS_DIR}/cuda/decode.cuh"
   OR NOT EXISTS "${KERNELS_DIR}/cpu/splitkv_algo.h")
  message(FATAL_ERROR "mutant-free check: expected the kernel sources under ${KERNELS_DIR} "
    "(scanned ${scanned} files)")
endif()
if(bad)
  message(FATAL_ERROR "production sources with a preprocessor conditional on a mutant:${bad}")
endif()
message(STATUS "mutant-free check: ${scanned} production sources, none conditional on a mutant")
