// LrSchedule: warmup, then cosine/linear decay to the floor, or the peak held and a cooldown (WSD).
#include "engine/app/trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace zt {

LrSchedule::LrSchedule(float peak_lr, float min_lr, int warmup_steps, int decay_steps, Decay decay,
                       double cooldown_fraction)
    : peak_lr_(peak_lr),
      min_lr_(min_lr),
      warmup_steps_(warmup_steps),
      decay_steps_(decay_steps),
      decay_(decay),
      // llm.c's decay point, (int)(0.8f * N) for the default fraction: N - ceil(fraction * N) (the
      // epsilon keeps a product that lands a hair above an integer in binary, 0.07 * 100 =
      // 7.000000000000001, from rounding up past it).
      cooldown_start_(decay == Decay::kWsd
                          ? std::max(warmup_steps,
                                     decay_steps - static_cast<int>(std::ceil(cooldown_fraction * decay_steps - 1e-9)))
                          : warmup_steps) {}

LrSchedule::Decay LrSchedule::parse_decay(const std::string& text) {
  if (text == "linear") return Decay::kLinear;
  if (text == "constant") return Decay::kConstant;
  if (text == "wsd") return Decay::kWsd;
  return Decay::kCosine;
}

float LrSchedule::at(int step) const {
  if (step < warmup_steps_) {
    return static_cast<float>(static_cast<double>(peak_lr_) * (step + 1) / (warmup_steps_ + 1));
  }
  if (decay_ == Decay::kConstant) return peak_lr_;
  if (step >= decay_steps_) return min_lr_;
  if (decay_ == Decay::kWsd) {
    if (step < cooldown_start_) return peak_lr_;
    const double r = static_cast<double>(step - cooldown_start_) / (decay_steps_ - cooldown_start_);
    return static_cast<float>(min_lr_ + (1.0 - std::sqrt(r)) * (static_cast<double>(peak_lr_) - min_lr_));
  }
  const double r = static_cast<double>(step - warmup_steps_) / (decay_steps_ - warmup_steps_);
  const double c = decay_ == Decay::kCosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * r)) : 1.0 - r;
  return static_cast<float>(min_lr_ + c * (static_cast<double>(peak_lr_) - min_lr_));
}

}  // namespace zt
