// HF and llm.c exports: each tensor is read from the rank files' byte ranges that hold it,
// converted (and transposed for llm.c's [out, in] linear weights), written, and dropped.
#include "engine/app/checkpoint/checkpoint_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/io/llmc_model_file.h"
#include "engine/base/core/bf16.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

// Writes fp32 values as `dtype` at *offset (advanced), converting through a reused buffer.
void write_values(FileHandle& out, std::int64_t& offset, const std::vector<float>& values, DType dtype,
                  std::vector<bf16>& scratch) {
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  if (dtype == DType::kF32) {
    out.write_at(values.data(), n * 4, offset);
    offset += n * 4;
    return;
  }
  scratch.resize(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) scratch[i] = float_to_bf16(values[i]);
  out.write_at(scratch.data(), n * 2, offset);
  offset += n * 2;
}

// A tensor's master values, part after part (a tensor split by rows across units continues in its
// next part): its HF rows (true vocabulary: a prefix of each part's stored rows), or with
// `stored` every stored row, padding included.
void read_tensor(const CheckpointReader& reader, const TensorParts& t, bool stored, std::vector<float>& out) {
  const ParamTable& table = reader.manifest().table;
  out.clear();
  for (int index : t.parts) {
    const ParamSpec& p = table.param(index);
    std::int64_t n = 1;
    for (std::int64_t d : stored ? p.shape : p.hf_shape) n *= d;
    const std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(n));
    reader.read(StateKind::kMaster, p.unit, p.offset, p.offset + n, out.data() + at);
  }
}

void finish_file(FileHandle& out, const std::string& tmp, const std::string& path) {
  out.sync();
  out.close();
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw_runtime_error("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
}

}  // namespace

void export_hf(const CheckpointReader& reader, const std::string& out_dir, DType dtype) {
  ZT_CHECK(dtype == DType::kF32 || dtype == DType::kBF16);
  const ModelSpec spec = model_spec_of(reader);
  const ParamTable& table = reader.manifest().table;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw_input_error("cannot create export directory '{}': {}", out_dir, ec.message());

  const nlohmann::json& cfg_model = reader.manifest().config.value("model", nlohmann::json::object());
  const nlohmann::ordered_json hf = spec.family().hf_config(spec, cfg_model.value("dropout", 0.0), dtype);
  write_file_atomically((fs::path(out_dir) / "config.json").string(), hf.dump(2) + "\n");

  // The header is known before any data: shapes and dtypes come from the table.
  nlohmann::ordered_json header = {{"__metadata__", {{"format", "pt"}}}};
  std::int64_t data_bytes = 0;
  const std::vector<TensorParts> tensors = table.tensors();
  for (const TensorParts& t : tensors) {
    std::int64_t n = 1;
    for (std::int64_t d : t.hf_shape) n *= d;
    const std::int64_t bytes = n * static_cast<std::int64_t>(dtype_size_bytes(dtype));
    header[t.name] = {
        {"dtype", dtype_name(dtype)}, {"shape", t.hf_shape}, {"data_offsets", {data_bytes, data_bytes + bytes}}};
    data_bytes += bytes;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  const std::string path = (fs::path(out_dir) / "model.safetensors").string(), tmp = path + ".tmp";
  FileHandle out = FileHandle::create(tmp);
  const std::uint64_t header_len = text.size();
  out.write_at(&header_len, 8, 0);  // little-endian (x86-64, aarch64)
  out.write_at(text.data(), static_cast<std::int64_t>(text.size()), 8);
  std::int64_t offset = 8 + static_cast<std::int64_t>(text.size());
  std::vector<float> values;
  std::vector<bf16> scratch;
  for (const TensorParts& t : tensors) {
    read_tensor(reader, t, /*stored=*/false, values);
    write_values(out, offset, values, dtype, scratch);
  }
  finish_file(out, tmp, path);
}

void export_llmc(const CheckpointReader& reader, const std::string& out_path, DType dtype) {
  ZT_CHECK(dtype == DType::kF32 || dtype == DType::kBF16);
  const ModelSpec spec = model_spec_of(reader);
  if (!spec.family().llmc_format()) {
    throw_input_error(
        "{}: llm.c's model file holds GPT-2 models only; this checkpoint is a {} (export it with --format "
        "hf)",
        reader.dir(), spec.model.arch);
  }
  const ModelConfig& c = spec.model;
  const ParamTable& table = reader.manifest().table;
  const LlmcModelHeader h{c.block_size,
                          c.vocab_size,
                          c.n_layer,
                          c.n_head,
                          c.n_embd,
                          c.padded_vocab_size(),
                          dtype == DType::kF32 ? DType::kF32 : DType::kBF16};
  const std::vector<std::int32_t> header = llmc_header_words(h);
  const std::string tmp = out_path + ".tmp";
  FileHandle out = FileHandle::create(tmp);
  out.write_at(header.data(), static_cast<std::int64_t>(header.size() * sizeof(std::int32_t)), 0);
  std::int64_t offset = kLlmcModelHeaderBytes;
  std::vector<float> values, transposed;
  std::vector<bf16> scratch;
  // Stored tensors (padded vocabulary rows included: llm.c's wte is [Vp, C]), in llm.c's order;
  // a transposed one turns our Conv1D [in, out] weights into llm.c's nn.Linear [out, in].
  const std::vector<TensorParts> tensors = table.tensors();
  for (const LlmcTensor& t : llmc_model_tensors(h)) {
    const auto it =
        std::find_if(tensors.begin(), tensors.end(), [&](const TensorParts& p) { return p.name == t.name; });
    ZT_CHECK(it != tensors.end(), "no tensor named '{}'", t.name);
    read_tensor(reader, *it, /*stored=*/true, values);
    ZT_CHECK(static_cast<std::int64_t>(values.size()) == t.rows * t.cols, "{}: {} values for llm.c's {} x {}", t.name,
             values.size(), t.rows, t.cols);
    if (t.transposed) {  // ours [cols, rows] -> llm.c's [rows, cols]
      transposed.resize(values.size());
      for (std::int64_t i = 0; i < t.cols; ++i) {
        for (std::int64_t j = 0; j < t.rows; ++j) transposed[j * t.cols + i] = values[i * t.rows + j];
      }
      values.swap(transposed);
    }
    write_values(out, offset, values, dtype, scratch);
  }
  finish_file(out, tmp, out_path);
}

}  // namespace zt::ckpt
