// llm.c's model file (train_gpt2.c's gpt2_124M.bin and its bf16 kind): a 256 x int32 header (magic
// 20240326, version 3 for fp32 or 5 for bf16 parameters, max T, vocabulary, layers, heads, width,
// padded vocabulary), then GPT-2's tensors in llm.c's order, each layer tensor stacked over the
// layers, linear weights as nn.Linear's [out, in] (Hugging Face's Conv1D holds [in, out]). The
// export (ckpt export --format llmc) writes it and train.init_from reads it, both from this layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/base/core/dtype.h"

namespace zt {

constexpr std::int32_t kLlmcModelMagic = 20240326;
constexpr std::int64_t kLlmcModelHeaderBytes = 256 * 4;

struct LlmcModelHeader {
  int max_t = 0, vocab = 0, n_layer = 0, n_head = 0, n_embd = 0, padded_vocab = 0;
  DType dtype = DType::kF32;  // version 3: F32, version 5: BF16
};

// The header's 256 words for `h`.
std::vector<std::int32_t> llmc_header_words(const LlmcModelHeader& h);
// Reads and checks a file's header and size; InputError naming the file and the fault.
LlmcModelHeader read_llmc_model_header(const std::string& path);

// One tensor of the file, by its Hugging Face name: its first element after the header, its shape
// as llm.c stores it (rows x cols; padded vocabulary rows included), and whether it is the
// transpose of Hugging Face's (the four linear weights of each layer).
struct LlmcTensor {
  std::string name;
  std::int64_t offset = 0;
  std::int64_t rows = 0, cols = 0;
  bool transposed = false;
};

// Every tensor in file order (wte, wpe, then each layer tensor for layers 0..L-1, then ln_f).
std::vector<LlmcTensor> llmc_model_tensors(const LlmcModelHeader& h);

}  // namespace zt
