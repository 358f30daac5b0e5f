#!/usr/bin/env bash
# The README's second command (and CI's): install what is missing, build, run every test with
# ctest. GPU tests (label gpu) skip with a visible reason when no device is present.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
cd build
ctest --output-on-failure --timeout 900 -j "$(nproc 2>/dev/null || echo 2)" "$@"
