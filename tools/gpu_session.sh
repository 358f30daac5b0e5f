#!/usr/bin/env bash
# Run ON THE LENT GPU MACHINE, one device call per phase (each under the 10-minute command limit):
#   bash tools/gpu_session.sh tests   # build; ctest -L gpu; compute-sanitizer memcheck on zt_gpu_tests
#   bash tools/gpu_session.sh bench [ARGS]  # build; zt_bench_kernels; tools/bench_gpu.py ARGS (default:
#                                           # stages 0-3 vs PyTorch; e.g. --stages 0 3 if time is short)
#   bash tools/gpu_session.sh shakespeare   # build zerotrain; its half of tools/shakespeare_gpu.py
#                                           # (carry runs/shakespeare_char too; docs/gpu_backend.md)
# with carry [".gpu_deps", ".gpu_build"] (made here by tools/gpu_deps.sh and tools/gpu_pack.sh: with
# .gpu_build the binaries built here run and nothing is compiled there; without it, it builds). It unpacks those packages into
# /tmp/zt_deps (never into /), points CMake and the loader at them, takes NCCL from the CUDA
# toolkit or else from PyTorch's nvidia-nccl wheel, and keeps going past a failing step so one
# call brings back everything it can. Everything lands in $OUT (at most 8 files come back):
# session_<phase>.txt (device, commit, toolkit, each step's status and seconds), the logs, and
# the result JSONs, which then go into docs/results/ here.
set -uo pipefail
cd "$(dirname "$0")/.."
phase=${1:-}
if [ "$phase" != tests ] && [ "$phase" != bench ] && [ "$phase" != shakespeare ]; then
  echo "usage: tools/gpu_session.sh tests|bench|shakespeare" >&2
  exit 2
fi
OUT=${OUT:-/tmp/zt_gpu_session}
mkdir -p "$OUT"
budget=${ZT_SESSION_SECONDS:-570}  # the device's 600 s command limit, less the copy back
summary="$OUT/session_$phase.txt"
# ZT_COMMIT=<hash> names the commit when the tree travelled without .git (the device tool's copies).
commit=${ZT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export ZT_COMMIT=$commit
# On this machine a GPU test that finds no device fails instead of skipping (a driver older than
# the toolkit must not read as "all passed").
export ZT_REQUIRE_GPU=1
{
  echo "phase: $phase"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit$(git diff --quiet HEAD 2>/dev/null || echo ' (no git here, or the working tree differs)')"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
  echo "gcc: $(gcc --version 2>&1 | head -1)"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "cmake: $(cmake --version 2>&1 | head -1)"
  echo "python: $(command -v python3) $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
  # Which of the GPU libraries the machine has, and where (the toolkit first, then PyTorch's wheels).
  for lib in libcudart.so.13 libcublasLt.so.13 libnccl.so.2 libcudnn.so.9; do
    found=$(ls /usr/local/cuda/lib*/$lib /usr/local/cuda/targets/*/lib/$lib 2>/dev/null | head -1)
    [ -z "$found" ] && found=$(python3 -c "import nvidia, glob, sys; print(next(iter(sorted(g for p in nvidia.__path__ for g in glob.glob(p + '/*/lib/$lib*'))), ''))" 2>/dev/null)
    echo "$lib: ${found:-not found}"
    [ "$lib" = libcudnn.so.9 ] && echo "$found" >/tmp/zt_cudnn_lib
  done
} >"$summary"
# cuDNN (loaded at run time by the cuDNN attention): PyTorch's wheel where the toolkit has none;
# where the machine has it, the GPU tests must run it rather than skip.
cudnn_lib=$(cat /tmp/zt_cudnn_lib 2>/dev/null)
if [ -n "$cudnn_lib" ]; then
  export LD_LIBRARY_PATH="$(dirname "$cudnn_lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export ZT_REQUIRE_CUDNN=1
fi

# step NAME SECONDS CMD...: runs CMD with a time limit (never past the budget), logs status.
failed=0
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "$name: skipped (budget spent)" >>"$summary"
    failed=1
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS rc=0
  timeout "$limit" "$@" || rc=$?
  echo "$name: $([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc$([ $rc -eq 124 ] && echo ', time limit'))") in $((SECONDS - t0)) s" >>"$summary"
  [ $rc -eq 0 ] || failed=1
  return $rc
}

# The carried packages, unpacked where nothing of the image is touched.
deps=/tmp/zt_deps
if ls .gpu_deps/*.deb >/dev/null 2>&1; then
  for f in .gpu_deps/*.deb; do dpkg -x "$f" "$deps"; done
  # zlib1g-dev's libz.so points at /lib/...: point it at the unpacked library instead.
  ln -sf "$deps/lib/x86_64-linux-gnu/libz.so.1" "$deps/usr/lib/x86_64-linux-gnu/libz.so"
  export CMAKE_PREFIX_PATH="$deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  # Not $deps/lib (zlib's runtime): python and torch keep the image's libz; zerotrain finds the
  # carried one through its build RUNPATH.
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  zlib_args=(-DZLIB_INCLUDE_DIR="$deps/usr/include" -DZLIB_LIBRARY="$deps/lib/x86_64-linux-gnu/libz.so.1")
  echo "deps: $(ls .gpu_deps/*.deb | wc -l) packages unpacked into $deps" >>"$summary"
else
  zlib_args=()
  echo "deps: none carried (.gpu_deps missing): the image's own libraries must do" >>"$summary"
fi

# NCCL: beside the CUDA toolkit if it is there, else PyTorch's wheel (which has no libnccl.so link).
nccl_args=()
if ls /usr/local/cuda/include/nccl.h >/dev/null 2>&1; then
  if ! ls /usr/local/cuda/lib*/libnccl.so >/dev/null 2>&1; then  # only libnccl.so.2: name it
    nccl_lib=$(ls /usr/local/cuda/lib*/libnccl.so.* 2>/dev/null | head -1)
    [ -n "$nccl_lib" ] && nccl_args=(-DZT_NCCL_LIBRARY="$nccl_lib")
  fi
else
  nccl_dir=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  nccl_lib=$(ls "$nccl_dir"/lib/libnccl.so* 2>/dev/null | head -1)
  if [ -n "$nccl_dir" ] && [ -n "$nccl_lib" ]; then
    nccl_args=(-DZT_NCCL_INCLUDE_DIR="$nccl_dir/include" -DZT_NCCL_LIBRARY="$nccl_lib")
    export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "nccl: $nccl_lib (PyTorch's wheel)" >>"$summary"
  fi
fi

python=${ZT_SESSION_PYTHON:-$(command -v python3)}  # there: the python3 that holds PyTorch and numpy
targets=(zerotrain zt_gpu_tests zt_bench_kernels)
# What ctest -L gpu runs needs these two; the CPU and emulation suites (a TSan build among them) are
# CI's, and a test binary that cannot start during discovery would fail the whole build.
[ "$phase" = tests ] && targets=(zerotrain zt_gpu_tests)
[ "$phase" = shakespeare ] && targets=(zerotrain)
built=0
if [ -f .gpu_build/build-gpu.tar ]; then
  # Built here by tools/gpu_pack.sh: unpack the binaries and CTest files where they were built (a
  # link from that path to this copy of the tree), and give the CTest files' python a fixed path.
  cat .gpu_build/build_info.txt >>"$summary"
  packed_dir=$(cat .gpu_build/build_dir)
  packed_src=$(dirname "$packed_dir")
  if [ "$packed_src" != "$PWD" ]; then
    if [ -e "$packed_src" ] && [ "$(cd "$packed_src" && pwd -P)" != "$(pwd -P)" ]; then
      echo "prebuilt: $packed_src exists here and is not this tree; cannot place the packed build" >>"$summary"
      cat "$summary"
      exit 1
    fi
    mkdir -p "$(dirname "$packed_src")"
    ln -sfn "$PWD" "$packed_src"
  fi
  rm -rf "build-gpu"
  mkdir -p "build-gpu"
  tar -xf .gpu_build/build-gpu.tar -C "build-gpu"
  [ "$(basename "$packed_dir")" != build-gpu ] && ln -sfn "$PWD/build-gpu" "$packed_dir"
  printf '#!/bin/sh\nexec %s "$@"\n' "$python" >/tmp/zt_gpu_python
  chmod +x /tmp/zt_gpu_python
  # The image may lack libgomp (OpenMP's runtime): the carried one then, and only then.
  if ! ldconfig -p | grep -q 'libgomp.so.1 ' && ls .gpu_deps/libgomp1_*.deb >/dev/null 2>&1; then
    dpkg -x .gpu_deps/libgomp1_*.deb "$deps/gomp"
    export LD_LIBRARY_PATH="$deps/gomp/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
  fi
  # After RUNPATH (/usr/local/cuda/lib here): where else the image may keep CUDA's libraries.
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
  missing=$(ldd build-gpu/zerotrain | grep "not found" | tr -s ' \t\n' ' ')
  echo "prebuilt: binaries from .gpu_build; ${missing:+MISSING LIBRARIES: $missing}${missing:-every library found}" >>"$summary"
  [ -z "$missing" ] && built=1
elif step configure 120 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=ON -DZT_CUDA_WERROR=OFF -DZT_PYTHON="$python" \
    "${zlib_args[@]}" "${nccl_args[@]}" >"$OUT/build_$phase.log" 2>&1; then
  step build 400 cmake --build build-gpu -j "$(nproc)" --target "${targets[@]}" >>"$OUT/build_$phase.log" 2>&1 && built=1
fi
if [ "$built" -ne 1 ]; then
  tail -40 "$OUT/build_$phase.log"
  cat "$summary"
  exit 1
fi

if [ "$phase" = tests ]; then
  # Every GPU-labelled test: the kernels against the CPU, NCCL on one rank, parity_cuda.*, the model.
  step "ctest -L gpu" 330 bash -c "cd build-gpu && ctest -L gpu --output-on-failure --timeout ${ZT_CTEST_TIMEOUT:-300} -j 2" \
    >"$OUT/ctest_gpu.log" 2>&1
  grep -E "tests passed|tests failed" "$OUT/ctest_gpu.log" >>"$summary"
  echo "skipped: $(grep -c '(Skipped)' "$OUT/ctest_gpu.log")" >>"$summary"
  # Out-of-bounds and misaligned accesses in the kernels (memcheck is slow: what fits).
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # Without the NCCL cases: they hold streams with host functions and wait on peers, slow under
  # memcheck; a time limit there would read as a finding.
  step "compute-sanitizer memcheck" 150 "$sanitizer" --tool memcheck --error-exitcode 1 \
    build-gpu/tests/zt_gpu_tests --gtest_brief=1 --gtest_filter=-NcclOneRank.* >"$OUT/sanitizer.log" 2>&1
  tail -3 "$OUT/sanitizer.log" >>"$summary"
elif [ "$phase" = shakespeare ]; then
  # Whatever the build left of the budget; exit 3 = stopped with a checkpoint, call again to continue.
  step shakespeare_gpu $((budget - SECONDS)) env PYTHONUNBUFFERED=1 "$python" tools/shakespeare_gpu.py --engines zerotrain \
    --zerotrain build-gpu/zerotrain --data runs/shakespeare_char --commit "$commit" --set precision.matmul=bf16 --set precision.activations=bf16 \
    --time-limit $((budget - SECONDS - 40)) >"$OUT/shakespeare_zerotrain.log" 2>&1
  cp docs/results/shakespeare_gpu_*.json "$OUT/" 2>/dev/null
else
  step zt_bench_kernels 120 build-gpu/tools/zt_bench_kernels --commit "$commit" >"$OUT/bench_kernels.log" 2>&1
  step bench_gpu 360 env PYTHONUNBUFFERED=1 "$python" tools/bench_gpu.py --zerotrain build-gpu/zerotrain "${@:2}" \
    >"$OUT/bench_gpu.log" 2>&1
  # Stage 0 on the project's flash kernels instead of cuDNN: what cuDNN's attention gives.
  step "bench_gpu flash" 90 env PYTHONUNBUFFERED=1 "$python" tools/bench_gpu.py --zerotrain build-gpu/zerotrain \
    --stages 0 --activations bf16 --no-torch --attention flash --out "$OUT/gpu_bench_flash_attention.json" \
    >"$OUT/bench_gpu_flash.log" 2>&1
  # Stage 0 with the GELU as separate kernels (precision.gelu_epilogue = false): what the epilogues give.
  step "bench_gpu separate gelu" 90 env PYTHONUNBUFFERED=1 "$python" tools/bench_gpu.py --zerotrain build-gpu/zerotrain \
    --stages 0 --activations bf16 --no-torch --gelu-epilogue false --out "$OUT/gpu_bench_separate_gelu.json" \
    >"$OUT/bench_gpu_gelu.log" 2>&1
  cp docs/results/gpu_kernels_*.json docs/results/gpu_bench_*.json "$OUT/" 2>/dev/null
fi
cat "$summary"
exit $failed
