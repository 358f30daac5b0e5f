// The NCCL communicator on one GPU (label gpu): a world of one, so every collective is an identity
// whose result is known exactly; what is tested is the path around NCCL: ordering after work queued
// on the compute stream, in-place and out-of-place buffers, BF16 operands reduced in fp32 and
// rounded once, host buffers staged through the device, volumes counted as for one rank (0), and
// a split communicator (ncclCommSplit) and the grouped all-to-all.
// Several GPUs per communicator need several GPUs: never tested here (docs/multi_node.md).
#include <cuda_runtime_api.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "engine/distributed/comm/nccl_communicator.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

class NcclOneRank : public GpuKernelTest {
 protected:
  void SetUp() override {
    GpuKernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    comm_ = std::make_unique<NcclCommunicator>(tracker_, CommOptions{}, gpu(), 0, 1, make_nccl_unique_id());
  }
  void TearDown() override {
    comm_.reset();
    GpuKernelTest::TearDown();
  }
  std::unique_ptr<NcclCommunicator> comm_;
};

TEST_F(NcclOneRank, AllGatherInPlaceAndOutOfPlaceAfterComputeStreamWork) {
  ZT_SEEDED_RNG(rng);
  const std::vector<float> x = rng.normal(100003);
  Buffer src = upload(x);
  Buffer dst = poisoned(DType::kF32, 100003);
  // Queued on the compute stream just before: the collective must see the copied values.
  Buffer staged = poisoned(DType::kF32, 100003);
  ops::copy(gpu(), staged.view(), src.view());
  comm_->all_gather(staged.view(), dst.view()).wait();
  EXPECT_TRUE(bitwise_equal(download<float>(dst), x));
  comm_->all_gather(dst.view(), dst.view()).wait();  // in place: send is rank 0's slice of recv
  EXPECT_TRUE(bitwise_equal(download<float>(dst), x));
  EXPECT_EQ(comm_->elements_sent(), 0) << "a world of one sends nothing";
}

// Hybrid sharding's ncclCommSplit and the encoded collectives' all-to-all, on the one rank there
// is: the split is a communicator of its own (stream, watchdog) whose collectives work, and the
// all-to-all of one slot is a copy; an int8 all-gather through it decodes what it encoded.
TEST_F(NcclOneRank, SplitCommunicatorAndAllToAllWork) {
  ZT_SEEDED_RNG(rng);
  std::unique_ptr<Communicator> sub = comm_->split(0, 0);
  EXPECT_EQ(sub->world_size(), 1);
  EXPECT_EQ(sub->rank(), 0);
  const std::vector<float> x = rng.normal(1001);
  Buffer buf = upload(x);
  sub->all_reduce(buf.view(), ReduceOp::kAvg).wait();
  EXPECT_TRUE(bitwise_equal(download<float>(buf), x));
  Buffer words = upload(std::vector<std::int32_t>{1, 2, 3, 4, 5});
  Buffer moved = poisoned(DType::kI32, 5);
  sub->all_to_all(words.view(), moved.view()).wait();
  EXPECT_EQ(download<std::int32_t>(moved), (std::vector<std::int32_t>{1, 2, 3, 4, 5}));
  sub.reset();                                           // before its parent
  comm_->all_reduce(buf.view(), ReduceOp::kSum).wait();  // the parent still works
  EXPECT_TRUE(bitwise_equal(download<float>(buf), x));
}

TEST_F(NcclOneRank, ReduceScatterOfBf16IntoF32AndInPlaceAverage) {
  ZT_SEEDED_RNG(rng);
  const std::vector<float> g = rng.normal(4099);
  Buffer g16 = upload_bf16(g);
  Buffer out = poisoned(DType::kF32, 4099);
  comm_->reduce_scatter(g16.view(), out.view(), ReduceOp::kAvg).wait();
  EXPECT_TRUE(bitwise_equal(download<float>(out), download_f32(g16))) << "bf16 -> f32 is exact, avg of one is x";
  Buffer f = upload(g);
  comm_->reduce_scatter(f.view(), f.view(), ReduceOp::kSum).wait();  // in place
  EXPECT_TRUE(bitwise_equal(download<float>(f), g));
}

TEST_F(NcclOneRank, AllReduceOfBf16RoundsOnceAndHostBuffersAreStaged) {
  ZT_SEEDED_RNG(rng);
  const std::vector<float> g = rng.normal(777);
  Buffer g16 = upload_bf16(g);
  const auto before = download<std::uint16_t>(g16);
  comm_->all_reduce(g16.view(), ReduceOp::kAvg).wait();
  EXPECT_EQ(download<std::uint16_t>(g16), before) << "bf16 -> f32 -> reduce (identity) -> bf16 is exact";
  std::vector<float> host = g;  // the trainer's loss and stop flag live on the host
  comm_->all_reduce(TensorView{host.data(), DType::kF32, Device::kCPU, Shape{777}}, ReduceOp::kAvg).wait();
  EXPECT_TRUE(bitwise_equal(host, g));
  std::vector<std::int32_t> ids(32);
  std::iota(ids.begin(), ids.end(), 7);
  const std::vector<std::int32_t> want = ids;
  comm_->broadcast(TensorView{ids.data(), DType::kI32, Device::kCPU, Shape{32}}, 0).wait();
  EXPECT_EQ(ids, want);
  std::vector<float> gathered(5, -1.0f);
  std::vector<float> mine = {1, 2, 3, 4, 5};
  comm_
      ->all_gather(TensorView{mine.data(), DType::kF32, Device::kCPU, Shape{5}},
                   TensorView{gathered.data(), DType::kF32, Device::kCPU, Shape{5}})
      .wait();
  EXPECT_EQ(gathered, mine);
  comm_->barrier();
}

// Staging buffers are written on the communication stream only: a fill of them queued on the
// compute stream (the allocator's) after the fence would race with the comm stream's cast and
// could zero the reduction's input. A host function holds the compute stream so the fence fires
// while both are runnable; 20 rounds of large bf16 reductions make a race show.
TEST_F(NcclOneRank, Bf16ReductionsStagedWhileTheComputeStreamIsBusyKeepTheirValues) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = std::int64_t{1} << 24;
  Buffer g16 = upload_bf16(rng.normal(n));
  const auto before = download<std::uint16_t>(g16);
  const auto hold = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  for (int round = 0; round < 20; ++round) {
    ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(gpu().cuda_stream), hold, nullptr), cudaSuccess);
    comm_->all_reduce(g16.view(), ReduceOp::kAvg).wait();
  }
  EXPECT_EQ(download<std::uint16_t>(g16), before) << "a staged input was overwritten";
}

// [Note: one launch order for all NCCL communicators]: a second communicator's collective runs
// after the first's, even with no wait between them, so the second reads what the first wrote.
// Without that order the two would start together once the held compute stream lets them go.
TEST_F(NcclOneRank, TwoCommunicatorsRunTheirCollectivesInProgramOrder) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = std::int64_t{1} << 24;
  const std::vector<float> x = rng.normal(n);
  Buffer src = upload(x);
  Buffer middle = poisoned(DType::kF32, n);
  Buffer last = poisoned(DType::kF32, n);
  NcclCommunicator other(tracker_, CommOptions{}, gpu(), 0, 1, make_nccl_unique_id());
  const auto hold = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(gpu().cuda_stream), hold, nullptr), cudaSuccess);
  Work first = comm_->all_gather(src.view(), middle.view());
  Work second = other.all_gather(middle.view(), last.view());
  first.wait();
  second.wait();
  EXPECT_TRUE(bitwise_equal(download<float>(last), x));
}

TEST_F(NcclOneRank, MismatchedShapesAreRefusedBeforeAnythingIsQueued) {
  Buffer a = poisoned(DType::kF32, 10), b = poisoned(DType::kF32, 11);
  EXPECT_THROW(comm_->all_gather(a.view(), b.view()), std::exception);
  EXPECT_THROW(comm_->reduce_scatter(a.view(), b.view(), ReduceOp::kSum), std::exception);
  Buffer i = poisoned(DType::kI32, 4);
  EXPECT_THROW(comm_->all_reduce(i.view(), ReduceOp::kSum), std::exception);
}

}  // namespace
}  // namespace zt::test
