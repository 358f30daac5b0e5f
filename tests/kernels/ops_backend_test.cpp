// kernels/ops over the OpsBackend interface (kernels/contracts/ops_backend.h): a CPU context runs
// the CPU backend, which has none of the optional fused kernels, so the fused ops run (and are
// profiled as) their separate ops with the same bits; a build without CUDA refuses a CUDA context
// with one InternalError and answers the capability queries for CUDA with "no".
#include "kernels/contracts/ops_backend.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/base/core/check.h"
#include "kernel_test_util.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/op_profiler.h"
#include "kernels/ops.h"

namespace zt {
namespace {

using test::cpu_ctx;
using test::view_of;

TEST(OpsBackend, TheCpuBackendHasNoFusedKernelsAndSaysSo) {
  const OpsBackend& cpu = cpu::ops_backend();
  const ExecContext ctx = cpu_ctx();
  EXPECT_STREQ(cpu.name(), "cpu");
  std::vector<float> qkv(2 * 4 * 3 * 8, 0.1f), out(2 * 4 * 8), lse(2 * 2 * 4);
  const TensorView vqkv = view_of(qkv, Shape{2, 4, 24}), vout = view_of(out, Shape{2, 4, 8}),
                   vlse = view_of(lse, Shape{2, 2, 4});
  EXPECT_FALSE(cpu.fuses_gelu_into_matmul(ctx, vout));
  EXPECT_FALSE(cpu.flash_attention_supports(2, 2, 4));
  EXPECT_EQ(cpu.fused_attention_path(ctx, vqkv, 2, 0, {}, {}), FusedAttentionPath::kNone);
  EXPECT_THROW(cpu.flash_attention_forward(ctx, vout, vlse, vqkv, 2, {}, 0), InternalError);
  EXPECT_THROW(ops::flash_attention_forward(ctx, vout, vlse, vqkv, 2, {}), InternalError);
  EXPECT_FALSE(ops::flash_attention_available(Device::kCPU, 2, 2, 4));
  EXPECT_EQ(ops::cudnn_attention_refuses(Device::kCPU, AttentionKernels::kAuto, DType::kBF16, 64, false),
            "the CPU has no cuDNN");
  EXPECT_TRUE(ops::adds_param_grads_into(ctx, DType::kF32, DType::kBF16));
  EXPECT_FALSE(ops::adds_param_grads_into(ctx, DType::kBF16, DType::kBF16));
}

// Where the backend does not fuse GELU into the product, matmul_gelu_forward is matmul_forward then
// gelu_forward: the same bits, and the profile names the two ops, not a fused one.
TEST(OpsBackend, UnfusedMatmulGeluRunsAndProfilesTheSeparateOps) {
  test::Rng rng(test::test_seed());
  const std::int64_t N = 6, C = 5, OC = 16;
  std::vector<float> inp = rng.uniform(N * C), w = rng.uniform(C * OC), bias = rng.uniform(OC);
  std::vector<float> out(N * OC), pre(N * OC), ref_out(N * OC), ref_pre(N * OC);
  ExecContext ctx = cpu_ctx();
  OpProfiler profiler;
  ctx.profiler = &profiler;
  profiler.begin_step(ctx);
  ops::matmul_gelu_forward(ctx, view_of(out, Shape{N, OC}), view_of(pre, Shape{N, OC}), view_of(inp, Shape{N, C}),
                           view_of(w, Shape{C, OC}), WeightLayout::kInOut, view_of(bias));
  profiler.end_step(ctx);
  ctx.profiler = nullptr;
  ops::matmul_forward(ctx, view_of(ref_pre, Shape{N, OC}), view_of(inp, Shape{N, C}), view_of(w, Shape{C, OC}),
                      WeightLayout::kInOut, view_of(bias));
  ops::gelu_forward(ctx, view_of(ref_out, Shape{N, OC}), view_of(ref_pre, Shape{N, OC}));
  EXPECT_EQ(pre, ref_pre);
  EXPECT_EQ(out, ref_out);
  std::map<std::string, std::int64_t> calls;
  for (const OpProfiler::OpTotal& t : profiler.by_time()) calls[t.op] = t.calls;
  const std::map<std::string, std::int64_t> expected{{"matmul_forward", 1}, {"gelu_forward", 1}};
  EXPECT_EQ(calls, expected);
}

// A build without CUDA registers no CUDA backend: every op on a CUDA context is one InternalError,
// its decoding query says no, and its route queries answer by the contracts' rules.
TEST(OpsBackend, ABuildWithoutCudaRefusesACudaContext) {
  if (ops::cuda_kernels_built()) GTEST_SKIP() << "this build has the CUDA backend";
  ExecContext ctx;
  ctx.device = Device::kCUDA;
  std::vector<float> a(8, 1.0f), b(8);
  try {
    ops::gelu_forward(ctx, view_of(b), view_of(a));
    FAIL() << "a CUDA op ran in a build without CUDA";
  } catch (const InternalError& e) {
    EXPECT_STREQ(e.what(), "a CUDA kernel was requested, but this build has no CUDA backend");
  }
  EXPECT_THROW(ops::synchronize(ctx), InternalError);
  // The routes a GPU run would take, which `zerotrain memory` predicts on any machine, come from the
  // contracts' rules ([Note: a GPU run's routes in a build without CUDA]): as a CUDA build's.
  EXPECT_TRUE(ops::flash_attention_available(Device::kCUDA, 1, 1, 64));
  EXPECT_FALSE(ops::flash_attention_available(Device::kCUDA, 1, 1, 96));
  EXPECT_TRUE(ops::flash_attention_on_tensor_cores(Device::kCUDA, DType::kBF16, 64));
  EXPECT_EQ(ops::cudnn_attention_refuses(Device::kCUDA, AttentionKernels::kAuto, DType::kBF16, 64, false), "");
  EXPECT_EQ(ops::cudnn_attention_refuses(Device::kCUDA, AttentionKernels::kAuto, DType::kF32, 64, false),
            "cuDNN's fused attention takes bf16 activations");
  EXPECT_EQ(ops::cudnn_attention_refuses(Device::kCUDA, AttentionKernels::kFlash, DType::kBF16, 64, false),
            "precision.attention = \"flash\"");
  EXPECT_FALSE(ops::cached_attention_available(Device::kCUDA, 64));
}

// Decoding's attention: the CPU's takes any head size, CUDA's (where built; a pure query, no
// device needed) up to 256, so a model with wider heads samples over the window there.
TEST(OpsBackend, CachedAttentionSaysWhichHeadSizesItTakes) {
  EXPECT_TRUE(ops::cached_attention_available(Device::kCPU, 4096));
  if (!ops::cuda_kernels_built()) GTEST_SKIP() << "this build has no CUDA backend";
  EXPECT_TRUE(ops::cached_attention_available(Device::kCUDA, 256));
  EXPECT_FALSE(ops::cached_attention_available(Device::kCUDA, 512));
}

}  // namespace
}  // namespace zt
