// Learning-rate schedule: linear warmup, then cosine or linear decay to a floor (nanoGPT's shape),
// or constant after warmup. A pure function of the step, so a resumed run continues exactly.
#pragma once

#include <string>

namespace zt {

class LrSchedule {
 public:
  enum class Decay { kCosine, kLinear, kConstant };

  LrSchedule(float peak_lr, float min_lr, int warmup_steps, int decay_steps, Decay decay);
  // "cosine" | "linear" | "constant" (already validated by the config reader).
  static Decay parse_decay(const std::string& text);

  // The learning rate of optimizer step `step` (0-based):
  //   step < warmup:        peak * (step + 1) / (warmup + 1)
  //   step >= decay_steps:  min_lr
  //   otherwise:            min + c * (peak - min), c = (1 + cos(pi r)) / 2 or 1 - r,
  //                         r = (step - warmup) / (decay_steps - warmup)
  float at(int step) const;

 private:
  float peak_lr_, min_lr_;
  int warmup_steps_, decay_steps_;
  Decay decay_;
};

}  // namespace zt
