// The data section (see the header).
#include "engine/app/config/data_section.h"

#include <utility>

#include "engine/base/core/check.h"

namespace zt {

void read_data_section(ConfigReader r, DataConfig& d) {
  d.dataset = r.get_path("dataset", d.dataset);
  d.train_file = r.get_path("train_file", "");
  d.val_file = r.get_path("val_file", "");
  d.vocab_file = r.get_path("vocab_file", "");
  d.tokenizer_file = r.get_path("tokenizer_file", "");
  d.choice_file = r.get_path("choice_file", "");
  d.train_files = r.get_path_list("train_files");
  d.val_files = r.get_path_list("val_files");
  // A script whose shard list came up empty must not train on the embedded text unasked: an empty
  // list stands only beside a data key that names the data (a run's saved config.json writes
  // data.dataset, and [] for no shards).
  const std::pair<const char*, const std::vector<std::string>*> lists[] = {{"train_files", &d.train_files},
                                                                           {"val_files", &d.val_files}};
  for (const auto& [key, list] : lists) {
    if (r.has(key) && list->empty() && !r.has("dataset") && d.train_file.empty()) {
      throw_input_error(
          "config error in {}: data.{} is an empty list: name at least one token file or pattern (data.dataset = "
          "\"embedded\" asks for the generated text)",
          r.source_of(key), key);
    }
  }
  d.order = r.get_enum("order", d.order, {"random", "sequential"});
  d.format = r.get_enum("format", d.format, {"auto", "llmc", "nanogpt"});
  d.embedded_chars = r.get_int("embedded_chars", static_cast<int>(d.embedded_chars), 10'000, 1 << 30);
  // Both forms first: a --set data.train_file over a config's shard lists lacks its val_file, but
  // the mix is what is wrong.
  const bool shard_lists = !d.train_files.empty() || !d.val_files.empty(),
             single_files = !d.train_file.empty() || !d.val_file.empty();
  if (shard_lists && single_files) {
    throw_input_error(
        "config error in {}: give data.train_files/val_files (shards) or data.train_file/val_file, "
        "not both",
        r.sources_of({"data.train_files", "data.val_files", "data.train_file", "data.val_file"}));
  }
  if (d.train_file.empty() != d.val_file.empty()) {
    throw_input_error("config error in {}: data.train_file and data.val_file must be given together",
                      r.sources_of({"data.train_file", "data.val_file"}));
  }
  if (d.train_files.empty() != d.val_files.empty()) {
    throw_input_error("config error in {}: data.train_files and data.val_files must be given together",
                      r.source_of(d.train_files.empty() ? "val_files" : "train_files"));
  }
  r.reject_unknown_keys();
}

nlohmann::json data_section_json(const DataConfig& d) {
  return {{"dataset", d.dataset},         {"train_file", d.train_file},         {"val_file", d.val_file},
          {"train_files", d.train_files}, {"val_files", d.val_files},           {"order", d.order},
          {"vocab_file", d.vocab_file},   {"tokenizer_file", d.tokenizer_file}, {"choice_file", d.choice_file},
          {"format", d.format},           {"embedded_chars", d.embedded_chars}};
}

}  // namespace zt
