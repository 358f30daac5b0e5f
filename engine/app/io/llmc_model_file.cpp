// llm.c's model file layout (see the header).
#include "engine/app/io/llmc_model_file.h"

#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "engine/app/config/config_limits.h"
#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"

namespace zt {

std::vector<std::int32_t> llmc_header_words(const LlmcModelHeader& h) {
  std::vector<std::int32_t> w(256, 0);
  w[0] = kLlmcModelMagic;
  w[1] = h.dtype == DType::kBF16 ? 5 : 3;
  w[2] = h.max_t;
  w[3] = h.vocab;
  w[4] = h.n_layer;
  w[5] = h.n_head;
  w[6] = h.n_embd;
  w[7] = h.padded_vocab;
  return w;
}

LlmcModelHeader read_llmc_model_header(const std::string& path) {
  require_regular_file(path, "llm.c model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error("{}: cannot open llm.c model file", path);
  std::array<std::int32_t, 256> w{};
  in.read(reinterpret_cast<char*>(w.data()), sizeof(w));
  if (in.gcount() != static_cast<std::streamsize>(sizeof(w))) {
    throw_input_error("{}: shorter than llm.c's {}-byte model header", path, kLlmcModelHeaderBytes);
  }
  if (w[0] != kLlmcModelMagic) {
    throw_input_error("{}: bad magic {} for an llm.c model file (expected {})", path, w[0], kLlmcModelMagic);
  }
  if (w[1] != 3 && w[1] != 5) {
    throw_input_error("{}: llm.c model file version {} (3: fp32 and 5: bf16 are read)", path, w[1]);
  }
  LlmcModelHeader h{w[2], w[3], w[4], w[5], w[6], w[7], w[1] == 5 ? DType::kBF16 : DType::kF32};
  // Within the model keys' own ranges (docs/config.md), so that the sizes below cannot overflow and
  // nothing is built from a header before the file's size has matched it.
  if (h.max_t < 1 || h.max_t > kMaxConfigDim || h.vocab < 1 || h.vocab > kMaxConfigVocab || h.n_layer < 1 ||
      h.n_layer > kMaxConfigLayersOrHeads || h.n_head < 1 || h.n_head > kMaxConfigLayersOrHeads || h.n_embd < 1 ||
      h.n_embd > kMaxConfigDim || h.padded_vocab < h.vocab || h.padded_vocab > kMaxConfigVocab + 64 ||
      h.n_embd % h.n_head != 0) {
    throw_input_error("{}: llm.c header dimensions out of range (maxT {}, V {}, L {}, NH {}, C {}, Vp {})", path,
                      h.max_t, h.vocab, h.n_layer, h.n_head, h.n_embd, h.padded_vocab);
  }
  // llmc_model_tensors' elements: the token and position tables, each layer's 12 C^2 + 13 C, the
  // final LayerNorm's 2 C (at most about 2^54 within the ranges above).
  const std::int64_t C = h.n_embd;
  const std::int64_t elements =
      (std::int64_t{h.padded_vocab} + h.max_t) * C + std::int64_t{h.n_layer} * (12 * C * C + 13 * C) + 2 * C;
  const std::int64_t expected = kLlmcModelHeaderBytes + elements * static_cast<std::int64_t>(dtype_size_bytes(h.dtype));
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(path));
  if (size != expected) {
    throw_input_error("{}: file is {} bytes but its header's GPT-2 ({} layers, width {}, {}) needs {}", path, size,
                      h.n_layer, h.n_embd, h.dtype == DType::kBF16 ? "bf16" : "fp32", expected);
  }
  return h;
}

std::vector<LlmcTensor> llmc_model_tensors(const LlmcModelHeader& h) {
  const std::int64_t C = h.n_embd, L = h.n_layer;
  std::vector<LlmcTensor> out;
  std::int64_t offset = 0;
  auto add = [&](std::string name, std::int64_t rows, std::int64_t cols, bool transposed) {
    out.push_back({std::move(name), offset, rows, cols, transposed});
    offset += rows * cols;
  };
  add("transformer.wte.weight", h.padded_vocab, C, false);
  add("transformer.wpe.weight", h.max_t, C, false);
  // Each layer tensor stacked over the layers: (suffix, llm.c rows, cols, transposed).
  struct Stacked {
    const char* suffix;
    std::int64_t rows, cols;
    bool transposed;
  };
  const Stacked stacked[] = {{"ln_1.weight", 1, C, false},           {"ln_1.bias", 1, C, false},
                             {"attn.c_attn.weight", 3 * C, C, true}, {"attn.c_attn.bias", 1, 3 * C, false},
                             {"attn.c_proj.weight", C, C, true},     {"attn.c_proj.bias", 1, C, false},
                             {"ln_2.weight", 1, C, false},           {"ln_2.bias", 1, C, false},
                             {"mlp.c_fc.weight", 4 * C, C, true},    {"mlp.c_fc.bias", 1, 4 * C, false},
                             {"mlp.c_proj.weight", C, 4 * C, true},  {"mlp.c_proj.bias", 1, C, false}};
  for (const Stacked& s : stacked) {
    for (std::int64_t l = 0; l < L; ++l)
      add(fmt::format("transformer.h.{}.{}", l, s.suffix), s.rows, s.cols, s.transposed);
  }
  add("transformer.ln_f.weight", 1, C, false);
  add("transformer.ln_f.bias", 1, C, false);
  return out;
}

}  // namespace zt
