#!/usr/bin/env bash
# The README's second command (and CI's): install what is missing, build every target, run every
# test with ctest. GPU tests (label gpu) skip with a visible reason when no device is present.
# Prints how long set-up, build and tests took, pass or fail.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
report() {
  local rc=$?
  echo "run_tests: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)") in $((SECONDS - started)) s" \
    "(set-up and build ${built:-?} s, tests $((SECONDS - ${tests_started:-$SECONDS})) s) on $(nproc 2>/dev/null || echo '?') cores"
}
trap report EXIT
trap 'exit 130' INT  # so a stopped run reports FAILED, not its last command's status
trap 'exit 143' TERM
tools/setup.sh
tools/build.sh
built=$((SECONDS - started))
tests_started=$SECONDS
cd build
ctest --output-on-failure --timeout 900 -j "$(nproc 2>/dev/null || echo 2)" "$@"
