// The dropout contract's definitions (see the header).
#include "kernels/contracts/dropout_spec.h"

#include <cmath>

#include "engine/base/core/check.h"
#include "engine/base/core/philox.h"

namespace zt {

namespace dropout_rules {

bool mask_fits_counter(std::int64_t elems_per_sample) {
  // The block counter j / 4 is 32 bits; a generator may run kMaxBlocksPastEnd blocks past the last element.
  return elems_per_sample / 4 + kMaxBlocksPastEnd <= (std::int64_t{1} << 32);
}

void check_spec(const DropoutSpec& spec, std::int64_t elems_per_sample) {
  ZT_CHECK(spec.p >= 0.0f && spec.p < 1.0f, "dropout p must be in [0, 1), is {}", spec.p);
  // p = 0 draws no bits, so no counter bounds it: attention without dropout at a long context (the
  // probabilities' n_head * T * T passes 2^34 from T 23171 at 32 heads) is not refused.
  if (!spec.active()) return;
  ZT_CHECK(mask_fits_counter(elems_per_sample),
           "dropout over {} elements per sample exceeds the 32-bit Philox block counter", elems_per_sample);
}

MaskRows check_operands(const TensorView& out, const TensorView& in, const DropoutSpec& spec, const char* what) {
  ZT_CHECK(out.dtype == in.dtype && (in.dtype == DType::kF32 || in.dtype == DType::kBF16),
           "{}: out and in must both be F32 or both BF16, not {} and {}", what, dtype_name(out.dtype),
           dtype_name(in.dtype));
  ZT_CHECK(out.numel() == in.numel(), "{}: out has {} elements, in {}", what, out.numel(), in.numel());
  ZT_CHECK(in.shape.ndim() >= 1, "{}: needs a leading sample dimension", what);
  const std::int64_t B = in.shape[0];
  const MaskRows rows{B, B > 0 ? in.numel() / B : 0};
  check_spec(spec, rows.per_sample);
  return rows;
}

std::uint32_t keep_threshold(float p) {
  const double scaled = std::round(static_cast<double>(p) * 4294967296.0);  // exact product: p is fp32
  return scaled >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(scaled);
}

float keep_scale(float p) { return static_cast<float>(1.0 / (1.0 - static_cast<double>(p))); }

}  // namespace dropout_rules

bool dropout_keep(const DropoutSpec& spec, std::int64_t sample, std::int64_t j) {
  const auto g = static_cast<std::uint64_t>(sample);
  const auto r = philox4x32({static_cast<std::uint32_t>(j / 4), spec.site, static_cast<std::uint32_t>(g),
                             static_cast<std::uint32_t>(g >> 32)},
                            {static_cast<std::uint32_t>(spec.seed), static_cast<std::uint32_t>(spec.seed >> 32)});
  return r[j % 4] >= dropout_rules::keep_threshold(spec.p);
}

}  // namespace zt
