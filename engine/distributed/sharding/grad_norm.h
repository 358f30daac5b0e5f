// The global gradient norm's sum of squares over every rank's part of the reduced gradient (a
// partition of it: each element on one rank), identical on every rank.
#pragma once

#include <vector>

#include "engine/base/core/tensor.h"
#include "engine/distributed/comm/communicator.h"
#include "kernels/contracts/exact_square_sum.h"
#include "kernels/exec_context.h"

namespace zt {

// The 64-bit words each rank's exact sum moves in its all-gather: the digits, then the count of
// non-finite values.
inline constexpr int kExactSumWords = exact_sum::kDigits + 1;

// `exact` (deterministic mode, kernels/contracts/exact_square_sum.h): each rank's exact integer,
// all-gathered and added, so the bits do not depend on the partition or the rank count. Otherwise
// each rank's fp64 sum in unit order, all-gathered and added in rank order: the same bits for the
// same partition (every ZeRO stage at one rank count).
double global_sum_of_squares(Communicator& comm, const ExecContext& ctx, const std::vector<TensorView>& parts,
                             bool exact);

}  // namespace zt
