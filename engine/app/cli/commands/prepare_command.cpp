// `zerotrain prepare`: turns a text file into vocab.json plus train.bin/val.bin (llm.c token
// files) in an output directory, ready for `zerotrain train`. The work is in engine/app/data/prepare.
#include <fmt/format.h>

#include <charconv>
#include <filesystem>

#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/data/prepare.h"
#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"

namespace zt::cli {

int prepare_main(const std::vector<std::string>& args) {
  remove_partial_outputs_on_signal();  // stopped by Ctrl-C, it leaves no .tmp behind
  ArgParser parser("prepare",
                   "Turn a text file into a vocabulary (vocab.json) and train/val token files (train.bin, val.bin, "
                   "llm.c format): the first part of the text trains, the last --val-fraction validates.");
  parser.value_flag("text", "FILE", "input text file (UTF-8 for --level char)", true)
      .value_flag("out", "DIR",
                  "output directory (created if missing; an earlier prepare's dataset there is replaced, another "
                  "tool's vocab.json, train.bin or val.bin refused, and so is a training run's directory)",
                  true)
      .value_flag("level", "char|byte", "tokenise by Unicode character or by byte (default char)")
      .value_flag("val-fraction", "F",
                  "fraction of the tokens, at the end, kept for validation, in (0, 0.5] "
                  "(default 0.1)");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }

  const std::string level = parser.get("level", "char");
  data::Vocab::Kind kind = data::Vocab::Kind::kChar;
  if (level == "byte")
    kind = data::Vocab::Kind::kByte;
  else if (level != "char")
    throw_input_error("zerotrain prepare: --level must be char or byte (got '{}')", level);

  double val_fraction = 0.1;
  if (parser.has("val-fraction")) {
    const std::string s = parser.get("val-fraction");
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), val_fraction);
    if (ec != std::errc() || ptr != s.data() + s.size() || !(val_fraction > 0.0 && val_fraction <= 0.5)) {
      throw_input_error("zerotrain prepare: --val-fraction must be a number in (0, 0.5] (got '{}')", s);
    }
  }

  const std::string text_path = parser.get("text"), out_dir = parser.get("out");
  if (std::filesystem::is_directory(text_path)) {
    throw_input_error("zerotrain prepare: --text {}: a folder, not a text file", text_path);
  }
  const data::PrepareSummary summary = data::prepare_text_dataset(text_path, out_dir, kind, val_fraction);
  const std::filesystem::path dir(out_dir);
  fmt::print("zerotrain prepare: {} ({}-level)\n", text_path, level);
  fmt::print("vocabulary: {} tokens -> {}\n", summary.vocab_size, (dir / "vocab.json").string());
  fmt::print("train: {} tokens -> {}\n", summary.train_tokens, (dir / "train.bin").string());
  fmt::print("val:   {} tokens -> {}\n", summary.val_tokens, (dir / "val.bin").string());
  return 0;
}

}  // namespace zt::cli
