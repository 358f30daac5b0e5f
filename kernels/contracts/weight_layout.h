// How a linear layer's weight is stored, one definition for every backend and the model.
#pragma once

namespace zt {

// How the weight is stored: [in, out] (Hugging Face Conv1D, used by every GPT-2 block linear) or
// [out, in] (nn.Linear; the tied LM head reads the token embedding [Vp, C] this way).
enum class WeightLayout { kInOut, kOutIn };

}  // namespace zt
