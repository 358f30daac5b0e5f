#!/usr/bin/env bash
# The README's first command: install what is missing, build, and train the tiny GPT on the
# embedded generated dataset (a few minutes on 2 cores). Prints the loss curve's ends, the
# validation loss beside the data's unigram entropy, a text sample and the memory table.
# Extra arguments go to `zerotrain train` (e.g. --set train.max_steps=100).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
./build/zerotrain train --config configs/tiny.json --run-dir runs/quickstart --set log.progress=plain "$@"
echo "plot the loss curve: /usr/bin/python3 tools/plot_run.py runs/quickstart  (writes runs/quickstart/loss.png)"
