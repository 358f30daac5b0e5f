#!/usr/bin/env bash
# Configures and builds zerotrain into build/ (Release). Extra arguments go to the CMake configure
# step.
#   tools/build.sh          every target: the engine, the tests, the tools; the CUDA backend whenever
#                           nvcc is found (also under /usr/local/cuda), as CI builds it
#   tools/build.sh --main   the `zerotrain` binary alone (the quickstart). A fresh build/ is then
#                           configured without the tests, and with the CUDA backend only where a GPU
#                           is present or ZT_CUDA=ON asks for it; a build/ configured before keeps
#                           its settings (nothing built there is rebuilt).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
if [ "${1:-}" = --main ]; then
  shift
  settings=()
  if [ ! -f build/CMakeCache.txt ]; then
    cuda=OFF
    if [ "${ZT_CUDA:-}" = ON ] || tools/gpu_present.sh; then cuda=ON; fi
    settings=(-DCMAKE_BUILD_TYPE=Release -DZT_BUILD_TESTS=OFF -DZT_CUDA=$cuda)
  fi
  cmake -S . -B build "${settings[@]}" "$@" >/dev/null
  cmake --build build -j "$jobs" --target zerotrain
  exit 0
fi
# -U ZT_CUDA: the CUDA default is worked out again (nvcc found), also in a build/ the quickstart
# configured without it.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -U ZT_CUDA -DZT_BUILD_TESTS=ON "$@" >/dev/null
cmake --build build -j "$jobs"
