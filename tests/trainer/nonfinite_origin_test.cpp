// Where a non-finite loss came from first (nonfinite_origin, engine/app/trainer/nonfinite_steps.h):
// the lowest rank with a non-finite micro-batch, that micro-batch, and the global samples it read,
// also in a resumed run, whose steps count from its checkpoint. train_run_test.py holds the message
// end to end on one rank from step 1; the lowest rank among several and a resumed run's sample
// numbers had no test.
#include <gtest/gtest.h>

#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/nonfinite_steps.h"

namespace zt {
namespace {

TEST(NonfiniteOrigin, TheLowestRanksFirstMicroBatchAndItsSamplesAlsoAfterAResume) {
  TrainConfig train;
  train.micro_batch = 2;
  train.grad_accum = 3;
  RunProgress fresh;
  // Step 1, 3 ranks: rank 1's micro-batch 1 (slot 2) and rank 2's micro-batch 0 (slot 1). A global
  // micro-step is 3 x 2 samples: micro-step 1's rank 1 rows start at 6 + 2.
  EXPECT_EQ(nonfinite_origin({0.0f, 2.0f, 1.0f}, 1, fresh, train),
            "; first on rank 1, micro-batch 1: global samples 8-9");
  EXPECT_EQ(nonfinite_origin({3.0f, 1.0f, 0.0f}, 1, fresh, train),
            "; first on rank 0, micro-batch 2: global samples 12-13");
  EXPECT_EQ(nonfinite_origin({0.0f, 0.0f, 0.0f}, 1, fresh, train), "") << "no rank's own micro-batch";
  // Resumed at step 10 from sample 180: step 12 is the run's second (step 11 its first), its
  // samples from 180 + 18, rank 2's rows 4 past them.
  RunProgress resumed;
  resumed.start_step = 10;
  resumed.start_sample = 180;
  EXPECT_EQ(nonfinite_origin({0.0f, 0.0f, 1.0f}, 12, resumed, train),
            "; first on rank 2, micro-batch 0: global samples 202-203");
}

}  // namespace
}  // namespace zt
