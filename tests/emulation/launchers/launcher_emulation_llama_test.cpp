// More CUDA launchers under the SIMT emulator against the CPU kernels ([Note: launcher emulation]
// in launcher_emulation.h): the Llama family's SwiGLU and RoPE, AdamW (bit for bit, as the
// kernel-level test holds it), dropout's masks, the int8 blocks of the quantized collectives and the
// chunked cross-entropy, with F32 and BF16 operands, aligned and one element off.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/contracts/int8_blocks.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/chunked_cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/int8_blocks.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/chunked_cross_entropy.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/int8_blocks.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#include "tests/emulation/launchers/launcher_operands.h"

namespace zt {
namespace {

using emulation::expect_close;
using emulation::Operand;
using Launchers = emulation::EmulatedLaunchers;

TEST_F(Launchers, SwigluForwardAndBackwardMatchTheCpu) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const std::int64_t I : {64, 66}) {  // 66: rows no multiple of the vector
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << ", I " << I);
      const std::int64_t N = 13;
      Operand gate_up = Operand::random(dtype, Shape{N, 2 * I}, rng_), dout = Operand::random(dtype, Shape{N, I}, rng_);
      Operand out(dtype, Shape{N, I}), out_w(dtype, Shape{N, I});
      cuda::swiglu_forward(gpu_, out.gpu(), gate_up.gpu());
      cpu::swiglu_forward(cpu_, out_w.cpu(), gate_up.cpu());
      expect_close(out, out_w, "out");
      Operand d(dtype, Shape{N, 2 * I}), d_w(dtype, Shape{N, 2 * I});
      cuda::swiglu_backward(gpu_, d.gpu(), gate_up.gpu(), dout.gpu());
      cpu::swiglu_backward(cpu_, d_w.cpu(), gate_up.cpu(), dout.cpu());
      expect_close(d, d_w, "dgate_up");
    }
  }
}

// RoPE on the first 3 heads of rows of 5, from position 0 and from a later one, with and without
// llama3's scaled frequencies; then its backward.
TEST_F(Launchers, RopeMatchesTheCpu) {
  RopeFrequencies llama3;
  llama3.theta = 500000.0f;
  llama3.scaling = {RopeScalingType::kLlama3, 8.0f, 1.0f, 4.0f, 64.0f};
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const RopeFrequencies& freq : {RopeFrequencies{}, llama3}) {
      for (const std::int64_t first : {0, 37}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << ", scaling " << static_cast<int>(freq.scaling.type)
                                          << ", first position " << first);
        const int hs = 16;
        Operand x = Operand::random(dtype, Shape{2, 9, 5 * hs}, rng_), x_w = x.copy();
        cuda::rope_forward(gpu_, x.gpu(), 3, hs, freq, first);
        cpu::rope_forward(cpu_, x_w.cpu(), 3, hs, freq, first);
        expect_close(x, x_w, "rotated", dtype == DType::kF32 ? 1e-5 : -1.0, dtype == DType::kF32 ? 1e-5 : -1.0);
        if (first == 0) {
          cuda::rope_backward(gpu_, x.gpu(), 3, hs, freq);
          cpu::rope_backward(cpu_, x_w.cpu(), 3, hs, freq);
          expect_close(x, x_w, "rotated back");
        }
      }
    }
  }
}

// One AdamW step over slices decaying and not, aligned and one element off, with F32 and with BF16
// working copies (one call each: a call's slices share their types): the same bits as the CPU's
// (its every operation an explicitly rounded one).
TEST_F(Launchers, AdamwSlicesMatchTheCpuBitForBit) {
  for (const DType working : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(working));
    std::vector<Operand> params, grads, ms, vs, works, params_w, ms_w, vs_w, works_w;
    std::vector<AdamWSlice> gpu_slices, cpu_slices;
    for (const int offset : {0, 1, 2}) {
      const Shape s{517 + 8 * offset};
      params.push_back(Operand::random(DType::kF32, s, rng_, offset));
      grads.push_back(Operand::random(DType::kF32, s, rng_, offset));
      ms.push_back(Operand::random(DType::kF32, s, rng_, offset, 0.1f));
      vs.push_back(Operand::random(DType::kF32, s, rng_, offset, 0.1f));
      for (std::int64_t i = 0; i < s.numel(); ++i) vs.back().set(i, std::abs(vs.back().get(i)));
      works.push_back(Operand(working, s, offset));
      params_w.push_back(params.back().copy());
      ms_w.push_back(ms.back().copy());
      vs_w.push_back(vs.back().copy());
      works_w.push_back(Operand(working, s, offset));
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      gpu_slices.push_back({params[i].gpu(), grads[i].gpu(), ms[i].gpu(), vs[i].gpu(), works[i].gpu(), i % 2 == 0});
      cpu_slices.push_back(
          {params_w[i].cpu(), grads[i].cpu(), ms_w[i].cpu(), vs_w[i].cpu(), works_w[i].cpu(), i % 2 == 0});
    }
    const AdamWHyper hyper{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
    cuda::adamw_update_slices(gpu_, gpu_slices, hyper, 7, 0.5f);
    cpu::adamw_update_slices(cpu_, cpu_slices, hyper, 7, 0.5f);
    for (std::size_t i = 0; i < params.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "slice " << i);
      expect_close(params[i], params_w[i], "param", 0.0, 0.0);
      expect_close(ms[i], ms_w[i], "m", 0.0, 0.0);
      expect_close(vs[i], vs_w[i], "v", 0.0, 0.0);
      expect_close(works[i], works_w[i], "working copy", 0.0, 0.0);
    }
  }
}

// Dropout's masks are the CPU's (the same Philox draw per seed, site, sample and element): every
// element kept or dropped alike, forward and backward, from a sample index past 0.
TEST_F(Launchers, DropoutDropsWhatTheCpuDrops) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int offset : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << ", offset " << offset);
      const Shape s{3, 7, 40};
      const DropoutSpec spec{0.3f, 1337, 4, 11};
      Operand in = Operand::random(dtype, s, rng_, offset), out(dtype, s, offset), out_w(dtype, s, offset);
      cuda::dropout_forward(gpu_, out.gpu(), in.gpu(), spec);
      cpu::dropout_forward(cpu_, out_w.cpu(), in.cpu(), spec);
      expect_close(out, out_w, "out", 0.0, 0.0);
      Operand d(dtype, s, offset), d_w(dtype, s, offset);
      cuda::dropout_backward(gpu_, d.gpu(), in.gpu(), spec);
      cpu::dropout_backward(cpu_, d_w.cpu(), in.cpu(), spec);
      expect_close(d, d_w, "dinp", 0.0, 0.0);
    }
  }
}

// The quantized collectives' packed form: the same words as the CPU's, and the same values back
// (written, and with an F32 destination added into what is there).
TEST_F(Launchers, Int8BlocksPackAndUnpackAsTheCpu) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const std::int64_t n : {512, 1000}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << ", n " << n);
      const Shape words{int8_blocks::packed_words(n)};
      Operand src = Operand::random(dtype, Shape{n}, rng_), packed(DType::kI32, words), packed_w(DType::kI32, words);
      cuda::quantize_int8_blocks(gpu_, src.gpu(), packed.gpu());
      cpu::quantize_int8_blocks(cpu_, src.cpu(), packed_w.cpu());
      expect_close(packed, packed_w, "packed words", 0.0, 0.0);
      for (const bool accumulate : {false, true}) {
        if (accumulate && dtype == DType::kBF16) continue;  // BF16 destinations are written, not added into
        Operand dst = Operand::random(dtype, Shape{n}, rng_), dst_w = dst.copy();
        cuda::dequantize_int8_blocks(gpu_, packed.gpu(), dst.gpu(), accumulate);
        cpu::dequantize_int8_blocks(cpu_, packed_w.cpu(), dst_w.cpu(), accumulate);
        expect_close(dst, dst_w, accumulate ? "added back" : "written back", 0.0, 0.0);
      }
    }
  }
}

// The chunked cross-entropy over a padded vocabulary (97 live of 192 columns) in three chunks of
// 64 columns: each chunk's statistics carried, the losses, then each chunk's gradient.
TEST_F(Launchers, ChunkedCrossEntropyMatchesTheCpu) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::int64_t N = 9, Vc = 64;
    const int vocab = 97;
    Operand targets(DType::kI32, Shape{N});
    for (std::int64_t i = 0; i < N; ++i) targets.set(i, static_cast<float>((i * 41) % vocab));
    std::vector<Operand> chunks;
    for (int c = 0; c < 3; ++c) chunks.push_back(Operand::random(dtype, Shape{N, Vc}, rng_, 0, 3.0f));
    Operand mx(DType::kF32, Shape{N}), sum(DType::kF32, Shape{N}), tl(DType::kF32, Shape{N});
    Operand mx_w(DType::kF32, Shape{N}), sum_w(DType::kF32, Shape{N}), tl_w(DType::kF32, Shape{N});
    for (int c = 0; c < 3; ++c) {
      cuda::cross_entropy_chunk_stats(gpu_, mx.gpu(), sum.gpu(), tl.gpu(), chunks[c].gpu(), targets.gpu(), c * Vc,
                                      vocab, c == 0);
      cpu::cross_entropy_chunk_stats(cpu_, mx_w.cpu(), sum_w.cpu(), tl_w.cpu(), chunks[c].cpu(), targets.cpu(), c * Vc,
                                     vocab, c == 0);
    }
    Operand losses(DType::kF32, Shape{N}), lse(DType::kF32, Shape{N});
    Operand losses_w(DType::kF32, Shape{N}), lse_w(DType::kF32, Shape{N});
    cuda::cross_entropy_chunk_loss(gpu_, losses.gpu(), lse.gpu(), mx.gpu(), sum.gpu(), tl.gpu());
    cpu::cross_entropy_chunk_loss(cpu_, losses_w.cpu(), lse_w.cpu(), mx_w.cpu(), sum_w.cpu(), tl_w.cpu());
    expect_close(losses, losses_w, "losses", 1e-5, 1e-5);
    for (int c = 0; c < 3; ++c) {
      SCOPED_TRACE(::testing::Message() << "chunk " << c);
      Operand d(dtype, Shape{N, Vc}), d_w(dtype, Shape{N, Vc});
      cuda::cross_entropy_chunk_backward(gpu_, d.gpu(), chunks[c].gpu(), lse_w.gpu(), targets.gpu(), c * Vc, 1.0f / N,
                                         vocab);
      cpu::cross_entropy_chunk_backward(cpu_, d_w.cpu(), chunks[c].cpu(), lse_w.cpu(), targets.cpu(), c * Vc, 1.0f / N,
                                        vocab);
      expect_close(d, d_w, "dlogits");
    }
  }
}

}  // namespace
}  // namespace zt
