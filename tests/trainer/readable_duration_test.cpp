// The progress line's time left (readable_duration): seconds, then minutes and seconds, hours and
// minutes, and days, each unit's remainder in the next one down; the time it is given
// (time_left_s) at this process's pace, also after a resume.
#include <gtest/gtest.h>

#include "engine/app/trainer/run_report.h"

namespace zt {
namespace {

TEST(ReadableDuration, EachRangeInItsUnits) {
  EXPECT_EQ(readable_duration(0.4), "0s");
  EXPECT_EQ(readable_duration(-3.0), "0s");  // a clock step back says no time, not a negative one
  EXPECT_EQ(readable_duration(119.4), "119s");
  EXPECT_EQ(readable_duration(120), "2m00s");
  EXPECT_EQ(readable_duration(12 * 60 + 5), "12m05s");
  EXPECT_EQ(readable_duration(2 * 3600 - 1), "119m59s");
  EXPECT_EQ(readable_duration(3 * 3600 + 5 * 60 + 7), "3h05m");
  EXPECT_EQ(readable_duration(47 * 3600 + 59 * 60 + 59), "47h59m");
  EXPECT_EQ(readable_duration(396942), "4.6d");
}

TEST(TimeLeft, AtThisProcesssPaceAlsoAfterAResume) {
  EXPECT_DOUBLE_EQ(time_left_s(10.0, 0, 10, 100), 90.0);  // 1 s a step, 90 steps to go
  // Resumed at step 900: 10 steps in 10 s, not 910 (which said 0.1 s for the 90 left).
  EXPECT_DOUBLE_EQ(time_left_s(10.0, 900, 910, 1000), 90.0);
  EXPECT_DOUBLE_EQ(time_left_s(3.0, 40, 41, 41), 0.0);  // the last step
}

}  // namespace
}  // namespace zt
