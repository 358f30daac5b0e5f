// Quantized collectives (engine/distributed/comm/quantized_collectives.h) across real ranks (under
// mpirun -np 1..4, or alone): each rank's data come from a seed every rank knows, so each rank
// recomputes the expected result on its own with the CPU encoders, in the order the collective
// promises, and compares bit for bit; the result is also within the encoding's error of the exact
// one, the bytes sent are what the volume functions say, and the comm buffers' peak is what the
// staging functions say. Sizes include ones the world does not divide and ones smaller than it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "engine/base/core/bf16.h"
#include "engine/distributed/comm/quantized_collectives.h"
#include "kernels/contracts/int8_blocks.h"
#include "kernels/ops.h"
#include "tests/comm/comm_test_env.h"

namespace zt {
namespace {

const ExecContext kCtx{};

// Rank r's values: normal, scaled per 256-block over many magnitudes (what int8 blocks are for).
std::vector<float> data_of(int rank, std::int64_t n, std::uint32_t salt) {
  std::mt19937 gen(1000u * salt + static_cast<std::uint32_t>(rank));
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> exponent(-8.0f, 8.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  float scale = 1.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    if (i % 256 == 0) scale = std::exp2(exponent(gen));
    v[static_cast<std::size_t>(i)] = normal(gen) * scale;
  }
  return v;
}

// The values `x` becomes on the wire and back.
std::vector<float> round_trip(std::vector<float> x, WireDType wire) {
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  if (wire == WireDType::kBF16) {
    for (float& v : x) v = round_to_bf16(v);
    return x;
  }
  std::vector<std::int32_t> packed(static_cast<std::size_t>(int8_blocks::packed_words(n)));
  const TensorView p{packed.data(), DType::kI32, Device::kCPU, Shape{(std::int64_t)packed.size()}};
  ops::quantize_int8_blocks(kCtx, f32_view(x), p);
  ops::dequantize_int8_blocks(kCtx, p, f32_view(x));
  return x;
}

std::vector<std::uint32_t> bits(const std::vector<float>& x) {
  std::vector<std::uint32_t> b(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) b[i] = std::bit_cast<std::uint32_t>(x[i]);
  return b;
}

TEST(QuantizedCollectives, AllGatherInt8IsEveryRanksRoundTrip) {
  Communicator& comm = test_comm();
  const int N = comm.world_size(), r = comm.rank();
  for (std::int64_t n : {1, 300, 1024 + 7}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " N=" << N);
    MemoryTracker tracker;
    std::vector<float> send = data_of(r, n, 1), recv(static_cast<std::size_t>(N * n), -1.0f);
    const std::int64_t bytes_before = comm.bytes_sent(), elements_before = comm.elements_sent();
    all_gather_int8(comm, kCtx, tracker, f32_view(send), f32_view(recv)).wait();
    for (int k = 0; k < N; ++k) {
      const std::vector<float> want = round_trip(data_of(k, n, 1), WireDType::kInt8);
      const std::vector<float> got(recv.begin() + k * n, recv.begin() + (k + 1) * n);
      ASSERT_EQ(bits(got), bits(want)) << "rank " << k << "'s slot";
    }
    const WireVolume v = all_gather_int8_volume(n, N);
    EXPECT_EQ(comm.bytes_sent() - bytes_before, v.bytes);
    EXPECT_EQ(comm.elements_sent() - elements_before, v.elements);
    EXPECT_EQ(tracker.snapshot().peak(MemCategory::kCommBuffers), all_gather_int8_staging_bytes(n, N));
    EXPECT_EQ(tracker.snapshot().current(MemCategory::kCommBuffers), 0) << "staging freed at completion";
  }
}

// What rank `owner` computes for its chunk [begin, begin + m): every rank's chunk through the wire,
// summed in rank order, averaged, through the wire again.
std::vector<float> expected_chunk(int N, std::int64_t n, std::int64_t begin, std::int64_t m, WireDType wire, bool avg,
                                  std::uint32_t salt) {
  std::vector<float> sum(static_cast<std::size_t>(m), 0.0f);
  for (int k = 0; k < N; ++k) {
    const std::vector<float> all = data_of(k, n, salt);
    const std::vector<float> chunk = round_trip(std::vector<float>(all.begin() + begin, all.begin() + begin + m), wire);
    for (std::int64_t i = 0; i < m; ++i) sum[i] = k == 0 ? chunk[i] : sum[i] + chunk[i];
  }
  if (avg) {
    for (float& v : sum) v *= 1.0f / static_cast<float>(N);
  }
  return round_trip(sum, wire);
}

TEST(QuantizedCollectives, AllReduceEncodedSumsChunksInRankOrder) {
  Communicator& comm = test_comm();
  const int N = comm.world_size(), r = comm.rank();
  std::uint32_t salt = 10;
  for (WireDType wire : {WireDType::kBF16, WireDType::kInt8}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      for (std::int64_t n : {std::int64_t{N > 1 ? N - 1 : 1}, std::int64_t{1000}, std::int64_t{3 * 256 * N + 5}}) {
        ++salt;
        SCOPED_TRACE(::testing::Message()
                     << wire_dtype_name(wire) << (op == ReduceOp::kAvg ? " avg" : " sum") << " n=" << n << " N=" << N);
        MemoryTracker tracker;
        std::vector<float> buf = data_of(r, n, salt);
        const std::int64_t bytes_before = comm.bytes_sent();
        all_reduce_encoded(comm, kCtx, tracker, f32_view(buf), op, wire).wait();
        const std::int64_t c = (n + N - 1) / N;
        std::vector<float> exact(static_cast<std::size_t>(n), 0.0f);
        std::vector<double> magnitude(static_cast<std::size_t>(n), 0.0);  // sum of the terms' |x|
        double largest_input = 0.0;
        for (int k = 0; k < N; ++k) {
          const std::vector<float> x = data_of(k, n, salt);
          for (std::int64_t i = 0; i < n; ++i) {
            exact[i] += x[i] / (op == ReduceOp::kAvg ? N : 1);
            magnitude[i] += std::fabs(static_cast<double>(x[i])) / (op == ReduceOp::kAvg ? N : 1);
            largest_input = std::max(largest_input, std::fabs(static_cast<double>(x[i])));
          }
        }
        for (int j = 0; j < N; ++j) {
          const std::int64_t begin = std::min(n, j * c), m = std::min(n, begin + c) - begin;
          const std::vector<float> want = expected_chunk(N, n, begin, m, wire, op == ReduceOp::kAvg, salt);
          const std::vector<float> got(buf.begin() + begin, buf.begin() + begin + m);
          ASSERT_EQ(bits(got), bits(want)) << "chunk " << j;
        }
        // Within the two encodings' error of the exact sum: 2^-9 relative per bf16 rounding (of
        // every term, then of the sum); half a step (absmax / 127) per int8 one, N terms of at most
        // the largest input, then the sum.
        for (std::int64_t i = 0; i < n; ++i) {
          const double terms = op == ReduceOp::kAvg ? 1.0 : N;
          const double tol = wire == WireDType::kBF16 ? (magnitude[i] + std::fabs(exact[i])) / 256.0 + 1e-30
                                                      : terms * largest_input / 127.0;
          ASSERT_NEAR(buf[i], exact[i], tol) << "element " << i;
        }
        EXPECT_EQ(comm.bytes_sent() - bytes_before, all_reduce_encoded_volume(n, N, wire).bytes);
        EXPECT_EQ(tracker.snapshot().peak(MemCategory::kCommBuffers), all_reduce_encoded_staging_bytes(n, N, wire));
        EXPECT_EQ(tracker.snapshot().current(MemCategory::kCommBuffers), 0);
      }
    }
  }
}

}  // namespace
}  // namespace zt
