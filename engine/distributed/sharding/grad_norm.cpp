// The gradient norm's global sum of squares (see the header).
#include "engine/distributed/sharding/grad_norm.h"

#include "kernels/ops.h"

namespace zt {

namespace {

double exact_total(Communicator& comm, const ExecContext& ctx, const std::vector<TensorView>& parts) {
  constexpr int kWords = kExactSumWords;
  const exact_sum::SquareSum mine = ops::exact_sum_of_squares(ctx, parts);
  std::uint64_t own[kWords];
  for (int k = 0; k < exact_sum::kDigits; ++k) own[k] = mine.digit[k];
  own[exact_sum::kDigits] = mine.nonfinite;
  const std::vector<std::uint64_t> all = all_gather_values<std::uint64_t>(comm, own);
  exact_sum::SquareSum total;
  for (int r = 0; r < comm.world_size(); ++r) {  // integers: the order changes nothing
    exact_sum::SquareSum theirs;
    for (int k = 0; k < exact_sum::kDigits; ++k) theirs.digit[k] = all[static_cast<std::size_t>(r * kWords + k)];
    theirs.nonfinite = all[static_cast<std::size_t>(r * kWords + exact_sum::kDigits)];
    exact_sum::add(total, theirs);
  }
  return exact_sum::to_double(total);
}

double rank_ordered_sum(Communicator& comm, const ExecContext& ctx, const std::vector<TensorView>& parts) {
  double partial = 0.0;
  for (double unit_sum : ops::sum_of_squares_each(ctx, parts)) partial += unit_sum;  // unit order
  double total = 0.0;
  for (double p : all_gather_values<double>(comm, {&partial, 1})) total += p;  // rank order
  return total;
}

}  // namespace

double global_sum_of_squares(Communicator& comm, const ExecContext& ctx, const std::vector<TensorView>& parts,
                             bool exact) {
  return exact ? exact_total(comm, ctx, parts) : rank_ordered_sum(comm, ctx, parts);
}

}  // namespace zt
