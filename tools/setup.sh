#!/usr/bin/env bash
# Installs what zerotrain needs from Debian's packages, and only what is missing (idempotent).
# Runs apt-get directly as root, through sudo otherwise. The CUDA toolkit is expected under
# /usr/local/cuda (the build works without it: the CUDA backend is then left out).
set -euo pipefail

packages=(
  build-essential cmake           # compiler and build system
  nlohmann-json3-dev libfmt-dev   # config/headers, formatting
  googletest libgtest-dev         # unit tests
  libopenblas-dev libopenblas0-openmp  # CPU matrix products (OpenMP build shares our thread pool)
  python3-torch python3-numpy     # numerical reference for the parity tests (/usr/bin/python3)
  python3-matplotlib              # tools/plot_run.py loss curves
  libopenmpi-dev openmpi-bin      # CPU ranks as processes (mpirun)
  zlib1g-dev                      # crc32 checksums of checkpoint files
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
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
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
