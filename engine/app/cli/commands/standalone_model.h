// A model outside a training run, for `zerotrain sample` and `zerotrain eval`: the weights a run
// left in its directory (--run), a sharded checkpoint's fp32 master weights read unit by unit in
// any save layout (--ckpt), or pretrained weights (--from: a Hugging Face folder or an llm.c model
// file), whole in a one-process stage-0 store on the CPU or (--device cuda) the process's GPU (by
// its local rank under a launcher, as training picks it), its models' activations in --dtype.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/weight_source.h"
#include "engine/app/io/pretrained.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/compute_backend.h"
#include "models/model_family.h"

namespace zt::cli {

// The CPU threads the model computes on: --threads where given, else OMP_NUM_THREADS, else
// source.num_threads (the cores this process may use) less those other processes' runnable threads
// hold now, shared by the `processes_on_node` of this command there, at least 1. Returns a note
// where the load lowered it, or where --threads asks for more threads than cores ("" otherwise),
// which the commands say after their work (a line before it would make a refusal two). OpenMP's waiting threads spin on
// cores another process holds: a sample beside a 2-rank training run on 2 cores took 0.8-6.9 s at 2 threads against
// 0.3-0.4 s at 1.
std::string fit_threads_to_idle_cores(const ArgParser& parser, WeightSource& source, int processes_on_node = 1);

class StandaloneModel {
 public:
  // Opens the device and loads the weights (fp32 host buffers, each unit then into the store: a
  // device copy on a GPU, and a cast where the store is bf16).
  explicit StandaloneModel(const WeightSource& source);

  const ModelSpec& spec() const { return spec_; }
  const ParamTable& table() const { return table_; }
  ZeroParamStore& store() { return store_; }
  Communicator& comm() { return comm_; }
  // A forwards-only model of `rows` sequences of `seq_len` tokens in the source's activations.
  std::unique_ptr<LanguageModel> build(int rows, int seq_len);

 private:
  TensorView host_target(int u);
  // Moves unit `u`'s fp32 values into the store; InputError naming the tensor where one is NaN or
  // infinite (such weights sample and score garbage: every logit NaN).
  void store_unit(int u);

  // Declared in the order they are built; what allocates through the backend goes first.
  MemoryTracker tracker_;
  std::string source_path_;  // for the messages
  ModelSpec spec_;
  DType activations_;
  ParamTable table_;
  // A pretrained folder's or file's tensors, opened and checked against table_ before the store
  // allocates the model (the weights' shapes before the config's); none for other sources.
  std::unique_ptr<PretrainedReader> pretrained_;
  ComputeBackend backend_;
  LocalCommunicator comm_;
  ZeroParamStore store_;
  std::vector<std::vector<float>> staging_;  // per unit: fp32 values on their way to a GPU or a bf16 store
};

}  // namespace zt::cli
