// The process-wide communicators the collective tests share (one MPI initialisation per process).
#pragma once

#include <vector>

#include "engine/distributed/comm/communicator.h"

namespace zt {

// A host fp32 vector as a tensor view, for the collectives.
inline TensorView f32_view(std::vector<float>& v) {
  return {v.data(), DType::kF32, Device::kCPU, Shape{static_cast<std::int64_t>(v.size())}};
}

Communicator& test_comm();                // default options
Communicator& deterministic_test_comm();  // CommOptions::deterministic
MemoryTracker& test_tracker();

}  // namespace zt
