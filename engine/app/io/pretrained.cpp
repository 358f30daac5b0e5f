// Pretrained checkpoints read in ranges (see the header): Hugging Face safetensors folders, one
// file or sharded with an index, and llm.c model files.
#include "engine/app/io/pretrained.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "engine/app/io/input_file.h"
#include "engine/app/io/json_file.h"
#include "engine/app/io/llmc_model_file.h"
#include "engine/app/io/safetensors.h"
#include "engine/base/core/bf16.h"
#include "engine/base/core/check.h"
#include "engine/base/core/half.h"

namespace zt {

namespace {

namespace fs = std::filesystem;

// A read-only file read at offsets; errors name it.
class RawFile {
 public:
  explicit RawFile(std::string path) : path_(std::move(path)) {
    require_regular_file(path_, "weights file");  // a FIFO would block the open
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_input_error("{}: cannot open: {}", path_, std::strerror(errno));
  }
  RawFile(RawFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}
  RawFile(const RawFile&) = delete;
  ~RawFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void read_at(void* out, std::int64_t bytes, std::int64_t offset) const {
    auto* p = static_cast<char*>(out);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, static_cast<std::size_t>(bytes), offset);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw_input_error("{}: cannot read {} bytes at {} (truncated?)", path_, bytes, offset);
      p += n;
      bytes -= n;
      offset += n;
    }
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Converts `n` stored elements of `dtype` ("F32", "BF16", "F16") to fp32.
void to_f32(const std::string& dtype, const char* raw, std::int64_t n, float* out) {
  if (dtype == "F32") {
    std::memcpy(out, raw, static_cast<std::size_t>(n) * 4);
  } else if (dtype == "BF16") {
    for (std::int64_t i = 0; i < n; ++i) {
      bf16 h;
      std::memcpy(&h.bits, raw + 2 * i, 2);
      out[i] = bf16_to_float(h);
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint16_t h = 0;
      std::memcpy(&h, raw + 2 * i, 2);
      out[i] = half_to_float(h);
    }
  }
}

int dtype_bytes(const std::string& dtype) { return dtype == "F32" ? 4 : 2; }

// The names a tensor may have in a Hugging Face file: the model's own, or the base model's (hub
// files of GPT-2 drop "transformer.").
std::vector<std::string> candidate_names(const std::string& name) {
  std::vector<std::string> out{name};
  if (name.rfind("transformer.", 0) == 0) out.push_back(name.substr(12));
  return out;
}

// Buffers Hugging Face saves beside the weights, which carry no parameter.
bool is_ignored_buffer(const std::string& name) {
  auto ends_with = [&](const char* s) {
    const std::size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  return ends_with("attn.bias") || ends_with("attn.masked_bias") || ends_with("rotary_emb.inv_freq");
}

class HfReader final : public PretrainedReader {
 public:
  HfReader(const std::string& dir, const ParamTable& table) {
    const fs::path single = fs::path(dir) / "model.safetensors", index = fs::path(dir) / "model.safetensors.index.json";
    std::vector<std::string> files;
    // model.safetensors first, as from_pretrained takes it: save_pretrained writing a folder whole
    // over a sharded save removes the shards but not their index.
    if (fs::exists(single)) {
      files.push_back("model.safetensors");
    } else if (fs::exists(index)) {
      const nlohmann::json j = read_json_file(index.string());
      if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
        throw_input_error("{}: no \"weight_map\" object", index.string());
      }
      // Each value a shard's file name in this folder: a path elsewhere ("../", absolute) would read
      // another folder's file as this model's.
      std::set<std::string> names;
      for (const auto& [tensor, file] : j["weight_map"].items()) {
        if (!file.is_string() || file.get<std::string>().empty() ||
            fs::path(file.get<std::string>()).filename() != fs::path(file.get<std::string>()) ||
            file.get<std::string>() == "." || file.get<std::string>() == "..") {
          throw_input_error("{}: weight_map's \"{}\" is {}, not the name of a file in the folder", index.string(),
                            tensor, file.dump());
        }
        names.insert(file.get<std::string>());
      }
      files.assign(names.begin(), names.end());
    } else {
      const bool torch_file = fs::exists(fs::path(dir) / "pytorch_model.bin");
      throw_input_error("{}: no model.safetensors nor model.safetensors.index.json{}", dir,
                        torch_file ? " (only pytorch_model.bin, which is not read: save the model with "
                                     "safe_serialization=True, or convert it with transformers)"
                                   : "");
    }
    for (const std::string& f : files) add_file((fs::path(dir) / f).string());
    check_against(table, dir);
  }

  void read(const std::string& name, std::int64_t begin, std::int64_t end, float* out) override {
    const Entry& e = entries_.at(resolved_.at(name));
    read_entry(e, begin, end, out);
    bytes_read_ += (end - begin) * dtype_bytes(e.dtype);
  }

 private:
  struct Entry {
    int file = 0;
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::int64_t data_offset = 0;  // bytes from the file's start
  };

  void add_file(const std::string& path) {
    const SafetensorsHeader header = read_safetensors_header(path);
    for (const auto& [name, v] : header.json.items()) {
      if (name == "__metadata__") continue;
      Entry e;
      e.file = static_cast<int>(files_.size());
      e.dtype = v.is_object() && v.contains("dtype") && v["dtype"].is_string() ? v["dtype"].get<std::string>() : "";
      if (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16") {
        throw_input_error("{}: tensor '{}' is {} (F32, BF16 and F16 are read)", path, name,
                          e.dtype.empty() ? "of no dtype" : e.dtype);
      }
      SafetensorsSpan span = safetensors_span(v, dtype_bytes(e.dtype), header, path, name);
      e.shape = std::move(span.shape);
      e.data_offset = header.data_start + span.begin;
      if (const auto [at, added] = entries_.emplace(name, e); !added) {
        // Within one file (a header with the name twice), or in two of a sharded model's files.
        const std::string& first =
            at->second.file < e.file ? files_[static_cast<std::size_t>(at->second.file)].path() : path;
        if (first == path) throw_input_error("{}: tensor '{}' appears twice", path, name);
        throw_input_error("tensor '{}' is in both {} and {}: which one the model is cannot be told", name, first, path);
      }
    }
    files_.emplace_back(path);
  }

  void check_against(const ParamTable& table, const std::string& dir) {
    std::set<std::string> used;
    for (const TensorParts& t : table.tensors()) {
      std::string found;
      for (const std::string& n : candidate_names(t.name)) {
        if (entries_.count(n) != 0) {
          found = n;
          break;
        }
      }
      if (found.empty())
        throw_input_error("{}: no tensor '{}' (the model its config.json describes has one)", dir, t.name);
      if (entries_.at(found).shape != t.hf_shape) {
        throw_input_error("{}: tensor '{}' is {} but the model needs {}", dir, found,
                          fmt::format("{}", fmt::join(entries_.at(found).shape, "x")),
                          fmt::format("{}", fmt::join(t.hf_shape, "x")));
      }
      resolved_[t.name] = found;
      used.insert(found);
    }
    for (const auto& [name, e] : entries_) {
      if (used.count(name) == 0 && !is_ignored_buffer(name) && !is_tied_head_copy(name, e, dir)) {
        throw_input_error("{}: tensor '{}' is not a parameter of the model its config.json describes", dir, name);
      }
    }
  }

  // A tied model saved with its head too (a plain state_dict holds lm_head.weight beside the token
  // table it equals): transformers ties it back and ignores the copy, and so does this reader. A
  // head that differs from the table is no copy: transformers 4.40 loads it into the shared
  // tensor, this reader would keep the table, and the two would compute other models: refused.
  bool is_tied_head_copy(const std::string& name, const Entry& e, const std::string& dir) {
    if (!name.ends_with("lm_head.weight") || resolved_.count("lm_head.weight") != 0) return false;
    for (const auto& [table_name, file_name] : resolved_) {
      if (!table_name.ends_with("wte.weight") && !table_name.ends_with("embed_tokens.weight")) continue;
      if (entries_.at(file_name).shape != e.shape) return false;
      if (!same_values(entries_.at(file_name), e)) {
        // A Llama may be untied; zerotrain's GPT-2 always ties its head (config_error refuses
        // tie_word_embeddings false), so there the file's head can only go.
        const bool untie = table_name.ends_with("embed_tokens.weight");
        throw_input_error(
            "{}: tensor '{}' differs from '{}', which the tied model (its config's tie_word_embeddings) shares with "
            "the head: {}",
            dir, name, file_name,
            untie ? "drop it, or untie the model (tie_word_embeddings false) to train a head of its own"
                  : "drop it (zerotrain's GPT-2 ties its head to the token table)");
      }
      return true;
    }
    return false;
  }

  // Whether two tensors of one shape hold the same values (as f32), read a chunk at a time.
  bool same_values(const Entry& a, const Entry& b) {
    std::int64_t numel = 1;
    for (std::int64_t d : a.shape) numel *= d;
    constexpr std::int64_t kChunk = 1 << 20;
    std::vector<float> va(static_cast<std::size_t>(std::min(numel, kChunk))), vb(va.size());
    for (std::int64_t at = 0; at < numel; at += kChunk) {
      const std::int64_t n = std::min(kChunk, numel - at);
      read_entry(a, at, at + n, va.data());
      read_entry(b, at, at + n, vb.data());
      if (!std::equal(va.begin(), va.begin() + n, vb.begin())) return false;
    }
    return true;
  }

  void read_entry(const Entry& e, std::int64_t begin, std::int64_t end, float* out) {
    const int size = dtype_bytes(e.dtype);
    raw_.resize(static_cast<std::size_t>((end - begin) * size));
    files_[static_cast<std::size_t>(e.file)].read_at(raw_.data(), (end - begin) * size, e.data_offset + begin * size);
    to_f32(e.dtype, raw_.data(), end - begin, out);
  }

  std::vector<RawFile> files_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> resolved_;  // table name -> the file's name for it
  std::vector<char> raw_;
};

class LlmcReader final : public PretrainedReader {
 public:
  LlmcReader(const std::string& path, const ParamTable& table) : file_(path), header_(read_llmc_model_header(path)) {
    for (LlmcTensor& t : llmc_model_tensors(header_)) tensors_.emplace(t.name, t);
    for (const TensorParts& t : table.tensors()) {
      const auto it = tensors_.find(t.name);
      if (it == tensors_.end()) throw_input_error("{}: llm.c's file has no tensor '{}'", path, t.name);
    }
  }

  void read(const std::string& name, std::int64_t begin, std::int64_t end, float* out) override {
    const LlmcTensor& t = tensors_.at(name);
    if (!t.transposed) {  // the Hugging Face layout's first rows are llm.c's (wte's padded rows follow)
      read_elements(t.offset + begin, end - begin, out);
      return;
    }
    // Hugging Face's [in, out] is llm.c's [out, in] transposed: HF element (i, j) is llm.c's (j, i),
    // and HF rows have t.rows elements. The range needs HF rows i0..i1: a span of each llm.c row,
    // read alone (a rank of several reads its share, not the matrix), or the whole matrix in one
    // read where the span is every column.
    const std::int64_t i0 = begin / t.rows, i1 = (end - 1) / t.rows, span = i1 - i0 + 1;
    spans_.resize(static_cast<std::size_t>(t.rows * span));
    if (span == t.cols) {
      read_elements(t.offset, t.rows * t.cols, spans_.data());
    } else {
      for (std::int64_t j = 0; j < t.rows; ++j) {
        read_elements(t.offset + j * t.cols + i0, span, spans_.data() + j * span);
      }
    }
    for (std::int64_t e = begin; e < end; ++e) {
      out[e - begin] = spans_[static_cast<std::size_t>((e % t.rows) * span + e / t.rows - i0)];
    }
  }

 private:
  void read_elements(std::int64_t first, std::int64_t n, float* out) {
    const std::string dtype = header_.dtype == DType::kBF16 ? "BF16" : "F32";
    raw_.resize(static_cast<std::size_t>(n * dtype_bytes(dtype)));
    file_.read_at(raw_.data(), n * dtype_bytes(dtype), kLlmcModelHeaderBytes + first * dtype_bytes(dtype));
    bytes_read_ += n * dtype_bytes(dtype);
    to_f32(dtype, raw_.data(), n, out);
  }

  RawFile file_;
  LlmcModelHeader header_;
  std::map<std::string, LlmcTensor> tensors_;
  std::vector<char> raw_;
  std::vector<float> spans_;  // the llm.c rows' spans a transposed range reads
};

}  // namespace

std::unique_ptr<PretrainedReader> PretrainedReader::open(const std::string& path, const ParamTable& table) {
  if (fs::is_directory(path)) return std::make_unique<HfReader>(path, table);
  return std::make_unique<LlmcReader>(path, table);
}

void read_pretrained_unit(PretrainedReader& reader, const ParamTable& table, int unit, std::int64_t begin,
                          std::int64_t end, float* unit_data) {
  for (const int index : table.units().at(static_cast<std::size_t>(unit)).params) {
    const ParamSpec& p = table.param(index);
    const std::int64_t a = std::max(begin, p.offset), b = std::min(end, p.offset + p.numel);
    if (a >= b) continue;
    // Stored element e of this part is row row_offset + e / cols of the tensor; its first
    // hf_shape[0] rows are Hugging Face's (a part's hf_shape counts its own live rows), the rest
    // (the padded vocabulary) are zero.
    const std::int64_t cols = p.shape.size() > 1 ? p.numel / p.shape[0] : p.numel;
    const std::int64_t hf_rows = p.shape.size() > 1 ? p.hf_shape[0] : 1;
    const std::int64_t live_end = p.offset + hf_rows * cols;
    const std::int64_t lb = std::min(b, live_end);
    if (a < lb)
      reader.read(p.name, p.row_offset * cols + (a - p.offset), p.row_offset * cols + (lb - p.offset), unit_data + a);
    if (std::max(a, lb) < b) std::fill(unit_data + std::max(a, lb), unit_data + b, 0.0f);
  }
}

}  // namespace zt
