// A norm's row scale, 1 / sqrt(mean square + eps) (LayerNorm's variance, RMSNorm's mean of
// squares), one statement for every backend.
#pragma once

#include <cfloat>
#include <cmath>

#include "kernels/contracts/host_device.h"

namespace zt {

// A mean square that overflowed float (a row's values past about 1e19, a diverging run's) gave a
// scale of 0: a LayerNorm row of its bias alone, an RMSNorm row of zeros, uniform logits and a
// finite loss of ln V that the run's non-finite check never saw. Not a number instead, as PyTorch's
// layer_norm gives there, so the step is seen for what it is. (A NaN mean square stays NaN: the
// comparison fails.) Any finite one gives the bits it always did.
ZT_HOST_DEVICE inline float norm_row_scale(float mean_square, float eps) {
  return mean_square <= FLT_MAX ? 1.0f / sqrtf(mean_square + eps) : NAN;
}

}  // namespace zt
