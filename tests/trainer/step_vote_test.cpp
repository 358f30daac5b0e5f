// The stop vote riding on the step's loss collective (engine/app/trainer/step_vote.h): at any rank
// count, rank 0's lost lock reads as lost whatever the ranks' stop requests, and requests alone
// read as a stop, never as a lost lock. (A lost lock weighed 2 instead of 2 x the ranks read as a
// plain stop from 2 ranks on, and the run went on writing into a folder another run held.)
#include <gtest/gtest.h>

#include "engine/app/trainer/step_vote.h"

namespace zt {
namespace {

TEST(StepVote, ALostLockOutvotesEveryRequestAndRequestsAloneNeverReadAsOne) {
  for (const int world : {1, 2, 3, 4, 8, 64, 1024}) {
    for (int requests = 0; requests <= world; requests += world > 8 ? world / 4 : 1) {
      SCOPED_TRACE(::testing::Message() << world << " ranks, " << requests << " stop requests");
      double lost = 0.0, kept = 0.0;  // summed, then averaged as the all-reduce does (in fp32 too)
      for (int r = 0; r < world; ++r) {
        lost += rank_stop_vote(/*lock_lost=*/r == 0, r < requests, world);
        kept += rank_stop_vote(false, r < requests, world);
      }
      for (const double mean : {lost / world, static_cast<double>(static_cast<float>(lost) / world)}) {
        const AgreedLoss a = agreed_votes(2.5f, mean);
        EXPECT_TRUE(a.lock_lost);
        EXPECT_TRUE(a.stop_requested);
        EXPECT_EQ(a.loss, 2.5f);
      }
      const AgreedLoss b = agreed_votes(2.5f, kept / world);
      EXPECT_FALSE(b.lock_lost);
      EXPECT_EQ(b.stop_requested, requests > 0);
    }
  }
}

}  // namespace
}  // namespace zt
