// HF and llm.c exports: each tensor is read from the rank files' byte ranges that hold it,
// converted (and transposed for llm.c's [out, in] linear weights), written, and dropped.
#include "engine/app/checkpoint/checkpoint_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/checkpoint/export_folder.h"
#include "engine/app/data/special_tokens.h"
#include "engine/app/data/token_text.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/llmc_model_file.h"
#include "engine/app/io/made_folders.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/safetensors.h"
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

void close_durably(FileHandle& out) {
  out.sync();
  out.close();
}

}  // namespace

namespace {

std::int64_t tensor_bytes(const TensorParts& t, DType dtype) {
  std::int64_t n = 1;
  for (std::int64_t d : t.hf_shape) n *= d;
  return n * static_cast<std::int64_t>(dtype_size_bytes(dtype));
}

// The metadata every tensor file of an export carries: transformers' format, this tool, and the
// tokenizer files written beside (their names and crc32s, export_folder.h).
nlohmann::ordered_json export_metadata(const TokenizerFiles& tokenizer) {
  std::string tokenizer_list;
  for (const auto& [name, text] : tokenizer.files) tokenizer_list += (tokenizer_list.empty() ? "" : ",") + name;
  return {{"format", "pt"},
          {kExportedByKey, kExportedBy},
          {kTokenizerFilesKey, tokenizer_list},
          {kTokenizerCrcKey, tokenizer_crc_list(tokenizer.files)}};
}

// One safetensors file of `tensors` (HF shapes, `dtype`) at `path`, each read, converted, written
// and dropped in turn: the header is known before any data (shapes and dtypes come from the table).
void write_safetensors(const CheckpointReader& reader, const std::vector<TensorParts>& tensors, DType dtype,
                       const nlohmann::ordered_json& metadata, const std::string& path) {
  nlohmann::ordered_json header = {{"__metadata__", metadata}};
  std::int64_t data_bytes = 0;
  for (const TensorParts& t : tensors) {
    const std::int64_t bytes = tensor_bytes(t, dtype);
    header[t.name] = {
        {"dtype", dtype_name(dtype)}, {"shape", t.hf_shape}, {"data_offsets", {data_bytes, data_bytes + bytes}}};
    data_bytes += bytes;
  }
  const std::string text = safetensors_header_text(header);
  FileHandle out = FileHandle::create(path);
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
  close_durably(out);
}

}  // namespace

namespace {

// Whether `name` is one of an HF export's tensor files: model.safetensors, its shards, their index.
bool export_tensor_file(const std::string& name) {
  return name == "model.safetensors" || name == "model.safetensors.index.json" ||
         (name.starts_with("model-") && name.ends_with(".safetensors"));
}

// The staging files an export killed before its renames (kill -9, a power loss) left in `dir`:
// never renamed, never removed, and uploaded with the folder. The caller holds the folder
// (lock_folder), so no other export is writing them; only an export's own names go.
void remove_stale_staging(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".tmp")) continue;
    const std::string target = name.substr(0, name.size() - 4);
    const bool tokenizer = std::find_if(std::begin(data::kTokenizerFiles), std::end(data::kTokenizerFiles),
                                        [&](const char* f) { return target == f; }) != std::end(data::kTokenizerFiles);
    if (tokenizer || export_tensor_file(target) || target == "config.json") {
      stale.push_back(e.path());
    }
  }
  for (const fs::path& p : stale) fs::remove(p, ec);
}

}  // namespace

std::string run_directory_of(const std::string& checkpoint_dir, const Manifest& manifest) {
  // The checkpoint folder, whatever path named the checkpoint (a trailing slash, "..", a symlink),
  // above superseded/ for a checkpoint set aside there; the run directory of the default layout is
  // the folder above it.
  std::error_code ec;
  fs::path folder = fs::weakly_canonical(fs::absolute(checkpoint_dir, ec), ec).parent_path();
  if (ec) return "";
  if (folder.filename() == "superseded") folder = folder.parent_path();
  const fs::path above = folder.parent_path();
  const std::string recorded = extra_string(manifest.extra, "run_dir");
  // The folder above where it is a run's (it holds metrics.jsonl: the default layout, or
  // checkpoint.dir inside the run directory), so a run moved with its checkpoints keeps its own
  // text even where another run now holds its old path; and for checkpoints from before
  // extra.run_dir. Not merely because the checkpoints kept the default layout: a checkpoint folder
  // copied or moved on its own would take whatever tokenizer lies beside its new place.
  if (recorded.empty() || fs::exists(above / "metrics.jsonl", ec)) return above.string();
  return fs::is_directory(recorded, ec) ? recorded : std::string();
}

nlohmann::json run_special_token_ids(const std::string& run_dir, const nlohmann::json& carried) {
  // The run's tokenizer numbers its special tokens (none where its directory is gone).
  nlohmann::json ids = run_dir.empty() ? nlohmann::json::object() : data::special_token_ids(run_dir);
  const nlohmann::json tokenizers = ids;
  // Without a tokenizer's, those of the Hugging Face model the run started from (train.init_from),
  // which its checkpoints carry: an export would otherwise drop them (transformers then takes
  // its own defaults, and generate stops at another token). Not where the run trained on its own
  // vocabulary (vocab.json, exported as the tokenizer): they number another tokenizer's.
  const fs::path dir(run_dir);
  const bool own_vocabulary = !run_dir.empty() && !fs::exists(dir / "tokenizer.json") && fs::exists(dir / "vocab.json");
  // A list the model gave (an instruct model's eos_token_id: each token a turn may end with) goes
  // before its tokenizer's one id where it holds it: generate would otherwise run past the others.
  for (const auto& [key, id] : carried.items()) {
    const bool widens =
        tokenizers.contains(key) && id.is_array() && std::find(id.begin(), id.end(), tokenizers.at(key)) != id.end();
    if ((!tokenizers.contains(key) || widens) && !own_vocabulary) ids[key] = id;
  }
  return ids;
}

HfExport export_hf(const CheckpointReader& reader, const std::string& out_dir, DType dtype,
                   std::int64_t max_shard_bytes, const std::string& text_dir) {
  ZT_CHECK(dtype == DType::kF32 || dtype == DType::kBF16);
  ZT_CHECK(max_shard_bytes > 0, "max shard bytes {}", max_shard_bytes);
  const ModelSpec spec = model_spec_of(reader);
  const ParamTable& table = reader.manifest().table;
  // The run's tokenizer: written beside the model, and its special tokens' ids in config.json.
  const std::string& run_dir = text_dir;
  const TokenizerFiles tokenizer = run_dir.empty() ? TokenizerFiles() : export_tokenizer_files(run_dir, spec);
  check_hf_export_folder(out_dir, reader.manifest(), tokenizer);
  // Folders made here (the export's, and any missing above it) and left empty by a failure (a full
  // disk) or a Ctrl-C are removed again, after the staged files (declared later, destroyed first);
  // those that were there stay.
  FoldersForOutput folders(out_dir);
  if (folders.error()) throw_input_error("cannot create export directory '{}': {}", out_dir, folders.error().message());
  if (const std::string why = why_unwritable(out_dir); !why.empty()) {
    throw_input_error("--out {}: cannot write into it: {}", out_dir, why);
  }

  const nlohmann::json& cfg_model = reader.manifest().config.value("model", nlohmann::json::object());
  nlohmann::ordered_json hf = spec.family().hf_config(spec, cfg_model.value("dropout", 0.0), dtype);
  const nlohmann::json special_ids =
      run_special_token_ids(run_dir, extra_object(reader.manifest().extra, "special_token_ids"));
  for (const auto& [key, id] : special_ids.items()) hf[key] = id;

  // Tensors in table order, cut into shards of at most max_shard_bytes (a larger tensor alone), as
  // transformers' save_pretrained cuts them; one shard is plain model.safetensors.
  std::vector<std::vector<TensorParts>> shards(1);
  std::int64_t in_shard = 0;
  HfExport result;
  for (TensorParts& t : table.tensors()) {
    const std::int64_t bytes = tensor_bytes(t, dtype);
    if (!shards.back().empty() && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(std::move(t));
    in_shard += bytes;
    result.total_bytes += bytes;
  }
  const fs::path dir(out_dir);
  StagedFiles staged;
  staged.lock_folder(out_dir, "--out");  // a second export into it at once is refused
  remove_stale_staging(dir);
  const nlohmann::ordered_json metadata = export_metadata(tokenizer);  // once, for every shard
  if (shards.size() == 1) {
    write_safetensors(reader, shards[0], dtype, metadata, staged.stage((dir / "model.safetensors").string()));
    result.files.push_back("model.safetensors");
  } else {
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
      write_safetensors(reader, shards[i], dtype, metadata, staged.stage((dir / name).string()));
      for (const TensorParts& t : shards[i]) weight_map[t.name] = name;
      result.files.push_back(name);
    }
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", result.total_bytes}}},
                                          {"weight_map", weight_map}};
    write_file_synced(staged.stage((dir / "model.safetensors.index.json").string()), index.dump(2) + "\n");
  }
  // The run's tokenizer, so AutoTokenizer loads the folder too; or its own vocabulary (a character-
  // or byte-level run's vocab.json) written as one.
  for (const auto& [name, text] : tokenizer.files) {
    write_file_synced(staged.stage((dir / name).string()), text);
    result.tokenizer_files.push_back(name);
  }
  result.tokenizer_from_vocab = tokenizer.from_vocab;
  result.run_dir = run_dir;
  write_file_synced(staged.stage((dir / "config.json").string()), hf.dump(2) + "\n");

  // Everything is written. An earlier export's config.json goes first (StagedFiles: a kill during
  // the renames then leaves no config.json beside the new tensors, rather than the old one), then
  // its tensor files that these do not replace, which would mix with them (a sharded export over
  // a single file, or fewer shards), just before the new files take their names.
  std::vector<std::string> earlier = {(dir / "config.json").string()};
  // The tokenizer files an earlier export wrote that this one does not write again: another run's
  // (re-exporting a run of no tokenizer over it left them to number this model's tokens). Those
  // it did not write, or wrote and the user changed since (a user's), stay, and are named for the
  // command's note.
  const std::vector<std::string> earlier_tokenizer = earlier_export_tokenizer_files(dir).written;
  for (const char* f : data::kTokenizerFiles) {
    std::error_code ec;
    if (std::find(result.tokenizer_files.begin(), result.tokenizer_files.end(), f) != result.tokenizer_files.end() ||
        !fs::exists(dir / f, ec)) {
      continue;
    }
    // Where the run directory is unknown (gone, moved), whether the run had a tokenizer is too: kept.
    if (!run_dir.empty() &&
        std::find(earlier_tokenizer.begin(), earlier_tokenizer.end(), f) != earlier_tokenizer.end()) {
      earlier.push_back((dir / f).string());
    } else {
      result.kept_tokenizer_files.emplace_back(f);
    }
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (export_tensor_file(name) && std::find(result.files.begin(), result.files.end(), name) == result.files.end()) {
      earlier.push_back(e.path().string());
    }
  }
  staged.commit(out_dir, earlier);
  folders.keep();
  return result;
}

void export_llmc(const CheckpointReader& reader, const std::string& link_or_path, DType dtype) {
  ZT_CHECK(dtype == DType::kF32 || dtype == DType::kBF16);
  const std::string out_path = rename_target(link_or_path, "--out");  // through a symlink: the file it names
  // "new/sub/": the export was done whole, then its rename failed.
  if (fs::path(out_path).filename().empty()) throw_input_error("--out '{}': not a file name", link_or_path);
  const ModelSpec spec = model_spec_of(reader);
  if (!spec.family().llmc_format()) {
    throw_input_error(
        "{}: llm.c's model file holds GPT-2 models only; this checkpoint is a {} (export it with --format "
        "hf)",
        reader.dir(), spec.model.arch);
  }
  // As the HF export refuses the folder the run started from: an llm.c file it started from holds
  // the pretrained weights (gpt2_124M.bin) that this export would replace.
  if (is_init_from(out_path, reader.manifest())) {
    throw_input_error(
        "--out {} is the llm.c model file this run started from (train.init_from): the export would replace its "
        "pretrained weights; export to another file",
        link_or_path);
  }
  // Its folder made where missing, as an HF export makes its own (the file was refused naming the
  // .tmp beside it, exit 1), and removed again where the export fails or is stopped before the
  // file is in place.
  const fs::path parent = fs::path(out_path).parent_path();
  const std::string folder = parent.empty() ? "." : parent.string();
  FoldersForOutput folders(folder);
  if (folders.error()) {
    throw_input_error("--out {}: cannot create its folder {}: {}", link_or_path, parent.string(),
                      folders.error().message());
  }
  if (const std::string why = why_unwritable(folder); !why.empty()) {
    throw_input_error("--out {}: cannot write into {}: {}", link_or_path, folder, why);
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
  StagedFiles staged;
  FileHandle out = FileHandle::create(staged.stage(out_path));
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
  close_durably(out);
  staged.commit(fs::path(out_path).parent_path().string());
  folders.keep();
}

}  // namespace zt::ckpt
