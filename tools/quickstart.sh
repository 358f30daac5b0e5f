#!/usr/bin/env bash
# The README's first command: install what `zerotrain train` needs (tools/setup.sh --main), build
# the zerotrain binary alone (tools/build.sh --main: the CUDA backend only where a GPU is present or
# ZT_CUDA=ON), and train the tiny GPT on the embedded generated dataset for 600 steps on 2 MPI ranks
# with ZeRO stage 3 (one process when MPI cannot start). Prints the loss curve's ends, the
# validation loss beside the data's unigram entropy and the context-free floor (the validation
# targets' entropy: no model that ignores context scores below it), a text sample, the run's wall time and its
# memory measured beside the prediction; then the predicted memory per rank of every ZeRO stage for
# GPT-2 124M and the Llama 3.2 1B shape on 8 ranks, where sharding matters; and its own time.
# Extra arguments go to `zerotrain train`.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
tools/setup.sh --main
tools/build.sh --main
echo "quickstart: packages and build in $((SECONDS - started)) s"
train=(train --config configs/tiny.json --run-dir runs/quickstart --set log.progress=plain
  --set train.max_steps=600 --set train.eval_every=200 --set log.every_steps=50)
mpirun_cmd=(mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2)
if command -v mpirun >/dev/null 2>&1 && "${mpirun_cmd[@]}" ./build/zerotrain version >/dev/null 2>&1; then
  echo "quickstart: 2 ranks (mpirun), ZeRO stage 3"
  "${mpirun_cmd[@]}" ./build/zerotrain "${train[@]}" --set zero.stage=3 --set train.num_threads=1 "$@"
else
  echo "quickstart: MPI cannot start here; training on a single process instead"
  ./build/zerotrain "${train[@]}" "$@"
fi
echo
echo "Where sharding matters: the same prediction for models whose model states outweigh the rest"
echo "(bf16 weights, fp32 master weights and AdamW moments; nothing is trained):"
for config in configs/gpt2_124m.json configs/llama3_2_1b.json; do
  echo
  ./build/zerotrain memory --config "$config" --ranks 8 --brief
done
echo
echo "Measured on 4 CPU ranks for GPT-2 124M's shape: README.md, 'Memory by ZeRO stage'"
echo "  (tools/memory_report.py --preset gpt2-124m-cpu, about 2.5 minutes on 2 cores; needs tools/setup.sh)."
echo "Plot the loss curve: /usr/bin/python3 tools/plot_run.py runs/quickstart  (python3-matplotlib)"
echo "quickstart: done in $((SECONDS - started)) s"
