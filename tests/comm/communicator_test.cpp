// Communicator collectives across real ranks (run under mpirun -np 1..4, or alone as rank 0 of 1):
// every rank builds its data from a formula of (rank, index), so each can compute what every
// collective must return. Values are small multiples of 1/4 so fp32 and bf16 sums are exact and
// results compare with ==; the deterministic mode is checked bitwise on random data.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <vector>

#include "engine/base/core/bf16.h"
#include "engine/distributed/comm/communicator.h"
#include "kernels/exec_context.h"
#include "kernels/op_profiler.h"
#include "tests/comm/comm_test_env.h"

namespace zt {
namespace {

float value(int rank, std::int64_t i) { return 0.25f * static_cast<float>((rank + 1) * 3 + (i % 17)); }

TensorView bf16_view(std::vector<bf16>& v) {
  return {v.data(), DType::kBF16, Device::kCPU, Shape{(std::int64_t)v.size()}};
}

TEST(Communicator, AllGatherConcatenatesInRankOrder) {
  Communicator& c = test_comm();
  const int N = c.world_size(), n = 7;
  std::vector<float> send(n), recv(static_cast<std::size_t>(n * N), -1.0f);
  for (int i = 0; i < n; ++i) send[i] = value(c.rank(), i);
  c.all_gather(f32_view(send), f32_view(recv)).wait();
  for (int r = 0; r < N; ++r)
    for (int i = 0; i < n; ++i) ASSERT_EQ(recv[r * n + i], value(r, i)) << "rank " << r << " element " << i;

  std::vector<bf16> send16(n), recv16(static_cast<std::size_t>(n * N));
  for (int i = 0; i < n; ++i) send16[i] = float_to_bf16(value(c.rank(), i));
  c.all_gather(bf16_view(send16), bf16_view(recv16)).wait();
  for (int r = 0; r < N; ++r)
    for (int i = 0; i < n; ++i) ASSERT_EQ(bf16_to_float(recv16[r * n + i]), value(r, i));
}

TEST(Communicator, ReduceScatterSumsAndAveragesEachChunk) {
  Communicator& c = test_comm();
  const int N = c.world_size(), n = 5;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    std::vector<float> send(static_cast<std::size_t>(n * N)), recv(n);
    for (int i = 0; i < n * N; ++i) send[i] = value(c.rank(), i);
    c.reduce_scatter(f32_view(send), f32_view(recv), op).wait();
    std::vector<bf16> send16(send.size()), recv16(n);
    for (std::size_t i = 0; i < send.size(); ++i) send16[i] = float_to_bf16(send[i]);
    c.reduce_scatter(bf16_view(send16), bf16_view(recv16), op).wait();
    for (int i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < N; ++r) sum += value(r, c.rank() * n + i);
      const float expected = op == ReduceOp::kAvg ? sum * (1.0f / static_cast<float>(N)) : sum;
      ASSERT_EQ(recv[i], expected) << "element " << i;
      ASSERT_EQ(bf16_to_float(recv16[i]), round_to_bf16(expected)) << "bf16 reduced in fp32, rounded once";
    }
  }
}

TEST(Communicator, AllReduceInPlaceOnOddSizes) {
  Communicator& c = test_comm();
  const int N = c.world_size();
  for (int n : {1, 13, 1000}) {
    std::vector<float> buf(n);
    for (int i = 0; i < n; ++i) buf[i] = value(c.rank(), i);
    c.all_reduce(f32_view(buf), ReduceOp::kAvg).wait();
    for (int i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < N; ++r) sum += value(r, i);
      ASSERT_EQ(buf[i], sum * (1.0f / static_cast<float>(N))) << "n " << n << " element " << i;
    }
  }
}

TEST(Communicator, BroadcastFromEveryRoot) {
  Communicator& c = test_comm();
  for (int root = 0; root < c.world_size(); ++root) {
    std::vector<float> buf(9);
    for (int i = 0; i < 9; ++i) buf[i] = value(c.rank(), i);
    c.broadcast(f32_view(buf), root).wait();
    for (int i = 0; i < 9; ++i) ASSERT_EQ(buf[i], value(root, i)) << "root " << root;
  }
}

TEST(Communicator, OverlappingOperationsCompleteInAnyOrder) {
  Communicator& c = test_comm();
  const int N = c.world_size();
  std::vector<float> a(11), b(6), g(static_cast<std::size_t>(6 * N));
  for (int i = 0; i < 11; ++i) a[i] = value(c.rank(), i);
  for (int i = 0; i < 6; ++i) b[i] = value(c.rank(), 100 + i);
  Work w1 = c.all_reduce(f32_view(a), ReduceOp::kSum);
  Work w2 = c.all_gather(f32_view(b), f32_view(g));
  w2.wait();
  w1.wait();
  for (int i = 0; i < 11; ++i) {
    float sum = 0.0f;
    for (int r = 0; r < N; ++r) sum += value(r, i);
    ASSERT_EQ(a[i], sum);
  }
  for (int r = 0; r < N; ++r) ASSERT_EQ(g[r * 6 + 2], value(r, 102));
  c.barrier();
}

TEST(Communicator, DeterministicModeSumsInRankOrderForEveryCollective) {
  Communicator& c = deterministic_test_comm();
  const int N = c.world_size();
  const std::int64_t shard = 37, n = shard * N;
  auto data_of = [n](int rank) {  // random data any rank can regenerate for any other
    std::mt19937 rng(1000u + static_cast<unsigned>(rank));
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = d(rng);
    return v;
  };
  std::vector<float> mine = data_of(c.rank()), reduced = mine, shard_out(shard), gathered(n);
  c.all_reduce(f32_view(reduced), ReduceOp::kAvg).wait();
  c.reduce_scatter(f32_view(mine), f32_view(shard_out), ReduceOp::kAvg).wait();
  c.all_gather(f32_view(shard_out), f32_view(gathered)).wait();
  std::vector<std::vector<float>> all;
  for (int r = 0; r < N; ++r) all.push_back(data_of(r));
  for (std::int64_t i = 0; i < n; ++i) {
    float acc = all[0][i];
    for (int r = 1; r < N; ++r) acc += all[r][i];
    const float expected = acc * (1.0f / static_cast<float>(N));
    ASSERT_EQ(reduced[i], expected) << "all_reduce element " << i;
    ASSERT_EQ(gathered[i], expected) << "reduce_scatter + all_gather element " << i;
  }
}

// A collective that completes after set_profiler took its profiler away reports nothing to it (a
// run unwinding on an error destroys its profiler while its last collectives may still finish on
// the progress thread: they wrote to the freed profiler). The gate holds the collective back
// until the profiler is gone.
TEST(Communicator, ACollectiveFinishingAfterItsProfilerWentReportsNothing) {
  Communicator& c = test_comm();
  if (c.backend_name() != "mpi" || c.world_size() == 1) {
    GTEST_SKIP() << "the host-clock spans are those of MPI's progress thread on several ranks (one posts nothing)";
  }
  for (const bool taken_away : {false, true}) {
    OpProfiler profiler;
    const ExecContext ctx;
    profiler.begin_step(ctx);
    c.set_profiler(&profiler);
    std::atomic<bool> open{false};
    c.hold_until([&open] { return open.load(); });
    std::vector<float> buf(5, 1.0f);
    Work work = c.all_reduce(f32_view(buf), ReduceOp::kSum);
    if (taken_away) c.set_profiler(nullptr);
    open = true;
    work.wait();
    c.set_profiler(nullptr);
    profiler.end_step(ctx);
    EXPECT_EQ(profiler.comm_totals().calls, taken_away ? 0 : 1) << (taken_away ? "taken away" : "kept");
    EXPECT_EQ(buf[0], static_cast<float>(c.world_size()));
  }
}

TEST(Communicator, StagingBuffersAreChargedAndReleased) {
  Communicator& c = test_comm();
  std::vector<bf16> buf(64, float_to_bf16(1.0f));
  Work w = c.all_reduce(bf16_view(buf), ReduceOp::kSum);
  w.wait();
  EXPECT_EQ(test_tracker().snapshot().current(MemCategory::kCommBuffers), 0);
  if (c.world_size() > 1) {
    EXPECT_GT(test_tracker().snapshot().peak(MemCategory::kCommBuffers), 0);
  }
  EXPECT_EQ(bf16_to_float(buf[5]), static_cast<float>(c.world_size()));
}

}  // namespace
}  // namespace zt
