#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GPU tests skip with a reason where no GPU is;
# the Slurm test starts and stops a one-node cluster of its own, scripts/slurm/local-cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
KVF_WITH_BROWSER=1 KVF_WITH_CLANG=1 KVF_WITH_PYTHON=1 KVF_WITH_SLURM=1 scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
