// The flash attention launchers under the SIMT emulator ([Note: launcher emulation] in
// launcher_emulation.h) against the CPU's materialised attention: with F32 activations the
// CUDA-core kernels (forward and backward; dropout's masks the CPU's; grouped-query heads), with
// BF16 ones at a tensor-core head size the tensor-core forward (its P rounded to bf16 before P V,
// hence a looser bound), and a BF16 head size the tensor cores do not take (8) on the CUDA-core kernels.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/flash_attention.h"
#include "tests/emulation/launchers/launcher_operands.h"

namespace zt {
namespace {

using emulation::expect_close;
using emulation::Operand;
using Launchers = emulation::EmulatedLaunchers;

struct Heads {
  int n_head, n_kv_head, hs;
};

class FlashLaunchers : public Launchers {
 protected:
  // The launchers' forward (and, with `backward`, backward) against the CPU's on the same qkv.
  void compare(DType dtype, Heads h, const DropoutSpec& dropout, bool backward, double rel, double abs) {
    const std::int64_t B = 2, T = 21, W = static_cast<std::int64_t>(h.n_head + 2 * h.n_kv_head) * h.hs,
                       C = static_cast<std::int64_t>(h.n_head) * h.hs;
    Operand qkv = Operand::random(dtype, Shape{B, T, W}, rng_), dout = Operand::random(dtype, Shape{B, T, C}, rng_);
    Operand out(dtype, Shape{B, T, C}), lse(DType::kF32, Shape{B, h.n_head, T});
    Operand out_w(dtype, Shape{B, T, C}), att(dtype, Shape{B, h.n_head, T, T});
    cuda::flash_attention_forward(gpu_, out.gpu(), lse.gpu(), qkv.gpu(), h.n_head, dropout, h.n_kv_head);
    cpu::attention_forward(cpu_, out_w.cpu(), att.cpu(), qkv.cpu(), h.n_head, dropout, h.n_kv_head);
    expect_close(out, out_w, "out", rel, abs);
    if (!backward) return;
    Operand dqkv(dtype, Shape{B, T, W}), dqkv_w(dtype, Shape{B, T, W});  // zeros: the CPU's adds into it
    cuda::flash_attention_backward(gpu_, dqkv.gpu(), dout.gpu(), out.gpu(), qkv.gpu(), lse.gpu(), h.n_head, dropout,
                                   h.n_kv_head);
    cpu::attention_backward(cpu_, dqkv_w.cpu(), dout.cpu(), qkv.cpu(), att.cpu(), h.n_head, dropout, h.n_kv_head);
    expect_close(dqkv, dqkv_w, "dqkv", 10 * rel, 10 * abs);
  }
};

TEST_F(FlashLaunchers, CudaCoreKernelsMatchTheCpuWithAndWithoutDropout) {
  for (const Heads h : {Heads{2, 2, 16}, Heads{4, 2, 8}, Heads{2, 1, 32}}) {
    for (const float p : {0.0f, 0.25f}) {
      SCOPED_TRACE(::testing::Message() << h.n_head << " heads, " << h.n_kv_head << " key/value heads of " << h.hs
                                        << ", dropout " << p);
      compare(DType::kF32, h, DropoutSpec{p, 99, 1, 5}, /*backward=*/true, 1e-4, 1e-5);
    }
  }
}

TEST_F(FlashLaunchers, Bf16ForwardMatchesTheCpuOnAndOffTheTensorCores) {
  ASSERT_TRUE(cuda::flash_attention_tensor_cores(DType::kBF16, 32)) << "sm_90's shared memory takes head size 32";
  ASSERT_FALSE(cuda::flash_attention_tensor_cores(DType::kBF16, 8));
  for (const Heads h : {Heads{2, 2, 32}, Heads{4, 2, 32}, Heads{2, 1, 8}}) {
    SCOPED_TRACE(::testing::Message() << h.n_head << " heads, " << h.n_kv_head << " key/value heads of " << h.hs);
    // P rounded to bf16 before P V (the tensor-core kernels), and each side's output rounded.
    compare(DType::kBF16, h, DropoutSpec{}, /*backward=*/false, 1.0 / 64, 2e-2);
  }
}

}  // namespace
}  // namespace zt
