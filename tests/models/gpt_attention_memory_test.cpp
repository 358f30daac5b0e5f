// GPT-2's attention in the memory prediction and the printouts: flash on CUDA where the kernels
// take the shape (no T x T probabilities kept), materialised otherwise, and why
// (models/gpt/activations.h). Moved from tests/sharding/memory_model_test.cpp unchanged.
#include <gtest/gtest.h>

#include <string>

#include "kernels/ops.h"
#include "models/gpt/activations.h"
#include "models/gpt/gpt_footprint.h"

namespace zt {
namespace {

const gpt::GptConfig kGpt2Small{12, 12, 768, 1024, 50257};

// On CUDA, attention is flash where the kernels allow (no T x T probabilities kept: the block's
// activations lose B NH (T^2 - T) elements), with or without dropout (fused into the kernels); on
// the CPU the probabilities are kept. A build without CUDA predicts a GPU run as a CUDA build does
// ([Note: a GPU run's routes in a build without CUDA]). The model sizes its buffers from the same
// activation_dims.
TEST(RankMemory, FlashAttentionOnCudaDropsTheProbabilitiesFromThePrediction) {
  const gpt::GptConfig& m = kGpt2Small;
  const std::int64_t B = 8, T = 1024, L = m.n_layer, NH = m.n_head;
  const std::int64_t cpu = gpt::predict_footprint(m, B, T, {}, DType::kBF16, Device::kCPU).activation_bytes;
  const std::int64_t cuda = gpt::predict_footprint(m, B, T, {}, DType::kBF16, Device::kCUDA).activation_bytes;
  EXPECT_FALSE(gpt::activation_dims(m, B, T, Device::kCPU).flash_attention);
  if (ops::flash_attention_available(Device::kCUDA, B, NH, m.n_embd / NH)) {
    EXPECT_TRUE(gpt::activation_dims(m, B, T, Device::kCUDA).flash_attention);
    // Without checkpointing every block's activations are alive at the peak.
    EXPECT_EQ(cpu - cuda, 4 * L * B * NH * (T * T - T));
  } else {
    ADD_FAILURE() << "the flash kernels take GPT-2 124M's shape in every build";
  }
}

// What the memory command and the train header say of attention: on CUDA, where the flash kernels
// cannot take the shapes, why not and what the probabilities cost, so a head size without a flash
// kernel is not a silent B NH T^2 elements a block.
TEST(RankMemory, AttentionDescriptionSaysWhyTheProbabilitiesAreKept) {
  gpt::GptConfig m = kGpt2Small;
  const std::int64_t B = 8, T = 1024;
  EXPECT_EQ(gpt::describe_attention(m, gpt::activation_dims(m, B, T, Device::kCPU), Device::kCPU),
            "materialised (T x T probabilities kept)");
  EXPECT_EQ(gpt::describe_attention(m, gpt::activation_dims(m, B, T, Device::kCUDA), Device::kCUDA),
            "flash kernels on CUDA cores (no T x T probabilities kept; not cuDNN: cuDNN's fused attention takes bf16 "
            "activations)");
  EXPECT_EQ(
      gpt::describe_attention(m, gpt::activation_dims(m, B, T, Device::kCUDA, DType::kBF16), Device::kCUDA,
                              AttentionKernels::kFlash),
      std::string("flash kernels on ") +
          (ops::flash_attention_on_tensor_cores(Device::kCUDA, DType::kBF16, 64) ? "tensor cores" : "CUDA cores") +
          " (no T x T probabilities kept; not cuDNN: precision.attention = \"flash\")");
  // bf16 under "auto": cuDNN where its library loads here, else the reason it does not.
  const std::string cudnn_missing =
      ops::cudnn_attention_refuses(Device::kCUDA, AttentionKernels::kAuto, DType::kBF16, 64, false);
  const std::string bf16 =
      gpt::describe_attention(m, gpt::activation_dims(m, B, T, Device::kCUDA, DType::kBF16), Device::kCUDA);
  if (cudnn_missing.empty()) {
    EXPECT_EQ(bf16, "cuDNN fused attention (no T x T probabilities kept)");
    EXPECT_NE(gpt::describe_attention(m, gpt::activation_dims(m, B, T, Device::kCUDA, DType::kBF16), Device::kCUDA,
                                      AttentionKernels::kAuto, /*dropout=*/true)
                  .find("cuDNN fused attention in evaluation, flash kernels on "),
              std::string::npos);
  } else {
    EXPECT_NE(bf16.find("not cuDNN: " + cudnn_missing), std::string::npos) << bf16;
  }
  m.n_head = 8;  // head size 96: 8 x 8 x 1024^2 bf16 probabilities = 128 MiB a block
  EXPECT_EQ(gpt::describe_attention(m, gpt::activation_dims(m, B, T, Device::kCUDA, DType::kBF16), Device::kCUDA),
            "materialised (T x T probabilities kept: the flash kernels have no head size 96 (8-128, powers of 2); "
            "128.00 MiB a block)");
  m.n_head = 12;
  const std::int64_t many = 65535 / 12 + 1;  // B * n_head = 65544
  EXPECT_EQ(gpt::describe_attention(m, gpt::activation_dims(m, many, 1, Device::kCUDA), Device::kCUDA),
            "materialised (T x T probabilities kept: micro_batch * n_head = 65544 exceeds the flash kernels' 65535; "
            "256.03 KiB a block)");
}

}  // namespace
}  // namespace zt
