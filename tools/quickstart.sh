#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job on the
# embedded CPU default (for now: debug-state on configs/default.json, 10 AdamW steps, with the
# memory table; the trainer issue turns this into a full training run).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
mkdir -p runs/quickstart
./build/zerotrain debug-state --config configs/default.json --steps 10 --out runs/quickstart/state.safetensors "$@"
