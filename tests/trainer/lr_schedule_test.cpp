// LR schedule: warmup ramp, cosine/linear decay to the floor, constant, the values nanoGPT uses.
#include "engine/app/trainer/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/app/trainer/grad_clip.h"

namespace zt {
namespace {

TEST(LrSchedule, WarmupRampsLinearlyToThePeak) {
  const LrSchedule s(1e-3f, 1e-4f, 100, 5000, LrSchedule::Decay::kCosine);
  EXPECT_FLOAT_EQ(s.at(0), 1e-3f * 1 / 101);
  EXPECT_FLOAT_EQ(s.at(49), 1e-3f * 50 / 101);
  EXPECT_FLOAT_EQ(s.at(99), 1e-3f * 100 / 101);
  EXPECT_FLOAT_EQ(s.at(100), 1e-3f);  // cosine starts at the peak
}

TEST(LrSchedule, CosineDecaysToTheFloorAndStaysThere) {
  const LrSchedule s(1e-3f, 1e-4f, 100, 5000, LrSchedule::Decay::kCosine);
  EXPECT_NEAR(s.at(2550), 0.5 * (1e-3 + 1e-4), 1e-9);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(s.at(4999), 1e-4, 1e-9);
  EXPECT_FLOAT_EQ(s.at(5000), 1e-4f);
  EXPECT_FLOAT_EQ(s.at(100000), 1e-4f);
  for (int step = 101; step < 5000; step += 37) EXPECT_LE(s.at(step), s.at(step - 1)) << step;
}

// WSD (llm.c's, Hägele et al.'s 1 - sqrt cooldown): the warmup ramp, the peak held, then the last
// fraction of decay_steps falling to the floor, which it keeps.
TEST(LrSchedule, WarmupStableDecayHoldsThePeakThenCoolsDownBySqrt) {
  const LrSchedule s(1e-3f, 1e-4f, 100, 1000, LrSchedule::Decay::kWsd, 0.2);
  EXPECT_EQ(s.cooldown_start(), 800);
  EXPECT_FLOAT_EQ(s.at(49), 1e-3f * 50 / 101);  // the same ramp
  EXPECT_FLOAT_EQ(s.at(100), 1e-3f);
  EXPECT_FLOAT_EQ(s.at(799), 1e-3f);
  EXPECT_FLOAT_EQ(s.at(800), 1e-3f);                // r = 0
  EXPECT_NEAR(s.at(850), 1e-4 + 0.5 * 9e-4, 1e-9);  // r = 1/4: 1 - sqrt(r) = 1/2
  EXPECT_NEAR(s.at(999), 1e-4 + (1.0 - std::sqrt(199.0 / 200.0)) * 9e-4, 1e-9);
  EXPECT_FLOAT_EQ(s.at(1000), 1e-4f);
  EXPECT_FLOAT_EQ(s.at(5000), 1e-4f);
  for (int step = 801; step < 1000; step += 7) EXPECT_LT(s.at(step), s.at(step - 1)) << step;
  // The cooldown never starts inside the warmup, and a fraction of 1 cools down from its end.
  EXPECT_EQ(LrSchedule(1.0f, 0.0f, 100, 1000, LrSchedule::Decay::kWsd, 1.0).cooldown_start(), 100);
  EXPECT_EQ(LrSchedule(1.0f, 0.0f, 0, 1000, LrSchedule::Decay::kWsd, 0.0).cooldown_start(), 1000);
  // 0.07 x 100 is 7.000000000000001 in binary: still 7 cooldown steps, as llm.c's (int)(0.93f * 100).
  EXPECT_EQ(LrSchedule(1.0f, 0.0f, 0, 100, LrSchedule::Decay::kWsd, 0.07).cooldown_start(), 93);
  EXPECT_EQ(LrSchedule::parse_decay("wsd"), LrSchedule::Decay::kWsd);
  // llm.c's decay point, (int)(0.8f * N), at the default fraction.
  for (int n : {5, 7, 10, 12, 15, 99, 1000}) {
    EXPECT_EQ(LrSchedule(1.0f, 0.0f, 0, n, LrSchedule::Decay::kWsd, 0.2).cooldown_start(),
              static_cast<int>(0.8f * static_cast<float>(n)))
        << n;
  }
}

TEST(LrSchedule, LinearAndConstant) {
  const LrSchedule lin(1.0f, 0.0f, 0, 10, LrSchedule::Decay::kLinear);
  EXPECT_FLOAT_EQ(lin.at(0), 1.0f);
  EXPECT_FLOAT_EQ(lin.at(5), 0.5f);
  EXPECT_FLOAT_EQ(lin.at(10), 0.0f);
  // After a warmup the decay runs from its end (r = (step - warmup) / (decay_steps - warmup)):
  // the peak at the warmup's end, half of it halfway to decay_steps.
  const LrSchedule warmed(1.0f, 0.0f, 2, 6, LrSchedule::Decay::kLinear);
  EXPECT_FLOAT_EQ(warmed.at(1), 2.0f / 3.0f);
  EXPECT_FLOAT_EQ(warmed.at(2), 1.0f);
  EXPECT_FLOAT_EQ(warmed.at(3), 0.75f);
  EXPECT_FLOAT_EQ(warmed.at(4), 0.5f);
  EXPECT_FLOAT_EQ(warmed.at(6), 0.0f);
  const LrSchedule flat(0.3f, 0.0f, 4, 0, LrSchedule::Decay::kConstant);
  EXPECT_FLOAT_EQ(flat.at(1), 0.3f * 2 / 5);
  EXPECT_FLOAT_EQ(flat.at(4), 0.3f);
  EXPECT_FLOAT_EQ(flat.at(1000000), 0.3f);
}

// torch's clip_grad_norm_: min(1, max_norm / (norm + 1e-6)), so a norm at max_norm, or within 1e-6
// below it, is scaled by a hair too (the engine scaled only past max_norm, as llm.c).
TEST(GradClip, ScalesAsTorchsClipGradNorm) {
  EXPECT_EQ(clip_coefficient(0.5, 1.0f), 1.0f);
  EXPECT_EQ(clip_coefficient(1.0 - 2e-6, 1.0f), 1.0f);
  EXPECT_EQ(clip_coefficient(1.0, 1.0f), static_cast<float>(1.0 / (1.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(1.0 - 5e-7, 1.0f), static_cast<float>(1.0 / (1.0 - 5e-7 + 1e-6)));
  EXPECT_LT(clip_coefficient(1.0 - 5e-7, 1.0f), 1.0f);
  EXPECT_NEAR(clip_coefficient(4.0, 1.0f), 0.25, 1e-6);
  EXPECT_EQ(clip_coefficient(1e9, 0.0f), 1.0f) << "0 disables clipping";
  // After scaling, the global norm is max_norm (up to the 1e-6 guard), as torch's rule.
  EXPECT_NEAR(5.0 * clip_coefficient(5.0, 2.0f), 2.0, 1e-5);
}

// A step counts as overflowing AdamW's fp32 squares by the norm it applies: clipped, a huge norm is
// brought to max_norm and trains on; unclipped, past sqrt(FLT_MAX) (1.8e19) it does not.
TEST(GradClip, OnlyAnAppliedNormPastTheFp32SquaresLimitOverflows) {
  EXPECT_FALSE(applied_norm_overflows_fp32_squares(1e30, 1.0f)) << "clipped to a norm of 1";
  EXPECT_TRUE(applied_norm_overflows_fp32_squares(1e30, 0.0f)) << "unclipped";
  EXPECT_FALSE(applied_norm_overflows_fp32_squares(1.8e19, 0.0f));
  EXPECT_TRUE(applied_norm_overflows_fp32_squares(1.9e19, 0.0f));
}

}  // namespace
}  // namespace zt
