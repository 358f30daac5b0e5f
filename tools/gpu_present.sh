#!/usr/bin/env bash
# Exit 0 when this machine has an NVIDIA GPU the driver answers for (nvidia-smi lists one), else 1.
# The quickstart builds the CUDA backend only then (or when ZT_CUDA=ON asks for it).
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
