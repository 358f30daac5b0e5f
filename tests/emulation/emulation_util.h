// Helpers shared by the SIMT emulation tests: host vectors in a kernel's storage type (float, or
// the emulator's __nv_bfloat16) and back, and the comparison with a CPU kernel's result.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tests/emulation/attention_reference.h"  // to_device_bf16, widen
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test::emulation {

// The CPU references run on one thread: the ThreadSanitizer build of these tests cannot see
// OpenMP's (uninstrumented) synchronisation and would report the reference's own team as racing.
inline ExecContext reference_ctx() { return cpu_ctx(1); }

template <typename T>
inline std::vector<T> device_values(std::vector<float> x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return to_device_bf16(x);
  }
}
template <typename T>
inline std::vector<float> host_values(const std::vector<T>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return widen(x);
  }
}
template <typename T>
constexpr DType dtype_of() {
  return std::is_same_v<T, float> ? DType::kF32 : DType::kBF16;
}

// A kernel's output buffer with a guard past its `n` elements, every element `fill` (NaN, or a
// sentinel): a write past the output (into the next row, which its own block then writes right, or
// past the buffer, found otherwise only where glibc noticed the heap's damage) leaves a mark there.
inline constexpr std::size_t kGuardElements = 64;
template <typename T>
std::vector<T> guarded(std::size_t n, T fill) {
  return std::vector<T>(n + kGuardElements, fill);
}
template <typename T>
std::vector<T> guarded(std::vector<T> v, T fill) {
  v.resize(v.size() + kGuardElements, fill);
  return v;
}
// Whether the guard past `n` elements still holds `fill` bit for bit; `v` trimmed to them.
template <typename T>
::testing::AssertionResult guard_kept(std::vector<T>& v, std::size_t n, T fill) {
  for (std::size_t i = n; i < v.size(); ++i) {
    if (std::memcmp(&v[i], &fill, sizeof(T)) != 0) {
      v.resize(n);
      return ::testing::AssertionFailure() << "written past the output's " << n << " elements, at " << i;
    }
  }
  v.resize(n);
  return ::testing::AssertionSuccess();
}

// fp32: normwise 1e-5 (fp32 sums in another order); BF16: also per element within 2^-7 of the
// reference (one rounding of each result, which a last-bit difference before it may flip).
inline ::testing::AssertionResult close_to_cpu(const std::vector<float>& got, const std::vector<float>& ref,
                                               bool bf16) {
  if (!bf16) return close_normwise(got, to_double(ref), 1e-5);
  double max_ref = 0.0;
  for (float x : ref) max_ref = std::max(max_ref, std::abs(static_cast<double>(x)));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (!(diff <= std::abs(static_cast<double>(ref[i])) / 128.0 + 1e-5 * max_ref)) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", reference " << ref[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// Two rows of C values for a norm: the first +-1e20 (its mean square overflows float, a diverging
// run's residual stream), the second ordinary.
inline std::vector<float> overflowing_then_plain_rows(std::int64_t C) {
  std::vector<float> values(static_cast<std::size_t>(2 * C));
  for (std::int64_t c = 0; c < C; ++c) {
    values[static_cast<std::size_t>(c)] = c % 2 == 0 ? 1e20f : -1e20f;
    values[static_cast<std::size_t>(C + c)] = 0.25f * static_cast<float>(c % 7) - 0.5f;
  }
  return values;
}

// A norm's two rows of C, the first of values whose mean square overflows float: that row NaN on
// both sides (its scale and every output), the second finite, the emulated one within the CPU's
// bounds (kernels/contracts/norm_row_scale.h).
inline void expect_overflowed_row_nan(const std::string& kernel, const std::vector<float>& got,
                                      const std::vector<float>& got_rstd, const std::vector<float>& cpu,
                                      const std::vector<float>& cpu_rstd, std::int64_t C, bool bf16) {
  const auto is_nan = [](float v) { return std::isnan(v); };
  const auto is_finite = [](float v) { return std::isfinite(v); };
  for (const auto& [side, out, rstd] :
       {std::tuple{"CPU", &cpu, &cpu_rstd}, std::tuple{kernel.c_str(), &got, &got_rstd}}) {
    EXPECT_TRUE(std::isnan((*rstd)[0]) && std::all_of(out->begin(), out->begin() + C, is_nan))
        << side << ": the overflowed row is NaN (rstd " << (*rstd)[0] << ", out[0] " << (*out)[0] << ")";
    EXPECT_TRUE(std::isfinite((*rstd)[1]) && std::all_of(out->begin() + C, out->end(), is_finite))
        << side << ": the row beside it is finite";
  }
  EXPECT_TRUE(close_to_cpu(std::vector<float>(got.begin() + C, got.end()),
                           std::vector<float>(cpu.begin() + C, cpu.end()), bf16))
      << kernel << ": the finite row as the CPU's";
}

// Every broken emulator rule (simt::violations) as a test failure.
inline void expect_no_violations() {
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

}  // namespace zt::test::emulation
