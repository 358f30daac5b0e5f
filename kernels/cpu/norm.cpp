// Sum of squares for the global gradient norm, on the CPU. The buffer is cut into fixed 4096-element
// chunks, each summed in fp64 with a fixed lane layout, and the chunk sums are added in index order:
// the result depends on the data only, never on the thread count, so every rank clips identically.
#include "kernels/cpu/norm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/base/core/bf16.h"
#include "engine/base/core/check.h"

namespace zt::cpu {

namespace {

constexpr std::int64_t kChunk = 4096;
constexpr int kLanes = 8;

inline double to_double(float x) { return static_cast<double>(x); }
inline double to_double(bf16 x) { return static_cast<double>(bf16_to_float(x)); }

// Squares are exact in fp64 (a 24-bit mantissa squared fits in 53 bits); only the adds round.
template <typename T>
double chunk_sum_of_squares(const T* x, std::int64_t n) {
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const double v = to_double(x[i + j]);
      acc[j] += v * v;
    }
  }
  for (int j = 0; i + j < n; ++j) {
    const double v = to_double(x[i + j]);
    acc[j] += v * v;
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

template <typename T>
double sum_of_squares_typed(const ExecContext& ctx, const T* x, std::int64_t n) {
  const std::int64_t num_chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> chunk_sums(static_cast<std::size_t>(num_chunks));
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t k = 0; k < num_chunks; ++k) {
    chunk_sums[k] = chunk_sum_of_squares(x + k * kChunk, std::min(kChunk, n - k * kChunk));
  }
  double total = 0.0;
  for (double s : chunk_sums) total += s;
  return total;
}

}  // namespace

double sum_of_squares(const ExecContext& ctx, TensorView x) {
  if (x.dtype == DType::kF32) return sum_of_squares_typed(ctx, x.as<float>(), x.numel());
  ZT_CHECK(x.dtype == DType::kBF16, "sum_of_squares of {} is not supported", dtype_name(x.dtype));
  return sum_of_squares_typed(ctx, x.as<bf16>(), x.numel());
}

std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs) {
  std::vector<double> sums;
  sums.reserve(xs.size());
  for (const TensorView& x : xs) sums.push_back(sum_of_squares(ctx, x));
  return sums;
}

exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx, const std::vector<TensorView>& xs) {
  exact_sum::SquareSum total;
  for (const TensorView& x : xs) {
    ZT_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16, "exact_sum_of_squares of {} is not supported",
             dtype_name(x.dtype));
    const std::int64_t n = x.numel();
    const std::int64_t num_chunks = (n + kChunk - 1) / kChunk;
    const bool is_f32 = x.dtype == DType::kF32;
    // A chunk's adds are far below a digit's room (kValuesBetweenCarries); the chunks' normalized
    // sums are added as integers, so the thread count changes nothing.
    std::vector<exact_sum::SquareSum> chunk_sums(static_cast<std::size_t>(num_chunks));
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
    for (std::int64_t k = 0; k < num_chunks; ++k) {
      exact_sum::SquareSum& c = chunk_sums[static_cast<std::size_t>(k)];
      const std::int64_t end = std::min(n, (k + 1) * kChunk);
      for (std::int64_t i = k * kChunk; i < end; ++i) {
        std::uint32_t bits = 0;
        if (is_f32) {
          std::memcpy(&bits, x.as<float>() + i, sizeof(bits));
        } else {
          bits = std::uint32_t{x.as<bf16>()[i].bits} << 16;
        }
        exact_sum::add_square_bits(c.digit, c.nonfinite, bits);
      }
      exact_sum::normalize(c.digit);
    }
    for (const exact_sum::SquareSum& c : chunk_sums) exact_sum::add(total, c);
  }
  return total;
}

}  // namespace zt::cpu
