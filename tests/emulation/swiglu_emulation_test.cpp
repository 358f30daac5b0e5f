// The CUDA SwiGLU kernels (kernels/cuda/swiglu_kernels.cuh) run on the CPU under the SIMT emulator
// against the CPU kernels: forward and backward (in place over gate_up, as a model may call it),
// both vector widths, F32 and BF16. Tolerances of the other elementwise tests: 1e-5 normwise
// (expf against std::exp), BF16 results also within 2^-7 per element.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/swiglu_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace sw = cuda::detail::swiglu;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

template <typename T, int kVec>
void run_shape(Rng& rng, std::int64_t N, int H) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  SCOPED_TRACE(::testing::Message() << (kBf16 ? "BF16" : "F32") << " N=" << N << " H=" << H << " kVec=" << kVec);
  const DType dt = dtype_of<T>();
  const std::vector<T> gu = device_values<T>(rng.normal(N * 2 * H, 0.0f, 3.0f));
  const std::vector<T> dout = device_values<T>(rng.normal(N * H));
  std::vector<T> out_c(N * H), dgu_c(gu.size());
  std::vector<T> gu_c = gu, dout_c = dout;
  cpu::swiglu_forward(reference_ctx(), TensorView{out_c.data(), dt, Device::kCPU, Shape{N, H}},
                      TensorView{gu_c.data(), dt, Device::kCPU, Shape{N, 2 * H}});
  cpu::swiglu_backward(reference_ctx(), TensorView{dgu_c.data(), dt, Device::kCPU, Shape{N, 2 * H}},
                       TensorView{gu_c.data(), dt, Device::kCPU, Shape{N, 2 * H}},
                       TensorView{dout_c.data(), dt, Device::kCPU, Shape{N, H}});
  std::vector<T> out_g = device_values<T>(std::vector<float>(N * H, NAN)), dgu_g = gu;  // in place
  simt::launch(dim3(2), sw::kThreads, 0, sw::swiglu_forward_kernel<T, kVec>, out_g.data(), gu.data(), N, H);
  simt::launch(dim3(2), sw::kThreads, 0, sw::swiglu_backward_kernel<T, kVec>, dgu_g.data(), dgu_g.data(), dout.data(),
               N, H);
  EXPECT_TRUE(close_to_cpu(host_values(out_g), host_values(out_c), kBf16)) << "out";
  EXPECT_TRUE(close_to_cpu(host_values(dgu_g), host_values(dgu_c), kBf16)) << "dgate_up";
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(SwiGluEmulation, ForwardAndBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  run_shape<float, 1>(rng, 5, 37);
  run_shape<bf16_dev, 1>(rng, 5, 37);
  run_shape<float, 4>(rng, 33, 64);
  run_shape<bf16_dev, 8>(rng, 33, 64);
}

}  // namespace
}  // namespace zt::test
