// The precision section (see the header).
#include "engine/app/config/precision_section.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "engine/base/core/check.h"
#include "kernels/ops.h"

namespace zt {

void read_precision_section(ConfigReader precision, RunConfig& c) {
  // "f32" was this key's name for fp32 before every other dtype key said "fp32": both are read,
  // here and in every other dtype key (the flags' --dtype too), so neither spelling is refused.
  c.param_dtype =
      precision.get_enum("param_dtype", "f32", {"f32", "fp32", "bf16"}) == "bf16" ? DType::kBF16 : DType::kF32;
  const std::string matmul = precision.get_enum("matmul", "fp32", {"fp32", "f32", "tf32", "bf16"});
  for (MatmulPrecision p : {MatmulPrecision::kFp32, MatmulPrecision::kTf32, MatmulPrecision::kBf16}) {
    if (matmul_precision_name(p) == matmul) c.matmul_precision = p;  // get_enum admitted only these names
  }
  if (matmul == "f32") c.matmul_precision = MatmulPrecision::kFp32;
  if (c.matmul_precision != MatmulPrecision::kFp32 && c.device != Device::kCUDA) {
    throw_input_error(
        "config error in {}: precision.matmul = \"{}\" needs device = \"cuda\" (the CPU multiplies in fp32)",
        precision.sources_of({"precision.matmul", "device"}), matmul);
  }
  const bool matmul_given = precision.has("matmul");
  if (precision.get_enum("activations", "fp32", {"fp32", "f32", "bf16"}) == "bf16") {
    c.activation_dtype = DType::kBF16;
    // bf16 activations are multiplied as bf16 (weights rounded too) on either device.
    if (c.device == Device::kCUDA && matmul_given && c.matmul_precision != MatmulPrecision::kBf16) {
      throw_input_error(
          "config error in {}: precision.matmul = \"{}\" conflicts with precision.activations = \"bf16\" "
          "(bf16 activations are multiplied in bf16; drop precision.matmul or set it to \"bf16\")",
          precision.sources_of({"precision.matmul", "precision.activations"}), matmul);
    }
    if (c.device == Device::kCUDA && !matmul_given) {
      c.matmul_precision = MatmulPrecision::kBf16;
      c.derived.push_back("precision.matmul = bf16 (from precision.activations = bf16)");
    }
  }
  const std::string attention = precision.get_enum("attention", "auto", {"auto", "cudnn", "flash"});
  for (AttentionKernels a : {AttentionKernels::kAuto, AttentionKernels::kCudnn, AttentionKernels::kFlash}) {
    if (attention_kernels_name(a) == attention) c.attention_kernels = a;  // get_enum admitted only these names
  }
  if (c.attention_kernels != AttentionKernels::kAuto && c.device != Device::kCUDA) {
    throw_input_error(
        "config error in {}: precision.attention = \"{}\" needs device = \"cuda\" (the CPU has one "
        "attention)",
        precision.sources_of({"precision.attention", "device"}), attention);
  }
  if (c.attention_kernels == AttentionKernels::kCudnn && c.activation_dtype != DType::kBF16) {
    throw_input_error(
        "config error in {}: precision.attention = \"cudnn\" needs precision.activations = \"bf16\" "
        "(cuDNN's fused attention takes bf16)",
        precision.sources_of({"precision.attention", "precision.activations"}));
  }
  if (c.attention_kernels == AttentionKernels::kCudnn && c.dropout > 0.0f) {
    throw_input_error(
        "config error in {}: precision.attention = \"cudnn\" conflicts with model.dropout = {} (cuDNN "
        "would draw its own dropout masks; \"auto\" trains on the flash kernels and evaluates on cuDNN)",
        precision.sources_of({"precision.attention", "model.dropout"}), c.dropout);
  }
  // The models open the fused-attention path, where cuDNN runs, only where the flash kernels also
  // serve the shape (they are its fallback at run time): elsewhere the T x T probabilities are
  // materialised, so "cudnn", which insists, is refused rather than quietly not taken.
  if (c.attention_kernels == AttentionKernels::kCudnn && c.model.n_head > 0) {
    const std::int64_t head_size = c.model.n_embd / c.model.n_head;
    if (!ops::flash_attention_available(Device::kCUDA, c.train.micro_batch, c.model.n_head, head_size)) {
      const std::string why = ops::flash_attention_available(Device::kCUDA, 1, 1, head_size)
                                  ? fmt::format("micro_batch x n_head = {} passes their 65535",
                                                std::int64_t{c.train.micro_batch} * c.model.n_head)
                                  : fmt::format("they have no head size {} (8-128, powers of 2)", head_size);
      throw_input_error(
          "config error in {}: precision.attention = \"cudnn\" cannot be taken: cuDNN attention runs only where "
          "the flash kernels (its fallback) serve the shape, and {}; drop precision.attention (the T x T "
          "probabilities are then materialised)",
          precision.sources_of({"precision.attention", "model.n_embd", "model.n_head", "train.micro_batch"}), why);
    }
  }
  // On by default where it was measured faster (bf16 activations on CUDA: docs/performance.md);
  // fp32 activations keep the separate kernels, which track the CPU to ~1e-5.
  // (Only a family with a GELU MLP: a Llama's SwiGLU has none. Not under selective checkpointing.)
  const bool gelu_default = c.device == Device::kCUDA && c.activation_dtype == DType::kBF16 &&
                            model_family(c.model.arch).has_gelu_mlp() && !c.train.activation_checkpointing.selective();
  c.gelu_epilogue = precision.get_bool("gelu_epilogue", gelu_default);
  if (gelu_default && !precision.has("gelu_epilogue")) {
    c.derived.push_back("precision.gelu_epilogue = true (from precision.activations = bf16 on cuda)");
  }
  if (c.gelu_epilogue && c.device != Device::kCUDA) {
    throw_input_error(
        "config error in {}: precision.gelu_epilogue = true needs device = \"cuda\" (the CPU runs the "
        "GELU as its own kernel)",
        precision.sources_of({"precision.gelu_epilogue", "device"}));
  }
  precision.reject_unknown_keys();
}

nlohmann::json precision_section_json(const RunConfig& c) {
  return {{"param_dtype", c.param_dtype == DType::kBF16 ? "bf16" : "f32"},
          {"matmul", matmul_precision_name(c.matmul_precision)},
          {"activations", c.activation_dtype == DType::kBF16 ? "bf16" : "fp32"},
          {"attention", attention_kernels_name(c.attention_kernels)},
          {"gelu_epilogue", c.gelu_epilogue}};
}

}  // namespace zt
