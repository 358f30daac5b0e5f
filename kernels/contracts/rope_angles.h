// The rotary embedding's frequencies and angles, the same on every backend (host and device code):
// inv_freq_i = 1 / theta^(2i / head_size) and angle = t * inv_freq_i, each in fp32 as Hugging
// Face's LlamaRotaryEmbedding computes them (the power in fp32, then its reciprocal; the product
// rounded once).
#pragma once

#include <cmath>

#include "kernels/contracts/host_device.h"

namespace zt {

ZT_HOST_DEVICE inline float rope_inv_freq(int i, int head_size, float theta) {
  return 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
}

ZT_HOST_DEVICE inline float rope_angle(int t, int i, int head_size, float theta) {
  return static_cast<float>(t) * rope_inv_freq(i, head_size, theta);
}

}  // namespace zt
