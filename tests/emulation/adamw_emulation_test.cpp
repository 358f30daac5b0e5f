// The CUDA multi-tensor AdamW kernel (kernels/cuda/adamw_kernels.cuh) run on the CPU under the SIMT
// emulator ([Note: SIMT emulation] in simt_runtime.h) against cpu::adamw_update_slices: bitwise
// equal parameters, moments and working copies, as the kernel's header promises (every operation
// an explicitly rounded one). Slices of several chunks with a tail, a short one, and one whose
// operands are misaligned (the element path); decaying and not; F32 and BF16 gradients; no, F32
// and BF16 working copies. The slice table is laid out here as adamw.cu lays it out.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cuda/adamw_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace aw = cuda::detail::adamw;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

// One slice's operands; `offset` leading elements shift every operand off 16-byte alignment.
struct SliceData {
  std::int64_t n, offset;
  bool decays;
  std::vector<float> param, m, v, grad_f32, working_f32;
  std::vector<std::uint16_t> grad_bf16, working_bf16;
};

SliceData make_slice(Rng& rng, std::int64_t n, std::int64_t offset, bool decays) {
  SliceData s{n, offset, decays, {}, {}, {}, {}, {}, {}, {}};
  const std::int64_t len = n + offset;
  s.param = rng.normal(len);
  s.m = rng.normal(len, 0.0f, 0.1f);
  s.v = rng.uniform(len, 0.0f, 0.01f);
  s.grad_f32 = rng.normal(len);
  s.working_f32.assign(static_cast<std::size_t>(len), NAN);
  for (float g : s.grad_f32) s.grad_bf16.push_back(float_to_bf16(g).bits);
  s.working_bf16.assign(static_cast<std::size_t>(len), 0xFFFF);
  return s;
}

template <typename G, typename W>
void run_case(Rng& rng) {
  constexpr bool kBf16Grad = std::is_same_v<G, std::uint16_t>;
  constexpr bool kNoWorking = std::is_same_v<W, aw::NoWorkingCopy>, kBf16Working = std::is_same_v<W, std::uint16_t>;
  SCOPED_TRACE(::testing::Message() << "grad " << (kBf16Grad ? "BF16" : "F32") << ", working "
                                    << (kNoWorking     ? "none"
                                        : kBf16Working ? "BF16"
                                                       : "F32"));
  const AdamWHyper hyper{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
  const int step = 7;
  const float grad_scale = 0.75f;
  std::vector<SliceData> cpu_side = {make_slice(rng, 2 * aw::kChunk + 1003, 0, true), make_slice(rng, 7, 0, false),
                                     make_slice(rng, aw::kChunk + 5, 1, true)};
  std::vector<SliceData> gpu_side = cpu_side;

  std::vector<AdamWSlice> slices;
  for (SliceData& s : cpu_side) {
    const Shape n{s.n};
    auto at = [&](std::vector<float>& x) { return TensorView{x.data() + s.offset, DType::kF32, Device::kCPU, n}; };
    const TensorView grad =
        kBf16Grad ? TensorView{s.grad_bf16.data() + s.offset, DType::kBF16, Device::kCPU, n} : at(s.grad_f32);
    const TensorView working = kNoWorking ? TensorView{}
                               : kBf16Working
                                   ? TensorView{s.working_bf16.data() + s.offset, DType::kBF16, Device::kCPU, n}
                                   : at(s.working_f32);
    slices.push_back(AdamWSlice{at(s.param), grad, at(s.m), at(s.v), working, s.decays});
  }
  cpu::adamw_update_slices(reference_ctx(), slices, hyper, step, grad_scale);

  aw::SliceTable table{};
  std::int64_t blocks = 0;
  for (SliceData& s : gpu_side) {
    void* grad = kBf16Grad ? static_cast<void*>(s.grad_bf16.data() + s.offset)
                           : static_cast<void*>(s.grad_f32.data() + s.offset);
    void* working = kNoWorking     ? nullptr
                    : kBf16Working ? static_cast<void*>(s.working_bf16.data() + s.offset)
                                   : static_cast<void*>(s.working_f32.data() + s.offset);
    table.slice[table.count] = aw::SliceDesc{
        s.param.data() + s.offset, grad, s.m.data() + s.offset, s.v.data() + s.offset, working, s.n, s.decays ? 1 : 0,
        s.offset == 0 ? 1 : 0};
    table.first_block[table.count] = blocks;
    blocks += (s.n + aw::kChunk - 1) / aw::kChunk;
    ++table.count;
  }
  AdamWHyper plain = hyper;
  plain.weight_decay = 0.0f;
  simt::launch(dim3(static_cast<unsigned>(blocks)), aw::kThreads, 0, aw::adamw_slices_kernel<G, W>, table,
               adamw_coeffs(hyper, step), adamw_coeffs(plain, step), grad_scale);

  for (std::size_t i = 0; i < cpu_side.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "slice " << i);
    EXPECT_TRUE(bitwise_equal(gpu_side[i].param, cpu_side[i].param)) << "param";
    EXPECT_TRUE(bitwise_equal(gpu_side[i].m, cpu_side[i].m)) << "m";
    EXPECT_TRUE(bitwise_equal(gpu_side[i].v, cpu_side[i].v)) << "v";
    if (kBf16Working) {
      EXPECT_EQ(gpu_side[i].working_bf16, cpu_side[i].working_bf16) << "working (bf16)";
    } else if (!kNoWorking) {
      EXPECT_TRUE(bitwise_equal(gpu_side[i].working_f32, cpu_side[i].working_f32)) << "working (f32)";
    }
  }
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(AdamWEmulation, SlicesMatchTheCpuBitwise) {
  ZT_SEEDED_RNG(rng);
  run_case<float, aw::NoWorkingCopy>(rng);
  run_case<float, float>(rng);
  run_case<float, std::uint16_t>(rng);
  run_case<std::uint16_t, aw::NoWorkingCopy>(rng);
  run_case<std::uint16_t, float>(rng);
  run_case<std::uint16_t, std::uint16_t>(rng);
}

}  // namespace
}  // namespace zt::test
