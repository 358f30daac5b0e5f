// HybridCommunicator across real ranks (under mpirun -np 1..6, or alone): for every group size g
// that divides the world, the world seen as one group of g ranks whose reductions still reach
// all N ranks, in two hops. Data are small multiples of 1/4 (exact sums, compared with ==), as in
// communicator_test.cpp; averages and random data within fp32 rounding of the flat collective.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/distributed/comm/hybrid_communicator.h"
#include "tests/comm/comm_test_env.h"

namespace zt {
namespace {

float hybrid_value(int rank, std::int64_t i) { return 0.25f * static_cast<float>((rank + 1) * 3 + (i % 13)); }

std::vector<int> group_sizes(int N) {
  std::vector<int> out;
  for (int g = 1; g <= N; ++g)
    if (N % g == 0) out.push_back(g);
  return out;
}

TEST(HybridCommunicator, IsOneGroupOfConsecutiveRanks) {
  Communicator& world = test_comm();
  for (int g : group_sizes(world.world_size())) {
    HybridCommunicator h(world, g);
    EXPECT_EQ(h.world_size(), g);
    EXPECT_EQ(h.rank(), world.rank() % g);
    EXPECT_EQ(h.group_index(), world.rank() / g);
    EXPECT_EQ(h.replicas().world_size(), world.world_size() / g);
  }
}

TEST(HybridCommunicator, GathersInsideTheGroupAndReducesOverTheWorld) {
  Communicator& world = test_comm();
  const int N = world.world_size(), r = world.rank(), n = 5;
  for (int g : group_sizes(N)) {
    SCOPED_TRACE(::testing::Message() << "group size " << g << " of " << N);
    HybridCommunicator h(world, g);
    const int first = (r / g) * g;  // the group's first world rank
    std::vector<float> send(n), gathered(static_cast<std::size_t>(g * n));
    for (int i = 0; i < n; ++i) send[i] = hybrid_value(r, i);
    h.all_gather(f32_view(send), f32_view(gathered)).wait();
    for (int k = 0; k < g; ++k)
      for (int i = 0; i < n; ++i) ASSERT_EQ(gathered[k * n + i], hybrid_value(first + k, i)) << "member " << k;

    // Reduce-scatter: shard h.rank() of the sum over all N ranks.
    std::vector<float> full(static_cast<std::size_t>(g * n)), shard(n);
    for (int i = 0; i < g * n; ++i) full[i] = hybrid_value(r, i);
    const std::int64_t sent_before = h.elements_sent();
    h.reduce_scatter(f32_view(full), f32_view(shard), ReduceOp::kSum).wait();
    for (int i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int q = 0; q < N; ++q) sum += hybrid_value(q, h.rank() * n + i);
      ASSERT_EQ(shard[i], sum) << "element " << i;
    }
    // Ring volumes: g n (g - 1) / g inside the group, 2 n (G - 1) / G across.
    const int G = N / g;
    EXPECT_EQ(h.elements_sent() - sent_before, std::int64_t{g} * n * (g - 1) / g + 2 * std::int64_t{n} * (G - 1) / G);

    std::vector<float> buf(n);
    for (int i = 0; i < n; ++i) buf[i] = hybrid_value(r, i);
    h.all_reduce(f32_view(buf), ReduceOp::kSum).wait();
    for (int i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int q = 0; q < N; ++q) sum += hybrid_value(q, i);
      ASSERT_EQ(buf[i], sum);
    }
  }
}

TEST(HybridCommunicator, AveragesAndRandomSumsMatchTheFlatCollectiveWithinRounding) {
  Communicator& world = deterministic_test_comm();
  const int N = world.world_size(), n = 257;
  std::mt19937 rng(1234u + static_cast<unsigned>(world.rank()));
  std::normal_distribution<float> normal;
  for (int g : group_sizes(N)) {
    SCOPED_TRACE(::testing::Message() << "group size " << g << " of " << N);
    HybridCommunicator h(world, g);
    std::vector<float> full(static_cast<std::size_t>(g * n));
    for (float& v : full) v = normal(rng);
    // The flat reference: every rank's full buffer reduced over the world, then this rank's shard.
    std::vector<float> flat = full;
    world.all_reduce(f32_view(flat), ReduceOp::kAvg).wait();
    for (int repeat = 0; repeat < 2; ++repeat) {  // deterministic: the same bits twice
      std::vector<float> shard(n);
      h.reduce_scatter(f32_view(full), f32_view(shard), ReduceOp::kAvg).wait();
      static std::vector<float> first;
      if (repeat == 0) first = shard;
      for (int i = 0; i < n; ++i) {
        const float want = flat[static_cast<std::size_t>(h.rank() * n + i)];
        ASSERT_NEAR(shard[i], want, 1e-6f * (1.0f + std::fabs(want))) << "element " << i;
        if (repeat == 1) {
          ASSERT_EQ(shard[i], first[i]) << "deterministic reductions repeat bit for bit";
        }
      }
    }
  }
}

}  // namespace
}  // namespace zt
