// Tests for engine/base/core/memory_tracker and Buffer: per-category current/peak accounting, the peak
// of the total, peak windows, and Buffer charging for its whole life (construction, move, reset).
#include "engine/base/core/memory_tracker.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "engine/base/core/buffer.h"
#include "engine/base/core/check.h"

namespace zt {
namespace {

TEST(MemoryTracker, ChargeAndReleaseTrackCurrentAndPeakPerCategory) {
  MemoryTracker t;
  t.charge(MemCategory::kParameters, 1000);
  t.charge(MemCategory::kParameters, 500);
  t.release(MemCategory::kParameters, 1200);
  t.charge(MemCategory::kGradients, 64);
  const MemorySnapshot s = t.snapshot();
  EXPECT_EQ(s.current(MemCategory::kParameters), 300);
  EXPECT_EQ(s.peak(MemCategory::kParameters), 1500);
  EXPECT_EQ(s.current(MemCategory::kGradients), 64);
  EXPECT_EQ(s.peak(MemCategory::kGradients), 64);
  EXPECT_EQ(s.current(MemCategory::kActivations), 0);
  EXPECT_EQ(s.total_current_bytes, 364);
  EXPECT_EQ(s.total_peak_bytes, 1500);
}

TEST(MemoryTracker, TotalPeakIsPeakOfTheSumNotSumOfPeaks) {
  MemoryTracker t;
  t.charge(MemCategory::kActivations, 100);
  t.release(MemCategory::kActivations, 100);
  t.charge(MemCategory::kWorkspace, 80);
  const MemorySnapshot s = t.snapshot();
  EXPECT_EQ(s.peak(MemCategory::kActivations) + s.peak(MemCategory::kWorkspace), 180);
  EXPECT_EQ(s.total_peak_bytes, 100);
}

TEST(MemoryTracker, ResetPeaksStartsANewWindowAtCurrentFigures) {
  MemoryTracker t;
  t.charge(MemCategory::kCommBuffers, 4096);
  t.release(MemCategory::kCommBuffers, 4000);
  t.reset_peaks();
  MemorySnapshot s = t.snapshot();
  EXPECT_EQ(s.peak(MemCategory::kCommBuffers), 96);
  EXPECT_EQ(s.total_peak_bytes, 96);
  t.charge(MemCategory::kCommBuffers, 10);
  s = t.snapshot();
  EXPECT_EQ(s.peak(MemCategory::kCommBuffers), 106);
  EXPECT_EQ(s.total_peak_bytes, 106);
}

TEST(MemoryTracker, ReleasingMoreThanChargedIsAnInternalError) {
  MemoryTracker t;
  t.charge(MemCategory::kOptimizerStates, 8);
  EXPECT_THROW(t.release(MemCategory::kOptimizerStates, 16), InternalError);
  EXPECT_THROW(t.charge(MemCategory::kOptimizerStates, -1), InternalError);
}

TEST(MemoryTracker, FormatsBytesWithBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3 * 1024 * 1024), "3.00 MiB");
  EXPECT_EQ(format_bytes(5ll << 30), "5.00 GiB");
  EXPECT_EQ(format_bytes((1ll << 40) - 1), "1024.00 GiB");
  EXPECT_EQ(format_bytes(3ll << 40), "3.00 TiB");
  EXPECT_EQ(format_bytes(16ll << 50), "16.00 PiB");
  EXPECT_EQ(mem_category_name(MemCategory::kMasterWeights), "master_weights");
}

TEST(Buffer, ChargesOnConstructionAndReleasesOnDestruction) {
  MemoryTracker t;
  {
    Buffer b(t, MemCategory::kParameters, DType::kBF16, 1000);
    EXPECT_EQ(b.size_bytes(), 2000);
    EXPECT_EQ(t.snapshot().current(MemCategory::kParameters), 2000);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u) << "64-byte aligned";
    const std::uint16_t* p = static_cast<const std::uint16_t*>(b.data());
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0) << "zero-filled";
  }
  const MemorySnapshot s = t.snapshot();
  EXPECT_EQ(s.current(MemCategory::kParameters), 0);
  EXPECT_EQ(s.peak(MemCategory::kParameters), 2000);
}

TEST(Buffer, MoveTransfersTheChargeWithoutDoubleRelease) {
  MemoryTracker t;
  Buffer a(t, MemCategory::kGradients, DType::kF32, 100);
  Buffer b(std::move(a));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.numel(), 100);
  EXPECT_EQ(t.snapshot().current(MemCategory::kGradients), 400);

  // Move assignment releases what the destination held before taking the source's bytes.
  Buffer c(t, MemCategory::kWorkspace, DType::kF32, 10);
  c = std::move(b);
  MemorySnapshot s = t.snapshot();
  EXPECT_EQ(s.current(MemCategory::kWorkspace), 0);
  EXPECT_EQ(s.current(MemCategory::kGradients), 400);
  EXPECT_EQ(c.category(), MemCategory::kGradients);

  c.reset();
  s = t.snapshot();
  EXPECT_EQ(s.current(MemCategory::kGradients), 0);
  EXPECT_EQ(s.total_current_bytes, 0);
}

TEST(Buffer, ViewsReshapeOnlyToTheSameElementCount) {
  MemoryTracker t;
  Buffer b(t, MemCategory::kActivations, DType::kF32, 24);
  const TensorView v = b.view(Shape{2, 3, 4});
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.data, b.data());
  EXPECT_THROW(b.view(Shape{5, 5}), InternalError);
  EXPECT_THROW(b.as<std::int32_t>(), InternalError) << "dtype-checked access";
}

}  // namespace
}  // namespace zt
