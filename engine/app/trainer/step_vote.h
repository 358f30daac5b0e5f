// The ranks' agreement at a step's end, and between steps: the step's loss (averaged, or summed
// in global order in deterministic mode) and the stop vote riding on the same collective (a stop
// request on any rank, a lost lock or a moved run directory on rank 0).
#pragma once

#include <vector>

#include "engine/app/trainer/evaluation.h"
#include "engine/app/trainer/trainer_state.h"

namespace zt {

struct AgreedLoss {
  float loss;           // the ranks' mean
  bool stop_requested;  // on any rank
  bool lock_lost;       // rank 0's lock was taken over, or its run directory moved away
};

// What a rank adds to the step's stop vote: 1 for a stop request, and where rank 0's lock is lost
// (`lock_lost`, rank 0 only), 2 x the ranks, so that the ranks' mean is above 1.5 for a lost lock
// whatever the requests, and above 0 for any request (a mean of at most 1 without a lost lock).
double rank_stop_vote(bool lock_lost, bool stop_requested, int world_size);
// The agreement the ranks' mean vote says (rank_stop_vote), beside their mean loss.
AgreedLoss agreed_votes(float mean_loss, double mean_vote);

// The step boundary's agreement on the loss all-reduce: element 1 is the ranks' stop vote.
AgreedLoss all_reduce_loss_and_stop(const TrainerState& s, double rank_loss);
// Deterministic mode: the step's loss as the same sum at every rank count, the micro-batches'
// losses in global order (round i of rank r is micro-batch i N + r) over their count, and the stop
// vote, from an all-gather of each rank's losses and vote.
AgreedLoss gather_loss_and_stop(const TrainerState& s, const std::vector<double>& rank_losses);
// The stop vote alone, through the step's own collective (so its staging is the one the memory
// prediction counts), outside any step's meter.
AgreedLoss agree_on_stop(const TrainerState& s, bool folds);
// Ends the run on every rank once the vote says rank 0's lock was lost: nothing more is written
// into the folder (TrainerState::log writes no record once it is lost, and no save or final
// weights follow).
[[noreturn]] void end_on_lost_lock(const TrainerState& s, int step);
// The stop vote between steps, asked by an evaluation or sample as it goes; a lost lock ends the
// run as at a step's end.
StopVote stop_vote_after(const TrainerState& s, int step);

}  // namespace zt
