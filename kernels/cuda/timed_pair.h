// Internal to the CUDA kernels: which of two ways of doing the same work runs faster on this GPU,
// timed by events on the stream. Used where a choice between equivalent kernels (or a kernel and a
// cuBLASLt epilogue) is measured once per configuration rather than assumed.
#pragma once

#include <algorithm>

#include <cuda_runtime_api.h>

#include "engine/base/device/cuda_stream.h"

namespace zt::cuda::detail {

struct PairTimes {
  float first_ms = 0.0f;
  float second_ms = 0.0f;
};

// The best of two rounds of each, alternated (first, second, first, second), each round `runs`
// calls back to back between one pair of events; waits for the stream. The callers run each way
// once before (a warm-up: first-call costs such as a product's own algorithm search stay out).
template <typename First, typename Second>
PairTimes time_alternated(cudaStream_t stream, First&& first, Second&& second, int runs = 3) {
  CudaEvent start(/*timing=*/true), stop(/*timing=*/true);
  auto time_ms = [&](auto&& way) {
    start.record(stream);
    for (int r = 0; r < runs; ++r) way();
    stop.record(stream);
    stop.synchronize();
    return CudaEvent::elapsed_ms(start, stop);
  };
  PairTimes best{time_ms(first), time_ms(second)};
  best.first_ms = std::min(best.first_ms, time_ms(first));
  best.second_ms = std::min(best.second_ms, time_ms(second));
  return best;
}

}  // namespace zt::cuda::detail
