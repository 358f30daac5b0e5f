// CUDA SwiGLU against the CPU kernels (label gpu): forward and backward (in place over gate_up),
// fp32 at 1e-6 normwise (expf against std::exp), at offset 0 (16-byte groups where H allows) and
// one element off alignment (single elements).
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/swiglu.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaSwiGlu = GpuKernelTest;

TEST_F(CudaSwiGlu, ForwardAndBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, H] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {5, 37}, {64, 512}}) {
    for (std::int64_t off : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " H=" << H << " offset=" << off);
      std::vector<float> gu = rng.normal(N * 2 * H, 0.0f, 3.0f), g = rng.normal(N * H), out(N * H), dgu(gu.size());
      const Shape nh{N, H}, n2h{N, 2 * H};
      cpu::swiglu_forward(cpu_ctx(), view_of(out, nh), view_of(gu, n2h));
      cpu::swiglu_backward(cpu_ctx(), view_of(dgu, n2h), view_of(gu, n2h), view_of(g, nh));
      Buffer dgu_dev = upload_at(off, gu), dg = upload_at(off, g), o = poisoned(DType::kF32, off + N * H);
      cuda::swiglu_forward(gpu(), view_at(o, off, nh), view_at(dgu_dev, off, n2h));
      EXPECT_TRUE(close_normwise(download_from(o, off), to_double(out), 1e-6));
      cuda::swiglu_backward(gpu(), view_at(dgu_dev, off, n2h), view_at(dgu_dev, off, n2h), view_at(dg, off, nh));
      EXPECT_TRUE(close_normwise(download_from(dgu_dev, off), to_double(dgu), 1e-6));
    }
  }
}

}  // namespace
}  // namespace zt::test
