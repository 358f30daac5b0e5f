// Learning-rate schedule: linear warmup, then cosine or linear decay to a floor (nanoGPT's shape),
// constant after warmup, or warmup-stable-decay (WSD: the peak held, then a cooldown to the floor
// over the last part, in llm.c's 1 - sqrt shape from Hägele et al., arXiv:2405.18392). A pure
// function of the step, so a resumed run continues exactly.
#pragma once

#include <string>

namespace zt {

class LrSchedule {
 public:
  enum class Decay { kCosine, kLinear, kConstant, kWsd };

  // `cooldown_fraction` (kWsd only): the share of decay_steps, at its end, that the cooldown takes.
  LrSchedule(float peak_lr, float min_lr, int warmup_steps, int decay_steps, Decay decay,
             double cooldown_fraction = 0.2);
  // "cosine" | "linear" | "constant" | "wsd" (already validated by the config reader).
  static Decay parse_decay(const std::string& text);

  // The learning rate of optimizer step `step` (0-based):
  //   step < warmup:        peak * (step + 1) / (warmup + 1)
  //   step >= decay_steps:  min_lr
  //   otherwise:            min + c * (peak - min), c = (1 + cos(pi r)) / 2 or 1 - r,
  //                         r = (step - warmup) / (decay_steps - warmup)
  //   wsd:                  the peak up to cooldown_start = max(warmup, decay_steps -
  //                         ceil(fraction * decay_steps)), then c = 1 - sqrt(r),
  //                         r = (step - cooldown_start) / (decay_steps - cooldown_start)
  float at(int step) const;
  int cooldown_start() const { return cooldown_start_; }

 private:
  float peak_lr_, min_lr_;
  int warmup_steps_, decay_steps_;
  Decay decay_;
  int cooldown_start_;
};

}  // namespace zt
