// StagedCommunicator against the host backend it stages through, across real ranks (run under
// mpirun -np 1..4 with the other collective tests): its "device" is host memory (HostStagingDevice,
// whose copy fences open only after some polls, so every collective must wait for its gate), and
// every collective must give bitwise the plain host backend's result on the same random data, in
// fp32 and bf16, with and without deterministic reductions; several in flight and waited out of
// order; its staging charged to its own tracker and released.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/base/core/bf16.h"
#include "engine/distributed/comm/host_staging_device.h"
#include "engine/distributed/comm/staged_communicator.h"
#include "tests/comm/comm_test_env.h"

namespace zt {
namespace {

// Host memory that the staging device treats as device memory (a view tagged kCUDA), or as host
// memory that passes through (kCPU).
struct Operand {
  std::vector<std::uint16_t> bits;  // bf16 words, or pairs of them for f32
  DType dtype;
  Device tag;
  Operand(DType d, std::int64_t n, Device t)
      : bits(static_cast<std::size_t>(n * (d == DType::kF32 ? 2 : 1))), dtype(d), tag(t) {}
  TensorView view() { return {bits.data(), dtype, tag, Shape{numel()}}; }
  TensorView host_view() { return {bits.data(), dtype, Device::kCPU, Shape{numel()}}; }
  std::int64_t numel() const { return static_cast<std::int64_t>(bits.size()) / (dtype == DType::kF32 ? 2 : 1); }
  void randomise(unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (std::int64_t i = 0; i < numel(); ++i) {
      if (dtype == DType::kF32) {
        const float x = d(rng);
        std::memcpy(&bits[2 * static_cast<std::size_t>(i)], &x, 4);
      } else {
        bits[static_cast<std::size_t>(i)] = float_to_bf16(d(rng)).bits;
      }
    }
  }
  bool operator==(const Operand& o) const { return bits == o.bits; }
};

std::unique_ptr<StagedCommunicator> make_staged(const CommOptions& options, int delay_polls,
                                                Device stands_for = Device::kCUDA) {
  return std::make_unique<StagedCommunicator>(
      [options](MemoryTracker& staging) { return make_communicator(staging, options); },
      std::make_unique<HostStagingDevice>(delay_polls, stands_for));
}

unsigned seed_of(const Communicator& c, int which) { return 7919u * static_cast<unsigned>(c.rank() + 1) + which; }

void expect_every_collective_matches(Communicator& plain, Communicator& staged) {
  const int N = plain.world_size(), me = plain.rank();
  const std::int64_t shard = 29, n = shard * N;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      Operand a(dt, n, Device::kCUDA), b(dt, n, Device::kCUDA);
      a.randomise(seed_of(plain, 1));
      b.bits = a.bits;
      plain.all_reduce(a.host_view(), op).wait();
      staged.all_reduce(b.view(), op).wait();
      EXPECT_TRUE(a == b) << "all_reduce";
      for (DType out : {dt, DType::kF32}) {
        Operand send(dt, n, Device::kCUDA), r1(out, shard, Device::kCUDA), r2(out, shard, Device::kCUDA);
        send.randomise(seed_of(plain, 2));
        plain.reduce_scatter(send.host_view(), r1.host_view(), op).wait();
        staged.reduce_scatter(send.view(), r2.view(), op).wait();
        EXPECT_TRUE(r1 == r2) << "reduce_scatter into " << dtype_name(out);
      }
      // Stage 1's in-place form: the reduced shard lands in this rank's own slot of the send buffer.
      Operand full1(dt, n, Device::kCUDA), full2(dt, n, Device::kCUDA);
      full1.randomise(seed_of(plain, 3));
      full2.bits = full1.bits;
      plain.reduce_scatter(full1.host_view(), full1.host_view().slice(me * shard, shard), op).wait();
      staged.reduce_scatter(full2.view(), full2.view().slice(me * shard, shard), op).wait();
      EXPECT_TRUE(full1 == full2) << "reduce_scatter into the own slot";
    }
    Operand send(dt, shard, Device::kCUDA), g1(dt, n, Device::kCUDA), g2(dt, n, Device::kCUDA);
    send.randomise(seed_of(plain, 4));
    plain.all_gather(send.host_view(), g1.host_view()).wait();
    staged.all_gather(send.view(), g2.view()).wait();
    EXPECT_TRUE(g1 == g2) << "all_gather";
    Operand in_place(dt, n, Device::kCUDA);  // this rank's slice already in place, the rest stale
    in_place.randomise(seed_of(plain, 5));
    std::memcpy(static_cast<char*>(in_place.view().data) + me * send.view().size_bytes(), send.view().data,
                send.view().size_bytes());
    staged.all_gather(in_place.view().slice(me * shard, shard), in_place.view()).wait();
    EXPECT_TRUE(in_place == g1) << "all_gather in place";
    for (int root = 0; root < N; ++root) {
      Operand b1(dt, 17, Device::kCUDA), b2(dt, 17, Device::kCUDA);
      b1.randomise(seed_of(plain, 6));
      b2.bits = b1.bits;
      plain.broadcast(b1.host_view(), root).wait();
      staged.broadcast(b2.view(), root).wait();
      EXPECT_TRUE(b1 == b2) << "broadcast from " << root;
    }
  }
}

TEST(StagedCommunicator, EveryCollectiveMatchesTheHostBackendBitwise) {
  CommOptions options = test_comm().options();
  auto staged = make_staged(options, /*delay_polls=*/3);
  EXPECT_EQ(staged->world_size(), test_comm().world_size());
  EXPECT_EQ(staged->rank(), test_comm().rank());
  expect_every_collective_matches(test_comm(), *staged);
  options.deterministic = true;
  auto staged_det = make_staged(options, 3);
  expect_every_collective_matches(deterministic_test_comm(), *staged_det);
}

// Six collectives in flight behind slow copy fences, waited newest first: each host collective
// posts only after its own operands' copies (or its data would be stale), in the one order every
// rank shares (or MPI would mismatch them), and the results are right.
TEST(StagedCommunicator, CollectivesInFlightWaitForTheirCopiesAndCompleteInAnyOrder) {
  auto staged = make_staged(test_comm().options(), /*delay_polls=*/200);
  const int N = staged->world_size();
  std::vector<Operand> bufs;
  std::vector<Work> works;
  for (int k = 0; k < 3; ++k) {
    bufs.emplace_back(DType::kF32, 40, Device::kCUDA);
    for (std::int64_t i = 0; i < 40; ++i) {
      const float x = static_cast<float>(k * 100 + i + staged->rank());
      std::memcpy(&bufs.back().bits[2 * static_cast<std::size_t>(i)], &x, 4);
    }
  }
  Operand send(DType::kBF16, 5, Device::kCUDA), gathered(DType::kBF16, 5 * N, Device::kCUDA);
  for (int i = 0; i < 5; ++i)
    send.bits[static_cast<std::size_t>(i)] = float_to_bf16(float(staged->rank() * 10 + i)).bits;
  works.push_back(staged->all_reduce(bufs[0].view(), ReduceOp::kSum));
  works.push_back(staged->all_gather(send.view(), gathered.view()));
  works.push_back(staged->all_reduce(bufs[1].view(), ReduceOp::kSum));
  works.push_back(staged->broadcast(bufs[2].view(), N - 1));
  for (auto it = works.rbegin(); it != works.rend(); ++it) it->wait();
  for (int k = 0; k < 2; ++k) {
    for (std::int64_t i = 0; i < 40; ++i) {
      float got = 0.0f, want = 0.0f;
      std::memcpy(&got, &bufs[static_cast<std::size_t>(k)].bits[2 * static_cast<std::size_t>(i)], 4);
      for (int r = 0; r < N; ++r) want += static_cast<float>(k * 100 + i + r);
      ASSERT_EQ(got, want) << "all_reduce " << k << " element " << i;
    }
  }
  for (int r = 0; r < N; ++r) {
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(bf16_to_float(bf16{gathered.bits[static_cast<std::size_t>(r * 5 + i)]}), float(r * 10 + i));
    }
  }
  float got = 0.0f;
  std::memcpy(&got, &bufs[2].bits[2 * 7], 4);
  EXPECT_EQ(got, static_cast<float>(200 + 7 + N - 1)) << "broadcast from the last rank";
}

// Device operands are staged and host operands pass through untouched in the same collective; the
// staging is charged to the staged communicator's own tracker, released when the Work completes,
// and never to the run's.
TEST(StagedCommunicator, StagesOnlyDeviceOperandsOnItsOwnTracker) {
  auto device = std::make_unique<HostStagingDevice>(2, Device::kCUDA);
  HostStagingDevice* dev = device.get();
  const CommOptions options = test_comm().options();
  StagedCommunicator staged([options](MemoryTracker& t) { return make_communicator(t, options); }, std::move(device));
  const int N = staged.world_size();
  const std::int64_t run_peak_before = test_tracker().snapshot().peak(MemCategory::kCommBuffers);
  std::vector<float> host_send(6);
  for (int i = 0; i < 6; ++i) host_send[static_cast<std::size_t>(i)] = float(staged.rank() * 6 + i);
  Operand recv(DType::kF32, 6 * N, Device::kCUDA);
  staged.all_gather(TensorView{host_send.data(), DType::kF32, Device::kCPU, Shape{6}}, recv.view()).wait();
  EXPECT_EQ(dev->copies(), 1) << "only the device recv is staged (and copied back); the host send passes through";
  for (int i = 0; i < 6 * N; ++i) {
    float got = 0.0f;
    std::memcpy(&got, &recv.bits[2 * static_cast<std::size_t>(i)], 4);
    ASSERT_EQ(got, float(i));
  }
  std::vector<float> host_only(5, 1.0f);
  staged.all_reduce(TensorView{host_only.data(), DType::kF32, Device::kCPU, Shape{5}}, ReduceOp::kSum).wait();
  EXPECT_EQ(dev->copies(), 1) << "a host operand is never staged";
  EXPECT_EQ(host_only[4], static_cast<float>(N));
  Operand grads(DType::kBF16, 8 * N, Device::kCUDA), shard(DType::kBF16, 8, Device::kCUDA);
  grads.randomise(seed_of(staged, 9));
  staged.reduce_scatter(grads.view(), shard.view(), ReduceOp::kAvg).wait();
  EXPECT_EQ(dev->copies(), 3) << "send in, result back";
  const MemorySnapshot s = staged.host_staging().snapshot();
  EXPECT_EQ(s.current(MemCategory::kCommBuffers), 0) << "staging released with the Work";
  EXPECT_GE(s.peak(MemCategory::kCommBuffers), (8 * N + 8) * 2) << "the bf16 send and result were staged";
  EXPECT_EQ(test_tracker().snapshot().current(MemCategory::kCommBuffers), 0);
  EXPECT_EQ(test_tracker().snapshot().peak(MemCategory::kCommBuffers), run_peak_before)
      << "the run's tracker pays nothing for the staged path";
}

// The host backend runs the collectives, so their waits quote its context and keep its options:
// both reach it when set on the staged communicator after construction (the train command sets the
// options once the config is read; they stayed on the wrapper).
TEST(StagedCommunicator, PassesItsContextAndOptionsToTheHostBackend) {
  Communicator* host = nullptr;
  const CommOptions start = test_comm().options();
  StagedCommunicator staged(
      [&](MemoryTracker& t) {
        std::unique_ptr<Communicator> made = make_communicator(t, start);
        host = made.get();
        return made;
      },
      std::make_unique<HostStagingDevice>(1, Device::kCUDA));
  ASSERT_NE(host, nullptr);
  CommOptions later = start;
  later.deterministic = !start.deterministic;
  later.timeout_s = start.timeout_s + 7.0;
  staged.set_options(later);
  EXPECT_EQ(host->options().deterministic, later.deterministic);
  EXPECT_EQ(host->options().timeout_s, later.timeout_s);
  EXPECT_EQ(staged.options().timeout_s, later.timeout_s);
  staged.set_context("step 12");
  EXPECT_EQ(*host->context_ptr(), "step 12");
  EXPECT_EQ(*staged.context_ptr(), "step 12");
}

}  // namespace
}  // namespace zt
