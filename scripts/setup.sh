#!/usr/bin/env bash
# Installs the Debian packages kvfuzz needs (when missing) and builds it into build/.
# CUDA kernels are built when nvcc is on the PATH or in /usr/local/cuda/bin.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v pkg-config >/dev/null || need+=(pkgconf) # plugins build against kvfuzz through it
[ -f /usr/include/mpfr.h ] || need+=(libmpfr-dev)
[ -f /usr/include/gmp.h ] || [ -f /usr/include/x86_64-linux-gnu/gmp.h ] || need+=(libgmp-dev)
[ -f /usr/include/jansson.h ] || need+=(libjansson-dev)
if [ "${KVF_WITH_BROWSER:-0}" = 1 ] && ! command -v chromium >/dev/null; then need+=(chromium); fi
if [ "${KVF_WITH_CLANG:-0}" = 1 ] && ! command -v clang >/dev/null; then need+=(clang); fi
# Python kernels' tests: Debian's torch (CPU), for the interpreter kvfuzz uses by default.
if [ "${KVF_WITH_PYTHON:-0}" = 1 ] && ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  need+=(python3-torch)
fi
# Campaign arrays' test on a one-node Slurm (tests/slurm_test.sh, scripts/slurm/local-cluster.sh).
if [ "${KVF_WITH_SLURM:-0}" = 1 ]; then
  if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || ! command -v sbatch >/dev/null; then
    need+=(slurm-wlm)
  fi
  [ -x /usr/sbin/munged ] || need+=(munge)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j "$jobs"
