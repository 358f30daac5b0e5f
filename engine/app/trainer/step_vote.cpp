// The ranks' agreement on the step's loss and the stop vote (see the header).
#include "engine/app/trainer/step_vote.h"

#include <fmt/format.h>

#include "engine/app/trainer/run_memory.h"
#include "engine/base/core/check.h"
#include "engine/distributed/launch/signals.h"

namespace zt {

double rank_stop_vote(bool lock_lost, bool stop_requested, int world_size) {
  return (lock_lost ? 2.0 * world_size : 0.0) + (stop_requested ? 1.0 : 0.0);
}

AgreedLoss agreed_votes(float mean_loss, double mean_vote) { return {mean_loss, mean_vote > 0.0, mean_vote > 1.5}; }

namespace {

// This rank's vote (rank_stop_vote): a stop request (engine/distributed/launch/signals.h) on any
// rank, a lost lock on rank 0.
double stop_vote(const TrainerState& s) {
  return rank_stop_vote(s.root && !s.lock_lost_to().empty(), stop_signal() != 0, s.comm.world_size());
}

}  // namespace

// The step boundary's agreement rides on the loss all-reduce: element 1 is the ranks' stop_vote.
AgreedLoss all_reduce_loss_and_stop(const TrainerState& s, double rank_loss) {
  float loss_and_stop[kLossAndStopElements] = {static_cast<float>(rank_loss), static_cast<float>(stop_vote(s))};
  s.comm.all_reduce(TensorView{loss_and_stop, DType::kF32, Device::kCPU, Shape{kLossAndStopElements}}, ReduceOp::kAvg)
      .wait();
  return agreed_votes(loss_and_stop[0], loss_and_stop[1]);
}

AgreedLoss gather_loss_and_stop(const TrainerState& s, const std::vector<double>& rank_losses) {
  const int ranks = s.comm.world_size(), rounds = static_cast<int>(rank_losses.size());
  std::vector<double> mine(rank_losses);
  mine.push_back(stop_vote(s));
  const std::vector<double> all = all_gather_values<double>(s.comm, mine);
  double sum = 0.0, votes = 0.0;
  for (int i = 0; i < rounds; ++i) {
    for (int r = 0; r < ranks; ++r) sum += all[static_cast<std::size_t>(r * (rounds + 1) + i)];
  }
  for (int r = 0; r < ranks; ++r) votes += all[static_cast<std::size_t>(r * (rounds + 1) + rounds)];
  votes /= ranks;
  return agreed_votes(static_cast<float>(sum / (static_cast<double>(rounds) * ranks)), votes);
}

AgreedLoss agree_on_stop(const TrainerState& s, bool folds) {
  return folds ? gather_loss_and_stop(s, {0.0}) : all_reduce_loss_and_stop(s, 0.0);
}

[[noreturn]] void end_on_lost_lock(const TrainerState& s, int step) {
  throw_runtime_error("after step {}: {}; this run ends without writing anything more there", step,
                      broadcast_string(s.comm, s.root ? s.lock_lost_to() : std::string()));
}

StopVote stop_vote_after(const TrainerState& s, int step) {
  return [&s, step] {
    const AgreedLoss agreed = agree_on_stop(s, s.config.zero.fold_in_global_order);
    if (agreed.lock_lost) end_on_lost_lock(s, step);
    return agreed.stop_requested;
  };
}

}  // namespace zt
