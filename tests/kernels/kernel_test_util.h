// Shared helpers for the CPU kernel tests: seeded random inputs (the seed is traced so a failure can
// be replayed with ZT_TEST_SEED=<seed>), TensorViews over std::vectors, the normwise error metric,
// and central finite differences of an fp64 reference loss. ZT_TEST_PRINT_ERRORS=1 prints every
// measured normwise error (to calibrate tolerances).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/base/core/bf16.h"
#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::test {

// ZT_TEST_SEED from the environment (to replay a failure), otherwise fresh from std::random_device.
inline std::uint32_t test_seed() {
  if (const char* s = std::getenv("ZT_TEST_SEED"); s != nullptr && *s != '\0') {
    return static_cast<std::uint32_t>(std::strtoul(s, nullptr, 10));
  }
  return std::random_device{}();
}

class Rng {
 public:
  explicit Rng(std::uint32_t seed) : gen_(seed) {}

  std::vector<float> uniform(std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = dist(gen_);
    return v;
  }
  std::vector<float> normal(std::int64_t n, float mean = 0.0f, float stddev = 1.0f) {
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = dist(gen_);
    return v;
  }
  // Integers uniform in [lo, hi).
  std::vector<std::int32_t> ints(std::int64_t n, std::int32_t lo, std::int32_t hi) {
    std::uniform_int_distribution<std::int32_t> dist(lo, hi - 1);
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = dist(gen_);
    return v;
  }

 private:
  std::mt19937 gen_;
};

// Declares `Rng name` seeded by test_seed(), with the seed in the failure trace and the XML report.
#define ZT_SEEDED_RNG(name)                                                         \
  const std::uint32_t name##_seed = ::zt::test::test_seed();                        \
  SCOPED_TRACE(::testing::Message() << "replay with ZT_TEST_SEED=" << name##_seed); \
  ::testing::Test::RecordProperty("seed", std::to_string(name##_seed));             \
  ::zt::test::Rng name(name##_seed)

inline ExecContext cpu_ctx(int threads = 2) {
  ExecContext ctx;
  ctx.num_threads = threads;
  return ctx;
}

template <typename T>
TensorView view_of(std::vector<T>& v, Shape shape) {
  EXPECT_EQ(static_cast<std::int64_t>(v.size()), shape.numel()) << "test bug: vector size vs shape";
  return TensorView{v.data(), DTypeOf<T>::value, Device::kCPU, shape};
}
template <typename T>
TensorView view_of(std::vector<T>& v) {
  return view_of(v, Shape{static_cast<std::int64_t>(v.size())});
}

// The same values as v, stored one float further into a larger buffer: a view with a different
// alignment, to check that results do not depend on where a buffer happens to start.
struct ShiftedCopy {
  explicit ShiftedCopy(const std::vector<float>& v) : storage(v.size() + 1) {
    std::copy(v.begin(), v.end(), storage.begin() + 1);
  }
  static ShiftedCopy zeros(std::int64_t n) { return ShiftedCopy(std::vector<float>(static_cast<std::size_t>(n))); }
  TensorView view(Shape shape) { return TensorView{storage.data() + 1, DType::kF32, Device::kCPU, shape}; }
  std::vector<float> values() const { return {storage.begin() + 1, storage.end()}; }
  std::vector<float> storage;
};

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Normwise relative error max|a - ref| / max(max|ref|, tiny): insensitive to individual tiny
// reference entries, which element-wise relative errors would blow up.
// `scale` (optional) floors the denominator: for results that cancel terms much larger than
// themselves, the error is judged against the terms' size.
template <typename A>
double max_rel_error(const std::vector<A>& a, const std::vector<double>& ref, double scale = 0.0) {
  double max_diff = 0.0, max_ref = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double diff = std::abs(static_cast<double>(a[i]) - ref[i]);
    max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  return max_diff / std::max({max_ref, scale, 1e-30});
}

// gtest assertion: EXPECT_TRUE(close_normwise(got, ref, tol)), reporting the error and worst index.
template <typename A>
::testing::AssertionResult close_normwise(const std::vector<A>& got, const std::vector<double>& ref, double tol,
                                          double scale = 0.0) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs reference " << ref.size();
  }
  const double err = max_rel_error(got, ref, scale);
  if (std::getenv("ZT_TEST_PRINT_ERRORS") != nullptr) {  // for calibrating tolerances
    std::printf("    normwise error %.3g (tol %.3g)\n", err, tol);
  }
  if (err <= tol) return ::testing::AssertionSuccess() << "normwise error " << err;
  std::size_t worst = 0;
  double worst_diff = -1.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (std::isnan(diff) || diff > worst_diff) {
      worst = i;
      worst_diff = std::isnan(diff) ? INFINITY : diff;
    }
  }
  return ::testing::AssertionFailure() << "normwise error " << err << " > tol " << tol << "; worst at [" << worst
                                       << "]: got " << got[worst] << ", reference " << ref[worst];
}

// sum(w[i] * y[i]): the scalar loss whose gradient a backward kernel computes when fed dout = w.
inline double weighted_sum(const std::vector<double>& w, const std::vector<double>& y) {
  double s = 0.0;
  for (std::size_t i = 0; i < w.size(); ++i) s += w[i] * y[i];
  return s;
}

// Central differences of `loss` at x, element by element. In fp64 with h = 1e-5 the truncation
// error (~h^2 f''') and rounding error (~1e-16 |L| / h) are both below 1e-8 for our losses.
inline std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& loss,
                                            std::vector<double> x, double h = 1e-5) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss(x);
    x[i] = saved - h;
    const double down = loss(x);
    x[i] = saved;
    grad[i] = (up - down) / (2.0 * h);
  }
  return grad;
}

template <typename T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace zt::test
