// Deterministic mode's gradient reduction (ZeroOptions::fold_in_global_order), what makes a run's
// bits independent of its rank count.
//
// [Note: folding in global micro-batch order] With a fixed micro-batch, micro-batch m of a step
// is the same computation at every rank count N: its samples (batch_sampler.h: round i of rank r is
// m = i N + r) and dropout masks are functions of m, and so is its gradient g_m, made with the loss
// scale 1/M of the step's M micro-batches. The store then makes every element of the step's
// gradient the same left fold, g = ((g_0 + g_1) + g_2) + ... in micro-batch order: in round i each
// rank sends every other rank that rank's shard of g_(iN+r) (an all-to-all of the pending buffer),
// and each rank adds the N parts it holds into its gradient shard in rank order, which is the
// order of m. One rank adds its own g_i the same way. So the gradient is bitwise the same at every
// N dividing M, at every stage (a shard's elements do not care where the shard boundaries are), and
// with an exact gradient norm (kernels/contracts/exact_square_sum.h) and element-wise AdamW the
// weights are too. The fold is a left fold rather than a balanced tree: it needs no partial sums
// kept across rounds and allows any N dividing M (docs/zero_memory.md says what it costs).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/base/core/tensor.h"
#include "engine/distributed/comm/communicator.h"
#include "kernels/exec_context.h"

namespace zt {

struct FoldExchange {
  Work work;        // the all-to-all (complete on one rank: nothing moves)
  Buffer received;  // [N * shard] in the pending buffer's dtype: slot r is rank r's part (several ranks)
  Buffer widened;   // a bf16 part widened to fp32 before it is added (bf16 pending buffers only)
};

// Starts the exchange of one unit's micro-batch gradient `pending` ([N * shard], padded), the
// received parts and the fp32 part charged to the comm buffers.
FoldExchange start_fold_exchange(Communicator& comm, const ExecContext& ctx, MemoryTracker& tracker, TensorView pending,
                                 std::int64_t shard);

// After the exchange's wait: target (this rank's shard of the stored gradient) += each rank's part
// in rank order: the exchange's `received` parts, or on one rank (none received) `pending`'s own;
// bf16 parts through `widened`.
void fold_parts(const ExecContext& ctx, TensorView target, TensorView pending, const Buffer& received,
                const Buffer& widened);

// Stage 0 after the last micro-batch: each unit's whole (padded) gradient from the ranks' folded
// slices, `own[u]` being this rank's slice of `whole[u]`, gathered in place (nothing on one rank).
void gather_folded_units(Communicator& comm, const std::vector<TensorView>& own, const std::vector<TensorView>& whole);

}  // namespace zt
