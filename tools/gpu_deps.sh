#!/usr/bin/env bash
# Run HERE, before a device session: downloads the Debian packages a zerotrain build needs that
# the lent GPU machine's image lacks (it has CUDA, CMake, ninja and PyTorch, but not fmt,
# nlohmann-json, GoogleTest, zlib's headers or OpenBLAS, and nothing can be fetched there) into
# .gpu_deps/ (ignored by git). Carry that folder in each device call; tools/gpu_session.sh
# unpacks it into /tmp there. About 13 MB. No root needed, nothing is installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  libfmt-dev libfmt9                 # formatting (headers, CMake config, the shared library)
  nlohmann-json3-dev                 # config parsing (headers, CMake config)
  libgtest-dev                       # GoogleTest (static libraries, CMake config)
  zlib1g-dev zlib1g                  # crc32 for checkpoint checksums
  libopenblas0-openmp libgfortran5 libquadmath0  # CPU reference products in the GPU tests (dlopened)
  libgomp1                           # OpenMP's runtime, used only where the image lacks one
  # OpenMPI (the image has none): mpirun for several ranks on the one GPU (comm.backend = mpi), and
  # libmpi, which zerotrain and llm.c's train_gpt2cu link; relocated by OPAL_PREFIX there.
  openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libmunge2
)
mkdir -p .gpu_deps
cd .gpu_deps
rm -f ./*.deb
apt-get download "${packages[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
count=$(ls ./*.deb 2>/dev/null | wc -l)
if [ "$count" -ne "${#packages[@]}" ]; then
  echo "gpu_deps: error: expected ${#packages[@]} packages in .gpu_deps, got $count" >&2
  exit 1
fi
echo "gpu_deps: $count packages, $(du -sh . | cut -f1) in .gpu_deps (carry it: [\".gpu_deps\"])"
