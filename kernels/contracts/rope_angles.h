// The rotary embedding's frequencies and angles, the same on every backend (host and device code):
// inv_freq_i = 1 / theta^(2i / head_size), then Hugging Face's rope_scaling of it, and
// angle = t * inv_freq_i, each in fp32 as transformers computes them (the power in fp32, then its
// reciprocal; the product rounded once).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/contracts/host_device.h"

namespace zt {

// Hugging Face's rope_scaling by its rope_type: none; "linear" (every frequency over `factor`,
// i.e. positions stretched); "llama3" (Llama 3.1 and later: wavelengths shorter than
// original_max_position / high_freq_factor kept, those longer than original_max_position /
// low_freq_factor over `factor`, a smooth blend of the two between).
enum class RopeScalingType : std::uint8_t { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;           // llama3 only
  float high_freq_factor = 4.0f;          // llama3 only
  float original_max_position = 8192.0f;  // llama3's original_max_position_embeddings
};

// What the kernels take: the base and the scaling (by value into a kernel: a few floats).
struct RopeFrequencies {
  float theta = 10000.0f;
  RopeScaling scaling{};
};

// An fp32 product rounded on its own, so no compiler fuses it into the add or subtract after it (nvcc
// by default, GCC where the target has FMA: it did, one ulp off transformers at Llama 3.2 1B's
// frequency 16). On the host a volatile store is what GCC cannot see through (it turned a product
// rounded through double back into a float multiply, and fused that).
ZT_HOST_DEVICE inline float product_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  volatile float product = a * b;
  return product;
#endif
}

// llama3's blend, in transformers' order of fp32 operations (_compute_llama3_parameters), each
// rounded as torch rounds it. A scalar over a tensor is torch's reciprocal times the scalar, so
// 2 pi / inv is (1 / inv) * 2 pi here.
ZT_HOST_DEVICE inline float llama3_scaled_inv_freq(float inv, const RopeScaling& s) {
  const float wavelen = product_rounded(1.0f / inv, 6.28318530717958647692f);
  const float high_freq_wavelen = s.original_max_position / s.high_freq_factor;
  const float low_freq_wavelen = s.original_max_position / s.low_freq_factor;
  if (wavelen < high_freq_wavelen) return inv;
  if (wavelen > low_freq_wavelen) return inv / s.factor;
  const float smooth = (product_rounded(1.0f / wavelen, s.original_max_position) - s.low_freq_factor) /
                       (s.high_freq_factor - s.low_freq_factor);
  return product_rounded(1.0f - smooth, inv) / s.factor + product_rounded(smooth, inv);
}

ZT_HOST_DEVICE inline float rope_inv_freq(int i, int head_size, const RopeFrequencies& f) {
  const float inv = 1.0f / powf(f.theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
  switch (f.scaling.type) {
    case RopeScalingType::kLinear: return inv / f.scaling.factor;
    case RopeScalingType::kLlama3: return llama3_scaled_inv_freq(inv, f.scaling);
    case RopeScalingType::kNone: break;
  }
  return inv;
}

ZT_HOST_DEVICE inline float rope_angle(int t, int i, int head_size, const RopeFrequencies& f) {
  return static_cast<float>(t) * rope_inv_freq(i, head_size, f);
}

}  // namespace zt
