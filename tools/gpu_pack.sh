#!/usr/bin/env bash
# Run HERE, before a device session: builds the GPU binaries (sm_90 SASS + PTX, for the H100/H200)
# on this machine and packs them into .gpu_build/ (ignored by git), so the lent machine's minutes
# go to running, not compiling. Carry [".gpu_deps", ".gpu_build"]; tools/gpu_session.sh unpacks
# the binaries and the CTest files there instead of building.
#
# The pack records what it was built from: the commit, and the sha256 of every source file that goes
# into a binary (tracked C++, CUDA and CMake files: source_sums). tools/gpu_session.sh checks those
# sums against the tree it runs in and refuses a pack built from other sources, so a result can never
# be the binaries of another commit (docs, configs and scripts may change between pack and call).
#
# Also built into the pack: llm.c's train_gpt2cu (the benchmark anchor, from
# ../shared/third_party/llm.c, built outside the repository in .gpu_llmc/ and kept there while its
# sources are unchanged; PROVENANCE.md there has the recipe), so nothing is compiled on the GPU.
#
# What makes the binaries travel: this machine's glibc and libstdc++ are older than the GPU image's
# (Debian 12 against the image's Ubuntu 24.04), so what links here loads there; fmt, zlib, OpenBLAS
# and OpenMPI come from .gpu_deps (tools/gpu_deps.sh); CUDA's runtime, cuBLASLt, NCCL and cuDNN from
# the image's toolkit or PyTorch's wheels. The CTest files name this checkout's absolute paths: the
# session links that path to its own copy of the tree (build_dir below), and the Python tests reach
# the GPU machine's python3 through /tmp/zt_gpu_python, a wrapper the session writes.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ZT_GPU_BUILD_DIR:-build-gpu}
targets=(zerotrain zt_gpu_tests zt_bench_kernels)
started=$SECONDS
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=ON -DZT_PYTHON=/tmp/zt_gpu_python >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
grep -q '^ZT_MPI:BOOL=ON' "$build/CMakeCache.txt" || {
  echo "gpu_pack: error: the GPU build has no MPI (install libopenmpi-dev): several ranks on one GPU need it" >&2
  exit 1
}

# llm.c's train_gpt2cu, rebuilt only when its sources changed.
llmc_src=${ZT_LLMC_SOURCE:-../shared/third_party/llm.c}
llmc_dir=.gpu_llmc
if [ -d "$llmc_src" ]; then
  llmc_sum=$(cd "$llmc_src" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
  if [ ! -x "$llmc_dir/train_gpt2cu" ] || [ "$(cat "$llmc_dir/source_sum" 2>/dev/null)" != "$llmc_sum" ]; then
    rm -rf "$llmc_dir"
    mkdir -p "$llmc_dir"
    cp -r "$llmc_src"/. "$llmc_dir/"
    frontend=$(ls -d "$PWD"/.deps/cudnn-frontend-* 2>/dev/null | head -1)
    [ -n "$frontend" ] || { echo "gpu_pack: error: no cuDNN frontend in .deps (tools/setup.sh fetches it)" >&2; exit 1; }
    ln -sfn "$frontend" "$llmc_dir/cudnn-frontend"
    echo "gpu_pack: building llm.c's train_gpt2cu (about 2.5 minutes on 2 cores)"
    (cd "$llmc_dir" && PATH="/usr/local/cuda/bin:$PATH" make train_gpt2cu USE_CUDNN=1 GPU_COMPUTE_CAPABILITY=90 \
      NO_MULTI_GPU=1 NO_NVML=1 NVCC_LDLIBS="-lmpi -lnvrtc" >build.log 2>&1) ||
      { tail -30 "$llmc_dir/build.log" >&2; echo "gpu_pack: error: llm.c did not build" >&2; exit 1; }
    echo "$llmc_sum" >"$llmc_dir/source_sum"
  fi
else
  echo "gpu_pack: warning: no llm.c sources at $llmc_src: the pack has no llm.c anchor" >&2
fi

rm -rf .gpu_build
mkdir -p .gpu_build
# The binaries and every CTest file (the gtest lists written at build time included), compressed.
(cd "$build" && find . \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) -print0 |
  tar --null -T - -czf "$OLDPWD/.gpu_build/build-gpu.tar.gz" zerotrain tests/zt_gpu_tests tools/zt_bench_kernels)
[ -x "$llmc_dir/train_gpt2cu" ] && cp "$llmc_dir/train_gpt2cu" .gpu_build/
echo "$PWD/$build" >.gpu_build/build_dir
# What the binaries were built from, file by file (checked by tools/gpu_session.sh).
git ls-files -z '*.cpp' '*.h' '*.inc' '*.cu' '*.cuh' '*CMakeLists.txt' '*.cmake' | xargs -0 sha256sum >.gpu_build/source_sums
dirty=$(git status --porcelain --untracked-files=no -- '*.cpp' '*.h' '*.inc' '*.cu' '*.cuh' '*CMakeLists.txt' '*.cmake')
{
  echo "commit: $(git rev-parse HEAD)${dirty:+ + uncommitted changes to sources}"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(g++ --version | head -1), in $((SECONDS - started)) s"
  echo "nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version) | tail -1)"
  echo "cuda architectures: $(grep -m1 '^CMAKE_CUDA_ARCHITECTURES' "$build/CMakeCache.txt" | cut -d= -f2)"
  echo "mpi: $(ldd "$build/zerotrain" | grep -o "libmpi[^ ]*" | head -1)"
  echo "llm.c: $([ -x .gpu_build/train_gpt2cu ] && echo "train_gpt2cu from $llmc_src ($(cat "$llmc_dir/source_sum"))" || echo none)"
} >.gpu_build/build_info.txt
git rev-parse HEAD >.gpu_build/commit
cat .gpu_build/build_info.txt
echo "gpu_pack: $(du -sh .gpu_build | cut -f1) in .gpu_build (carry it with .gpu_deps: [\".gpu_deps\", \".gpu_build\"])"
