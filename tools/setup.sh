#!/usr/bin/env bash
# Installs what zerotrain needs from Debian's packages, and only what is missing (idempotent).
# Runs apt-get directly as root, through sudo otherwise. The CUDA toolkit is expected under
# /usr/local/cuda (the build works without it: the CUDA backend is then left out).
#   tools/setup.sh          everything: the build, the tests and the tools (the test command)
#   tools/setup.sh --main   only what building and running `zerotrain train` needs (the quickstart);
#                           cuDNN's frontend headers too where the CUDA backend is built for it
#                           (a GPU present, or ZT_CUDA=ON)
set -euo pipefail

mode=all
case "${1:-}" in
  --main) mode=main ;;
  "") ;;
  *) echo "usage: tools/setup.sh [--main]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake           # compiler and build system
  nlohmann-json3-dev libfmt-dev   # config/headers, formatting
  libopenblas-dev libopenblas0-openmp  # CPU matrix products (OpenMP build shares our thread pool)
  libopenmpi-dev openmpi-bin      # CPU ranks as processes (mpirun)
  zlib1g-dev                      # crc32 checksums of checkpoint files
)
if [ "$mode" = all ]; then
  packages+=(
    googletest libgtest-dev         # unit tests
    python3-torch python3-numpy     # numerical reference for the parity tests (/usr/bin/python3)
    python3-matplotlib              # tools/plot_run.py loss curves, tools/memory_report.py's chart
    clang-format-14                 # the house style (.clang-format; tests/tools/format_check_test.py)
    git                             # the tests list the tracked files (format check, GPU session pack)
    python3-venv                    # .venv-hf: transformers beside Debian's torch (below)
    strace                          # tests/checkpoint/durability_test.py reads the fsyncs off it
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# cuDNN's frontend (header-only C++, the graph API the fused attention is built with): where nvcc
# and cuDNN are present, its headers come from its PyPI package into .deps/ (ignored by git), once.
# The build finds them there; without them it leaves cuDNN attention out and says so.
cudnn_frontend_version=1.32.0
cudnn_frontend_dir=$(cd "$(dirname "$0")/.." && pwd)/.deps/cudnn-frontend-$cudnn_frontend_version
install_cudnn_frontend() {
  local nvcc
  if [ "$mode" = main ] && [ "${ZT_CUDA:-}" != ON ] && ! "$(dirname "$0")/gpu_present.sh"; then
    return 0  # the quickstart builds no CUDA backend here
  fi
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
  [ -n "$nvcc" ] && [ -f "$(dirname "$nvcc")/../include/cudnn.h" ] || return 0
  [ -f "$cudnn_frontend_dir/include/cudnn_frontend.h" ] && return 0
  local py tmp
  py=$(for p in python3 /usr/bin/python3; do "$p" -m pip --version >/dev/null 2>&1 && echo "$p" && break; done)
  if [ -z "$py" ]; then
    echo "setup: warning: no pip to fetch nvidia-cudnn-frontend's headers; cuDNN attention is left out" >&2
    return 0
  fi
  tmp=$(mktemp -d)
  if "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$cudnn_frontend_version" &&
    "$py" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])' "$tmp"/*.whl "$cudnn_frontend_dir.tmp"; then
    rm -rf "$cudnn_frontend_dir" && mv "$cudnn_frontend_dir.tmp" "$cudnn_frontend_dir"
    echo "setup: cuDNN frontend $cudnn_frontend_version headers in ${cudnn_frontend_dir#$PWD/}"
  else
    rm -rf "$cudnn_frontend_dir.tmp"
    echo "setup: warning: could not fetch nvidia-cudnn-frontend $cudnn_frontend_version; cuDNN attention is left out" >&2
  fi
  rm -rf "$tmp"
}

# transformers from PyPI, which the pretrained-weights tests run against (tests/checkpoint/
# init_from_test.py): a virtual environment that sees Debian's torch and numpy, in .venv-hf/
# (ignored by git), made once. transformers 4.40.2 is the newest that works with Debian's torch.
hf_venv=$(cd "$(dirname "$0")/.." && pwd)/.venv-hf
install_hf_venv() {
  [ "$mode" = all ] || return 0
  "$hf_venv/bin/python" -c "import transformers" >/dev/null 2>&1 && return 0
  rm -rf "$hf_venv"
  if /usr/bin/python3 -m venv --system-site-packages "$hf_venv" &&
    "$hf_venv/bin/python" -m pip install -q --disable-pip-version-check "transformers==4.40.2"; then
    echo "setup: transformers 4.40.2 in ${hf_venv#$PWD/}"
  else
    rm -rf "$hf_venv"
    echo "setup: error: could not install transformers 4.40.2 into .venv-hf" >&2
    exit 1
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  install_cudnn_frontend
  install_hf_venv
  exit 0
fi

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  sudo_cmd=()
elif command -v sudo >/dev/null 2>&1; then
  sudo_cmd=(sudo)
else
  echo "setup: error: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# apt's hundreds of unpacking lines go to a log, shown only if it fails.
log=$(mktemp -t zt_setup_apt.XXXXXX)
started=$SECONDS
if ! { "${sudo_cmd[@]}" apt-get update -qq && \
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  echo "setup: error: apt-get could not install ${missing[*]} (its whole output: $log)" >&2
  exit 1
fi
rm -f "$log"
install_cudnn_frontend
install_hf_venv
echo "setup: done in $((SECONDS - started)) s"
