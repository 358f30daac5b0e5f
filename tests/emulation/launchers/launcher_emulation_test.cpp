// The CUDA launchers themselves under the SIMT emulator ([Note: launcher emulation] in
// launcher_emulation.h), each against the CPU kernel of the op on fresh random inputs: F32 and
// BF16 operands, views 16-byte aligned and one element off (the launchers' narrow paths), the norm
// backwards with each of their row kernels, and widths past a warp's batch of loads. Tolerances:
// 1e-5 relative (and absolute) with F32 operands, the GPU tests' 2^-7 of the value and 1e-3 with
// BF16 ones (a rounding on either side, the sums in another order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cast.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/rmsnorm.h"
#include "tests/emulation/launchers/launcher_operands.h"

namespace zt {
namespace {

using emulation::expect_close;
using emulation::Operand;
using Launchers = emulation::EmulatedLaunchers;

TEST_F(Launchers, GeluForwardAndBackwardMatchTheCpu) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int offset : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << ", offset " << offset);
      const Shape s{1031};
      Operand x = Operand::random(dtype, s, rng_, offset), dout = Operand::random(dtype, s, rng_, offset);
      Operand out(dtype, s, offset), want(dtype, s, offset), dinp(dtype, s, offset), want_d(dtype, s, offset);
      cuda::gelu_forward(gpu_, out.gpu(), x.gpu());
      cpu::gelu_forward(cpu_, want.cpu(), x.cpu());
      expect_close(out, want, "out");
      cuda::gelu_backward(gpu_, dinp.gpu(), x.gpu(), dout.gpu());
      cpu::gelu_backward(cpu_, want_d.cpu(), x.cpu(), dout.cpu());
      expect_close(dinp, want_d, "dinp");
    }
  }
}

TEST_F(Launchers, ResidualAndAccumulateMatchTheCpu) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int offset : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << ", offset " << offset);
      const Shape s{523};
      Operand a = Operand::random(dtype, s, rng_, offset), b = Operand::random(dtype, s, rng_, offset);
      Operand out(dtype, s, offset), want(dtype, s, offset);
      cuda::residual_forward(gpu_, out.gpu(), a.gpu(), b.gpu());
      cpu::residual_forward(cpu_, want.cpu(), a.cpu(), b.cpu());
      expect_close(out, want, "residual");
      Operand src = Operand::random(DType::kF32, s, rng_, offset);
      Operand dst = Operand::random(dtype, s, rng_, offset), dst_want = dst.copy();
      cuda::accumulate_into(gpu_, dst.gpu(), src.gpu());
      cpu::accumulate_into(cpu_, dst_want.cpu(), src.cpu());
      expect_close(dst, dst_want, "accumulate_into");
    }
  }
}

TEST_F(Launchers, CastsMatchTheCpu) {
  for (const int offset : {0, 1}) {
    const Shape s{777};
    Operand f = Operand::random(DType::kF32, s, rng_, offset);
    Operand h(DType::kBF16, s, offset), h_want(DType::kBF16, s, offset);
    cuda::cast(gpu_, h.gpu(), f.gpu());
    cpu::cast(cpu_, h_want.cpu(), f.cpu());
    expect_close(h, h_want, "to bf16");
    Operand back(DType::kF32, s, offset), back_want(DType::kF32, s, offset);
    cuda::cast(gpu_, back.gpu(), h.gpu());
    cpu::cast(cpu_, back_want.cpu(), h.cpu());
    expect_close(back, back_want, "to f32");
  }
}

// LayerNorm forward, with the residual add before it, and backward through each row kernel, at
// widths a warp's batch of loads holds whole (96) or not (1288), and one that is no multiple of
// the 16-byte vector (100: the narrow path).
TEST_F(Launchers, LayerNormMatchesTheCpuThroughEveryRowKernel) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const std::int64_t C : {96, 100, 1288}) {
      for (const auto rows : {cuda::NormBackwardRows::kBlock, cuda::NormBackwardRows::kWarp}) {
        SCOPED_TRACE(::testing::Message()
                     << dtype_name(dtype) << ", C " << C << ", rows kernel " << static_cast<int>(rows));
        const std::int64_t N = 37;
        const Shape x{N, C}, c{C}, n{N};
        Operand inp = Operand::random(dtype, x, rng_), w = Operand::random(dtype, c, rng_),
                b = Operand::random(dtype, c, rng_), dout = Operand::random(dtype, x, rng_);
        Operand out(dtype, x), mean(DType::kF32, n), rstd(DType::kF32, n);
        Operand out_w(dtype, x), mean_w(DType::kF32, n), rstd_w(DType::kF32, n);
        cuda::layernorm_forward(gpu_, out.gpu(), mean.gpu(), rstd.gpu(), inp.gpu(), w.gpu(), b.gpu());
        cpu::layernorm_forward(cpu_, out_w.cpu(), mean_w.cpu(), rstd_w.cpu(), inp.cpu(), w.cpu(), b.cpu());
        expect_close(out, out_w, "out");
        expect_close(rstd, rstd_w, "rstd");
        Operand dinp(dtype, x), dw(DType::kF32, c), db(DType::kF32, c);
        Operand dinp_w(dtype, x), dw_w(DType::kF32, c), db_w(DType::kF32, c);
        cuda::layernorm_backward(gpu_, dinp.gpu(), dw.gpu(), db.gpu(), dout.gpu(), inp.gpu(), w.gpu(), mean_w.gpu(),
                                 rstd_w.gpu(), rows);
        cpu::layernorm_backward(cpu_, dinp_w.cpu(), dw_w.cpu(), db_w.cpu(), dout.cpu(), inp.cpu(), w.cpu(),
                                mean_w.cpu(), rstd_w.cpu());
        expect_close(dinp, dinp_w, "dinp");
        expect_close(dw, dw_w, "dweight");
        expect_close(db, db_w, "dbias");
      }
    }
  }
}

TEST_F(Launchers, LayerNormAfterTheResidualMatchesTheCpu) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const std::int64_t C : {96, 100}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << ", C " << C);
      const std::int64_t N = 9;
      const Shape x{N, C}, c{C}, n{N};
      Operand a = Operand::random(dtype, x, rng_), bb = Operand::random(dtype, x, rng_);
      Operand w = Operand::random(dtype, c, rng_), b = Operand::random(dtype, c, rng_);
      Operand res(dtype, x), out(dtype, x), mean(DType::kF32, n), rstd(DType::kF32, n);
      Operand res_w(dtype, x), out_w(dtype, x), mean_w(DType::kF32, n), rstd_w(DType::kF32, n);
      cuda::layernorm_residual_forward(gpu_, res.gpu(), out.gpu(), mean.gpu(), rstd.gpu(), a.gpu(), bb.gpu(), w.gpu(),
                                       b.gpu());
      cpu::layernorm_residual_forward(cpu_, res_w.cpu(), out_w.cpu(), mean_w.cpu(), rstd_w.cpu(), a.cpu(), bb.cpu(),
                                      w.cpu(), b.cpu());
      expect_close(res, res_w, "residual");
      expect_close(out, out_w, "out");
    }
  }
}

TEST_F(Launchers, RmsNormMatchesTheCpuThroughEveryRowKernel) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const std::int64_t C : {64, 72, 2064}) {
      for (const auto rows : {cuda::NormBackwardRows::kBlock, cuda::NormBackwardRows::kWarp}) {
        SCOPED_TRACE(::testing::Message()
                     << dtype_name(dtype) << ", C " << C << ", rows kernel " << static_cast<int>(rows));
        const std::int64_t N = 35;
        const Shape x{N, C}, c{C}, n{N};
        Operand inp = Operand::random(dtype, x, rng_), w = Operand::random(dtype, c, rng_),
                dout = Operand::random(dtype, x, rng_);
        Operand out(dtype, x), rstd(DType::kF32, n), out_w(dtype, x), rstd_w(DType::kF32, n);
        cuda::rmsnorm_forward(gpu_, out.gpu(), rstd.gpu(), inp.gpu(), w.gpu(), 1e-5f);
        cpu::rmsnorm_forward(cpu_, out_w.cpu(), rstd_w.cpu(), inp.cpu(), w.cpu(), 1e-5f);
        expect_close(out, out_w, "out");
        Operand dinp(dtype, x), dw(DType::kF32, c), dinp_w(dtype, x), dw_w(DType::kF32, c);
        cuda::rmsnorm_backward(gpu_, dinp.gpu(), dw.gpu(), dout.gpu(), inp.gpu(), w.gpu(), rstd_w.gpu(), rows);
        cpu::rmsnorm_backward(cpu_, dinp_w.cpu(), dw_w.cpu(), dout.cpu(), inp.cpu(), w.cpu(), rstd_w.cpu());
        expect_close(dinp, dinp_w, "dinp");
        expect_close(dw, dw_w, "dweight");
      }
    }
  }
}

// The gradient norm's sums of squares: views of both dtypes, aligned and not (each pair a launch of
// its own), and an empty one, in one call. (Each view takes 1024 blocks: 2 s of emulation a view.)
TEST_F(Launchers, SumsOfSquaresOfManyViewsMatchTheCpu) {
  std::vector<Operand> views;
  for (const DType dtype : {DType::kF32, DType::kBF16})
    for (const int offset : {0, 3}) views.push_back(Operand::random(dtype, Shape{4099 + 17 * offset}, rng_, offset));
  views.push_back(Operand(DType::kF32, Shape{0}));
  std::vector<TensorView> gpu_views, cpu_views;
  for (Operand& v : views) {
    gpu_views.push_back(v.gpu());
    cpu_views.push_back(v.cpu());
  }
  const std::vector<double> got = cuda::sum_of_squares_each(gpu_, gpu_views);
  const std::vector<double> want = cpu::sum_of_squares_each(cpu_, cpu_views);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * want[i] + 1e-9) << "view " << i;
}

// The fused loss over a padded vocabulary (97 live of 128 columns), rows wide enough for the
// vector path and a width that is not (130).
TEST_F(Launchers, FusedCrossEntropyMatchesTheCpu) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const std::int64_t V : {128, 130}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << ", V " << V);
      const std::int64_t N = 11;
      const int vocab = 97;
      Operand logits = Operand::random(dtype, Shape{N, V}, rng_, 0, 3.0f), logits_cpu = logits.copy();
      Operand targets(DType::kI32, Shape{N});
      for (std::int64_t i = 0; i < N; ++i) targets.set(i, static_cast<float>((i * 37) % vocab));
      Operand losses(DType::kF32, Shape{N}), losses_w(DType::kF32, Shape{N});
      cuda::softmax_cross_entropy_fused(gpu_, losses.gpu(), logits.gpu(), logits.gpu(), targets.gpu(), 1.0f / N, vocab);
      cpu::softmax_cross_entropy_fused(cpu_, losses_w.cpu(), logits_cpu.cpu(), logits_cpu.cpu(), targets.cpu(),
                                       1.0f / N, vocab);
      expect_close(losses, losses_w, "losses");
      expect_close(logits, logits_cpu, "dlogits");
    }
  }
}

}  // namespace
}  // namespace zt
