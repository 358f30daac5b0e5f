#!/usr/bin/env bash
# The README's first command: install what is missing, build, and train the tiny GPT on the
# embedded generated dataset (a couple of minutes on 2 cores) on 2 MPI ranks with ZeRO stage 3,
# or on one process when MPI cannot start. Prints the loss curve's ends, the validation loss
# beside the data's unigram entropy, a text sample, the memory table, and the predicted memory
# per rank of every ZeRO stage. Extra arguments go to `zerotrain train`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
mpirun_cmd=(mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2)
if command -v mpirun >/dev/null 2>&1 && "${mpirun_cmd[@]}" ./build/zerotrain version >/dev/null 2>&1; then
  echo "quickstart: 2 ranks (mpirun), ZeRO stage 3"
  "${mpirun_cmd[@]}" ./build/zerotrain train --config configs/tiny.json --run-dir runs/quickstart \
    --set log.progress=plain --set zero.stage=3 --set train.num_threads=1 "$@"
  ranks=2
else
  echo "quickstart: MPI cannot start here; training on a single process instead"
  ./build/zerotrain train --config configs/tiny.json --run-dir runs/quickstart --set log.progress=plain "$@"
  ranks=1
fi
echo
./build/zerotrain memory --config configs/tiny.json --ranks "$ranks"
echo "plot the loss curve: /usr/bin/python3 tools/plot_run.py runs/quickstart  (writes runs/quickstart/loss.png)"
