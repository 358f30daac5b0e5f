// LayerNorm's epsilon (GPT-2's), one definition for every backend.
#pragma once

namespace zt {

constexpr float kLayerNormEps = 1e-5f;

}  // namespace zt
