#!/usr/bin/env bash
# Configures and builds zerotrain into build/ (Release). ZT_CUDA turns on by itself when nvcc is
# found (also under /usr/local/cuda). Extra arguments go to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$jobs"
