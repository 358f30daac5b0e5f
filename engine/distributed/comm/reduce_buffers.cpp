// ordered_sum: the deterministic reduction.
#include "engine/distributed/comm/reduce_buffers.h"

#include <cstring>

#include "engine/base/core/bf16.h"
#include "engine/base/core/check.h"

namespace zt {

void ordered_sum(const float* in, int parts, std::int64_t n, float scale, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    float acc = in[i];
    for (int r = 1; r < parts; ++r) acc += in[r * n + i];
    out[i] = acc * scale;
  }
}

}  // namespace zt
