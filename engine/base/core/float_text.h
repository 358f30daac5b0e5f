// A float written to JSON (configs, manifests, Hugging Face config.json) as the shortest decimal
// that reads back to it: 0.9f as 0.9 and 1e-5f as 1e-05, not 0.8999999761581421 or
// 9.999999747378752e-06.
#pragma once

#include <fmt/format.h>

#include <string>

namespace zt {

inline double shortest_decimal(float f) { return std::stod(fmt::format("{}", f)); }

}  // namespace zt
