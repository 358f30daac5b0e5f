#!/usr/bin/env bash
# Run HERE, before a device session: builds the GPU binaries (sm_90 SASS + PTX, for the H100/H200)
# on this machine and packs them into .gpu_build/ (ignored by git), so the lent machine's minutes
# go to running, not compiling. Carry [".gpu_deps", ".gpu_build"]; tools/gpu_session.sh unpacks
# the binaries and the CTest files there instead of building.
#
# What makes the binaries travel: this machine's glibc and libstdc++ are older than the GPU image's
# (Debian 12 against the image's Ubuntu 24.04), so what links here loads there; fmt, zlib and
# OpenBLAS come from .gpu_deps (tools/gpu_deps.sh); CUDA's runtime, cuBLASLt and NCCL from the
# image's toolkit or PyTorch's wheels. MPI is left out (the image has no OpenMPI; one process
# drives the one GPU). The CTest files name this checkout's absolute paths: the session links
# that path to its own copy of the tree (source_dir below), and the Python tests reach the GPU
# machine's python3 through /tmp/zt_gpu_python, a wrapper the session writes.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ZT_GPU_BUILD_DIR:-build-gpu}
targets=(zerotrain zt_gpu_tests zt_bench_kernels)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=ON -DZT_MPI=OFF \
  -DZT_PYTHON=/tmp/zt_gpu_python >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

rm -rf .gpu_build
mkdir -p .gpu_build
# The binaries and every CTest file (the gtest lists written at build time included).
(cd "$build" && find . \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) -print0 |
  tar --null -T - -cf "$OLDPWD/.gpu_build/build-gpu.tar" zerotrain tests/zt_gpu_tests tools/zt_bench_kernels)
echo "$PWD/$build" >.gpu_build/build_dir
{
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(g++ --version | head -1)"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || /usr/local/cuda/bin/nvcc --version | tail -1)"
  echo "cuda architectures: $(grep -m1 '^CMAKE_CUDA_ARCHITECTURES' "$build/CMakeCache.txt" | cut -d= -f2)"
} >.gpu_build/build_info.txt
cat .gpu_build/build_info.txt
echo "gpu_pack: $(du -sh .gpu_build | cut -f1) in .gpu_build (carry it with .gpu_deps: [\".gpu_deps\", \".gpu_build\"])"
