// Gathering, checking and writing the final weights (see the header).
#include "engine/app/io/final_weights.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/safetensors.h"
#include "engine/base/core/buffer.h"
#include "engine/base/core/check.h"

namespace zt {

namespace {

// Where each tensor lies in the file: its data offset, in the order SafetensorsWriter would write
// them (a tensor of one part where its unit comes, one split across units after its last part),
// so that the file is the one the whole-model writer made.
struct FileLayout {
  std::string header;                      // the text after the length prefix, padded to 8 bytes
  std::map<std::string, std::int64_t> at;  // tensor name -> its data's offset in the file
  std::map<std::string, bool> split;       // tensor name -> split across units (its parts at row offsets)
};

FileLayout file_layout(const ParamTable& table, const std::map<std::string, std::string>& metadata) {
  const std::vector<TensorParts> tensors = table.tensors();
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = metadata;
  std::vector<std::pair<std::string, std::int64_t>> order;  // name, bytes
  std::map<std::string, bool> split;
  for (const UnitSpec& unit : table.units()) {
    for (int index : unit.params) {
      const ParamSpec& p = table.param(index);
      const auto t =
          std::find_if(tensors.begin(), tensors.end(), [&](const TensorParts& x) { return x.name == p.name; });
      if (t->parts.back() != index) continue;  // a split tensor takes its place at its last part
      std::int64_t numel = 1;
      for (std::int64_t d : t->hf_shape) numel *= d;
      header[t->name] = {{"dtype", "F32"}, {"shape", t->hf_shape}, {"data_offsets", {0, 0}}};
      order.emplace_back(t->name, numel * static_cast<std::int64_t>(sizeof(float)));
      split[t->name] = t->parts.size() > 1;
    }
  }
  std::int64_t offset = 0;
  for (const auto& [name, bytes] : order) {
    header[name]["data_offsets"] = {offset, offset + bytes};
    offset += bytes;
  }
  FileLayout layout;
  layout.split = std::move(split);
  layout.header = safetensors_header_text(header);
  const std::int64_t data_start = 8 + static_cast<std::int64_t>(layout.header.size());
  for (const auto& [name, bytes] : order) {
    layout.at[name] = data_start + header[name]["data_offsets"][0].get<std::int64_t>();
  }
  return layout;
}

}  // namespace

void write_final_weights(const std::string& path, ShardedAdamW& optimizer, MemoryTracker& tracker, Communicator& world,
                         const std::map<std::string, std::string>& metadata) {
  const ParamTable& table = optimizer.table();
  const bool root = world.rank() == 0;
  // "format": "pt" is what Hugging Face's loaders demand of a safetensors state dict.
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "pt";
  const FileLayout layout = file_layout(table, meta);
  const std::string tmp = staging_path(path);
  // Rank 0's write failures are its own: it notes the first and keeps gathering with the others
  // (they would wait in the next gather until the collective timeout), and the ranks agree on it
  // after the last unit.
  std::string write_error;
  bool renamed = false;  // rank 0's: the file took its name
  std::optional<ckpt::FileHandle> out;
  const auto writing = [&](const std::function<void()>& write) {
    if (!root || !write_error.empty()) return;
    try {
      write();
    } catch (const std::exception& e) {
      write_error = e.what();
    }
  };
  writing([&] {
    out = ckpt::FileHandle::create(tmp);
    const std::uint64_t header_bytes = layout.header.size();
    out->write_at(&header_bytes, 8, 0);  // little-endian (x86-64, aarch64)
    out->write_at(layout.header.data(), static_cast<std::int64_t>(layout.header.size()), 8);
  });
  const auto discard = [&] {
    out.reset();                         // closes without throwing
    if (root) std::remove(tmp.c_str());  // no partial .tmp left behind; `path` as it was
  };
  // One unit at a time, written as it is gathered: the whole model gathered first held 4 bytes a
  // parameter on every rank at the run's end (a 7B model: 28 GB each), past what a node has.
  try {
    for (std::size_t u = 0; u < table.units().size(); ++u) {
      const Buffer full = optimizer.gather_master(static_cast<int>(u), tracker);
      const float* values = full.as<float>();
      const UnitSpec& unit = table.units()[u];
      for (std::int64_t i = 0; i < unit.numel; ++i) {  // the same values on every rank: all stop here
        if (!std::isfinite(values[i])) throw_runtime_error("parameters became non-finite; final weights not written");
      }
      writing([&] {
        for (int index : unit.params) {
          // Padded vocabulary rows are trailing rows: the HF tensor (or a part's rows of it) is a
          // prefix of the stored one.
          const ParamSpec& p = table.param(index);
          std::int64_t row = 1, live = 1;
          for (std::size_t k = 1; k < p.shape.size(); ++k) row *= p.shape[k];
          for (std::int64_t d : p.hf_shape) live *= d;
          const std::int64_t rows_before = layout.split.at(p.name) ? p.row_offset : 0;
          const std::int64_t at = layout.at.at(p.name) + rows_before * row * static_cast<std::int64_t>(sizeof(float));
          out->write_at(values + p.offset, live * static_cast<std::int64_t>(sizeof(float)), at);
        }
      });
    }
  } catch (...) {
    discard();
    throw;
  }
  writing([&] {
    out->sync();  // a network file system may report a failed write only here
    out->close();
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw_runtime_error("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno));
    }
    renamed = true;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    ckpt::sync_dir(parent.empty() ? "." : parent.string());
  });
  // A failure after the rename (the folder's fsync) leaves them in place, not durable.
  if (!write_error.empty()) {
    write_error = renamed ? fmt::format("final weights written to {}, but not made durable: {}", path, write_error)
                          : fmt::format("final weights not written: {}", write_error);
  }
  write_error = broadcast_string(world, write_error);
  if (!write_error.empty()) {
    discard();
    fail_on_every_rank(world, write_error, /*input_error=*/false);
  }
}

}  // namespace zt
