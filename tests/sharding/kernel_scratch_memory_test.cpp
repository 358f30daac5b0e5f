// The CUDA kernels' scratch in the memory prediction ([Note: the kernels' scratch, predicted] in
// kernels/contracts/kernel_scratch.h): each call's bytes by shape, the largest call of a GPT-2 124M
// and a Llama 3.2 1B step under each precision, worked out here by hand, and the phases that hold
// it (a step, a forward-only model) and those that do not (set-up, the final gather). No GPU here:
// the kernels size their scratch by the same functions, which a GPU run's measured workspace checks
// (tests/gpu/gpu_model_test.py).
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/run_memory.h"
#include "kernels/contracts/kernel_scratch.h"
#include "kernels/exec_context.h"
#include "kernels/ops.h"
#include "models/model_family.h"

namespace zt {
namespace {

using C = MemCategory;
using kernel_scratch::Product;

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

TEST(KernelScratch, AProductHoldsItsBf16CopiesItsFp32ChunksAndItsBiasPartials) {
  // bf16 throughout: nothing to copy; the backward's bias partials, a row of OC floats per 128 rows.
  Product p{.rows = 16384, .in = 768, .out = 3072, .activations = DType::kBF16, .weight = DType::kBF16, .bias = true};
  EXPECT_EQ(product_forward_bytes(p), 0);
  EXPECT_EQ(product_backward_bytes(p), 4 * 128 * 3072);
  // fp32 weights under bf16 activations: the weight's bf16 copy, and the fp32 bias's results in
  // fp32 chunks of at most 32 MiB (with the GELU's input beside them: 1365 rows of 2 x 3072 floats).
  p.weight = DType::kF32;
  p.gelu = true;
  EXPECT_EQ(kernel_scratch::wide_result_chunk_rows(16384, 3072, true), 1365);
  EXPECT_EQ(product_forward_bytes(p), 2 * 768 * 3072 + 1365 * 3072 * 8);
  EXPECT_LE(1365 * 3072 * 8, 32 * kMiB);
  p.gelu = false;
  EXPECT_EQ(product_forward_bytes(p), 2 * 768 * 3072 + 2730 * 3072 * 4);
  // The weight's copy for dinp, then the bias partials for dweight (the input is bf16 already).
  EXPECT_EQ(product_backward_bytes(p), std::max<std::int64_t>(2 * 768 * 3072, 4 * 128 * 3072));
  // Few rows: one chunk of them all.
  p.rows = 10;
  EXPECT_EQ(kernel_scratch::wide_result_chunk_rows(10, 3072, false), 10);
  EXPECT_EQ(product_forward_bytes(p), 2 * 768 * 3072 + 10 * 3072 * 4);
  // fp32 activations with products in bf16: the input and dout are copied too.
  Product q{.rows = 100, .in = 8, .out = 16, .bf16_products = true};
  EXPECT_EQ(product_forward_bytes(q), 2 * 8 * 16 + 2 * 100 * 8);
  EXPECT_EQ(product_backward_bytes(q), 2 * 100 * 16 + std::max<std::int64_t>(2 * 8 * 16, 2 * 100 * 8));
  q.bias = q.bias_unaligned = true;  // the bias's aligned copy beside the rest
  EXPECT_EQ(product_forward_bytes(q), 4 * 16 + 2 * 8 * 16 + 2 * 100 * 8);
  EXPECT_EQ(product_backward_bytes(q), 2 * 100 * 16 + 2 * 100 * 8 + 4 * 1 * 16);
  q.bf16_products = false;  // fp32 products copy nothing
  EXPECT_EQ(product_forward_bytes(q), 4 * 16);
  EXPECT_EQ(product_backward_bytes(q), 4 * 16);
}

TEST(KernelScratch, NormsAttentionEmbeddingAndTheGradientNorm) {
  EXPECT_EQ(kernel_scratch::layernorm_backward_partial_floats(16384, 768), 512 * 2 * 768);
  EXPECT_EQ(kernel_scratch::layernorm_backward_partial_floats(33, 768), 2 * 2 * 768);
  EXPECT_EQ(kernel_scratch::rmsnorm_backward_partial_floats(33, 2048), 2 * 2048);
  EXPECT_EQ(kernel_scratch::flash_attention_backward_bytes(16, 12, 1024), 4 * 16 * 12 * 1024);
  // One sample's scores (fp32 for bf16 probabilities), its dropped probabilities; the backward's
  // fp32 dP and its bf16 rounding.
  EXPECT_EQ(kernel_scratch::attention_forward_bytes(2, 8, DType::kF32, false), 0);
  EXPECT_EQ(kernel_scratch::attention_forward_bytes(2, 8, DType::kBF16, true), 4 * 128 + 2 * 128);
  EXPECT_EQ(kernel_scratch::attention_backward_bytes(2, 8, DType::kF32, true), 4 * 128 + 4 * 128);
  EXPECT_EQ(kernel_scratch::attention_backward_bytes(2, 8, DType::kBF16, false), 4 * 128 + 2 * 128);
  EXPECT_EQ(kernel_scratch::embedding_backward_bytes(16384, 50304), 4 * (3 * 16384 + 50304));
  // A drawn token's cached attention: 12 heads' blocks split 1024 positions 16 ways (a split per 64
  // positions, under the 22 that would give 264 blocks); a prompt's many rows split nothing.
  EXPECT_EQ(kernel_scratch::cached_attention_splits(12, 1024), (std::pair<int, int>{16, 64}));
  EXPECT_EQ(kernel_scratch::cached_attention_splits(12, 4096), (std::pair<int, int>{22, 187}));
  EXPECT_EQ(kernel_scratch::cached_attention_bytes(1, 1, 12, 1024), 4 * 12 * 16 * 258);
  EXPECT_EQ(kernel_scratch::cached_attention_bytes(1, 64, 12, 1024), 0);
  EXPECT_EQ(kernel_scratch::sum_of_squares_floats(14), 2 * 14 * 1025);
  EXPECT_EQ(kernel_scratch::exact_sum_of_squares_floats(14), 2 * 21 * (256 + 14));
}

RunConfig gpt2_124m_cuda() {
  RunConfig c;
  c.model = ModelConfig{"gpt2", 12, 12, 768, 1024, 50257};
  c.train.micro_batch = 16;
  c.train.seq_len = 1024;
  c.device = Device::kCUDA;
  c.param_dtype = DType::kBF16;
  c.activation_dtype = DType::kBF16;
  c.matmul_precision = MatmulPrecision::kBf16;
  c.gelu_epilogue = true;
  return c;
}

// configs/gpt2_124m.json's step (B 16, T 1024) under three precisions; the largest call in each.
TEST(KernelScratch, Gpt2StepsLargestCallUnderEachPrecision) {
  RunConfig c = gpt2_124m_cuda();
  // bf16 throughout: a LayerNorm backward's partials (512 chunks of 2 x 768 floats) beat the MLP's
  // bias partials (1.5 MiB), the flash delta (0.75 MiB) and the embedding's sort.
  const StageMemory step = predict_run_memory(c, 0, 1);
  EXPECT_EQ(step.kernel_scratch_bytes, 512 * 2 * 768 * 4);
  // A sample's forwards copy nothing; a drawn token's attention over the 1024-token window holds 16
  // splits' partials.
  EXPECT_EQ(predict_sample_memory(c, step, 1).kernel_scratch_bytes, 4 * 12 * 16 * 258);
  // fp32 parameters under bf16 activations: the tied head's bf16 copy of the 50304 x 768 table.
  c.param_dtype = DType::kF32;
  EXPECT_EQ(predict_run_memory(c, 0, 1).kernel_scratch_bytes, 2 * 50304 * 768);
  // fp32 activations with bf16 products: the head's backward copies dlogits (16384 x 50304) beside
  // the table's copy.
  c.activation_dtype = DType::kF32;
  c.gelu_epilogue = false;
  EXPECT_EQ(predict_run_memory(c, 0, 1).kernel_scratch_bytes, std::int64_t{2} * 16384 * 50304 + 2 * 50304 * 768);
  // Chunked head (8 chunks of 6336 columns): a chunk's dlogits, and ln_f's output (larger than the
  // chunk's table rows).
  c.train.head_chunks = 8;
  EXPECT_EQ(predict_run_memory(c, 0, 1).kernel_scratch_bytes, std::int64_t{2} * 16384 * 6336 + 2 * 16384 * 768);
  // fp32 products copy nothing: the LayerNorm partials again.
  c.matmul_precision = MatmulPrecision::kFp32;
  EXPECT_EQ(predict_run_memory(c, 0, 1).kernel_scratch_bytes, 512 * 2 * 768 * 4);
}

TEST(KernelScratch, LlamaStepsLargestCall) {
  RunConfig c = gpt2_124m_cuda();  // its device and precisions
  c.gelu_epilogue = false;
  c.model = ModelConfig{"llama", 16, 32, 2048, 4096, 128256};
  c.model.family_keys = {{"n_kv_head", 8},
                         {"intermediate_size", 8192},
                         {"rope_theta", 500000.0},
                         {"norm_eps", 1e-5},
                         {"tie_embeddings", true}};
  c.train.micro_batch = 4;
  c.train.seq_len = 2048;
  // RMSNorm backward's partials (256 chunks of 2048 floats) beat the flash delta (1 MiB) and the
  // embedding's sort (0.6 MiB).
  EXPECT_EQ(predict_run_memory(c, 3, 1).kernel_scratch_bytes, 256 * 2048 * 4);
  // fp32 parameters: the head's copy of the 128256 x 2048 table.
  c.param_dtype = DType::kF32;
  EXPECT_EQ(predict_run_memory(c, 3, 1).kernel_scratch_bytes, 2 * 128256 * 2048);
}

// A bias is copied to an aligned buffer only where its offset in the unit is not a whole number of
// 16-byte groups: at n_embd 100 in bf16 (8 a group) the attention projection's (element 40,500)
// alone; c_attn's (30,200), c_fc's (80,800) and the MLP projection's (121,200) are read in place. A
// forward in bf16 throughout copies nothing else.
TEST(KernelScratch, OnlyAnUnalignedBiasIsCopied) {
  RunConfig c = gpt2_124m_cuda();
  c.model = ModelConfig{"gpt2", 2, 4, 100, 64, 1000};
  const ModelBuild forward = sampling_build(2, DType::kBF16);
  const bool flash = ops::flash_attention_available(Device::kCUDA, 1, 4, 25);
  const std::int64_t attention = flash ? 0 : kernel_scratch::attention_forward_bytes(4, 2, DType::kBF16, false);
  EXPECT_EQ(cuda_call_scratch_bytes(c.model_spec(), forward, DType::kBF16, c.kernel_choices()),
            std::max<std::int64_t>(2 * 100, attention));
  c.model.n_embd = 104;  // every offset whole groups
  EXPECT_EQ(cuda_call_scratch_bytes(c.model_spec(), forward, DType::kBF16, c.kernel_choices()), attention);
}

// The one measurement on a GPU: configs/shakespeare_char.json (its model and batch here) with bf16
// activations and products, dropout 0, the flash kernels, on an H100 at 2c310e6
// (docs/results/gpu_attention_training_h100.json, step1_workspace_bytes): 201,213,440 bytes of
// workspace after step 1, 34,732,032 above what was then predicted. That is c_fc's forward: the
// bf16 copy of its fp32 384 x 1536 weight and 5461 rows of its fp32 results (the GELU then a
// separate kernel), the largest call of the step.
TEST(KernelScratch, PredictsTheWorkspaceAnH100MeasuredToTheByte) {
  RunConfig c = gpt2_124m_cuda();
  c.model = ModelConfig{"gpt2", 6, 6, 384, 256, 65};
  c.train.micro_batch = 64;
  c.train.seq_len = 256;
  c.param_dtype = DType::kF32;
  c.gelu_epilogue = false;
  c.attention_kernels = AttentionKernels::kFlash;
  const StageMemory step = predict_run_memory(c, 0, 1);
  EXPECT_EQ(step.kernel_scratch_bytes, 2 * 384 * 1536 + 5461 * 1536 * 4);
  EXPECT_EQ(step.kernel_scratch_bytes, 34732032);
  EXPECT_EQ(step[C::kWorkspace], 201213440);
}

// A step holds the scratch in workspace; set-up and the final gather, which run no such kernel, do
// not; a forward-only model holds its own forwards' largest call instead of the step's.
TEST(KernelScratch, OnlyThePhasesThatRunTheKernelsHoldIt) {
  RunConfig cuda = gpt2_124m_cuda();
  cuda.model = ModelConfig{"gpt2", 2, 2, 64, 64, 1000};
  cuda.train.micro_batch = 4;
  cuda.train.seq_len = 64;
  cuda.param_dtype = DType::kF32;  // the head's bf16 copy: 1024 x 64 in the forward too
  RunConfig cpu = cuda;
  cpu.device = Device::kCPU;
  cpu.gelu_epilogue = false;
  const StageMemory step = predict_run_memory(cuda, 0, 1), cpu_step = predict_run_memory(cpu, 0, 1);
  ASSERT_GT(step.kernel_scratch_bytes, 0);
  EXPECT_EQ(cpu_step.kernel_scratch_bytes, 0);
  EXPECT_EQ(step[C::kWorkspace] - cpu_step[C::kWorkspace], kCublasWorkspaceBytes + step.kernel_scratch_bytes);
  EXPECT_EQ(predict_setup_memory(cuda, step)[C::kWorkspace] - predict_setup_memory(cpu, cpu_step)[C::kWorkspace],
            kCublasWorkspaceBytes);
  EXPECT_EQ(predict_final_gather_memory(cuda, step, 1)[C::kWorkspace] -
                predict_final_gather_memory(cpu, cpu_step, 1)[C::kWorkspace],
            kCublasWorkspaceBytes);
  const ModelBuild sampling = sampling_build(64, DType::kBF16);
  const std::int64_t forward = cuda_call_scratch_bytes(cuda.model_spec(), sampling, DType::kF32, cuda.kernel_choices());
  EXPECT_EQ(forward, 2 * 64 * 256 + 8 * 64 * 256) << "c_fc's bf16 weight, its fp32 results and the GELU's input";
  EXPECT_EQ(
      predict_sample_memory(cuda, step, 1)[C::kWorkspace] - predict_sample_memory(cpu, cpu_step, 1)[C::kWorkspace],
      kCublasWorkspaceBytes + forward);
}

}  // namespace
}  // namespace zt
