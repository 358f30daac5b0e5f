// What every model family does the same way around its kernels: parameters handed to the kernels
// in a dtype they read, and the loss and logits read back to the host.
#pragma once

#include <array>
#include <cstdint>

#include "engine/base/core/buffer.h"
#include "engine/base/core/param_table.h"
#include "engine/distributed/sharding/param_store.h"
#include "kernels/exec_context.h"

namespace zt {

// A unit's working parameters as the kernels read them: the store's own buffer when it is fp32,
// or bf16 with bf16 activations (the kernels widen bf16 parameters as they load them); an fp32
// copy for bf16 parameters with fp32 activations, whose kernels take fp32 parameters only
// (check_param_dtype). Two copies at most (a tied head needs the final unit and the embeddings at
// once), each allocated on first use: the workspace the footprints count as 2 x 4 x the largest
// unit in that mode.
class KernelParams {
 public:
  KernelParams(const ParamTable& table, DType activations, MemoryTracker& tracker, const ExecContext& ctx);

  // store.acquire_params(unit, pass), as the kernels read it; pair with store.release_params.
  // `slot` (0 or 1) pins the copy's slot where a loop keeps one unit while others come and go
  // (-1: alternate).
  TensorView acquire(ParamStore& store, int unit, Pass pass, int slot = -1);
  // Drops what the copies hold (the parameters may have changed since: call at each forward).
  void forget() { copy_unit_ = {-1, -1}; }
  // Frees the copies themselves (LanguageModel::release_param_copies); the next acquire allocates.
  void release() {
    forget();
    for (Buffer& copy : copies_) copy = Buffer();
  }

 private:
  const ParamTable& table_;
  DType activations_;
  MemoryTracker& tracker_;
  ExecContext ctx_;
  std::array<Buffer, 2> copies_;
  std::array<int, 2> copy_unit_{-1, -1};
  int next_slot_ = 0;
};

// The mean of losses [N] (F32), summed on the host in a fixed order: the same bits on either device;
// each loss also into `losses_out` [N] where it is set (ForwardOptions::losses_out).
float mean_loss(const ExecContext& ctx, TensorView losses, float* losses_out = nullptr);

// Columns [first_column, first_column + width) of the logits (this device's [rows, width] view, F32
// or BF16, e.g. one vocabulary chunk) into the caller's unpadded [rows, vocab_size] logits_out;
// padded columns past vocab_size are left out.
void copy_logits_out(const ExecContext& ctx, TensorView logits, std::int64_t first_column, std::int64_t vocab_size,
                     float* logits_out);

}  // namespace zt
