// `zerotrain prepare`'s work: text file -> vocabulary -> tokens -> a train/val split written as
// llm.c token files beside vocab.json. The split is by position, like nanoGPT's shakespeare_char:
// the first floor((1 - val_fraction) * n) tokens train, the rest validate.
#include "engine/app/data/prepare.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <string_view>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/data/token_file.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/made_folders.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/weights_location.h"
#include "engine/base/core/check.h"

namespace zt::data {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMaxPrepareTextBytes = std::int64_t{2} << 30;

// Whether `path` starts with the llm.c GPT-2 token magic prepare writes.
bool llmc_token_file(const fs::path& path) { return llmc_token_magic(path.string()) == kLlmcTokenMagic; }

// A prepare replaces an earlier prepare's dataset whole. Files under its three names that no
// prepare wrote are someone else's (a Hugging Face model's vocab.json, nanoGPT's raw train.bin
// beside its meta.pkl) and are refused, not overwritten: an earlier dataset is a zerotrain
// vocabulary with llm.c token files beside it. What is not a file (a folder, a dangling link)
// check_output_path refuses or the staged rename replaces, as for any output.
void refuse_others_files(const std::string& out_dir) {
  const fs::path dir(out_dir), vocab = dir / "vocab.json";
  std::error_code ec;
  // A training run's directory holds a vocab.json of its own (the one its samples and exports
  // decode through), with no token files beside it: not an earlier prepare's.
  if (const std::string run_file = run_directory_marker(out_dir); !run_file.empty()) {
    throw_input_error(
        "--out {} is a training run's directory (it holds {}): prepare would replace the run's vocab.json, "
        "through which its samples and exports decode; prepare into a new or empty folder, or over an earlier "
        "prepare's",
        out_dir, run_file);
  }
  // A prepare cut between its renames left its token files with no vocab.json (removed before
  // them), its own still under the staging name, and the folder marked incomplete (a retry that
  // failed in turn may have removed the staged one): an earlier prepare's folder, which this completes.
  const bool has_vocab = fs::is_regular_file(vocab, ec);
  const bool cut_prepare = fs::exists(dir / kIncompleteOutputMarker, ec) ||
                           (!has_vocab && fs::is_regular_file(staging_path(vocab.string()), ec));
  std::string why;
  if (has_vocab) {
    try {
      Vocab::load(vocab.string());
    } catch (const std::exception&) {
      why = "a vocab.json that is not a zerotrain vocabulary";
    }
  }
  for (const char* name : {"train.bin", "val.bin"}) {
    if (why.empty() && fs::is_regular_file(dir / name, ec) &&
        (!(has_vocab || cut_prepare) || !llmc_token_file(dir / name))) {
      why = fmt::format("a {} that no prepare wrote", name);
    }
  }
  if (!why.empty()) {
    throw_input_error(
        "--out {} holds {}, which prepare would replace: prepare into a new or empty folder, or over an earlier "
        "prepare's",
        out_dir, why);
  }
}

}  // namespace

PrepareSummary prepare_text_dataset(const std::string& text_path, const std::string& out_dir, Vocab::Kind kind,
                                    double val_fraction) {
  if (!(val_fraction > 0.0 && val_fraction < 1.0)) {
    throw_input_error("validation fraction must be in (0, 1) (got {})", val_fraction);
  }
  refuse_others_files(out_dir);
  // Held whole with its tokens and their split (about 3 bytes of memory a byte of text: 790 MB for
  // 254 MiB), so up to 2 GiB, past enwik9 (a character vocabulary's corpora are smaller); the 256 MiB
  // of other inputs refused larger texts as "more than any such input holds".
  const std::string text = read_whole_input(
      text_path, "text file", kMaxPrepareTextBytes,
      "zerotrain prepare holds a text whole (about 3 bytes of memory a byte); split a larger corpus into "
      "documents (JSONL lines) and shard it with tools/prepare_tokens.py --tokenizer");
  if (text.empty()) throw_input_error("{}: text file is empty", text_path);

  // Vocabulary and encoding errors (invalid UTF-8) carry a byte offset; prefix them with the file.
  Vocab vocab;
  std::vector<std::uint16_t> tokens;
  try {
    vocab = kind == Vocab::Kind::kChar ? Vocab::build_char(text) : Vocab::byte_level();
    tokens = vocab.encode(text);
  } catch (const InputError& e) {
    // Only a character-level vocabulary reads the text as UTF-8; bytes take any file.
    const bool utf8 = std::string_view(e.what()).starts_with("invalid UTF-8");
    throw_input_error("{}: {}{}", text_path, e.what(),
                      utf8 ? " (a text in another encoding, or binary data: --level byte tokenises any bytes)" : "");
  }

  const auto n = static_cast<std::int64_t>(tokens.size());
  const auto n_train = static_cast<std::int64_t>(std::floor((1.0 - val_fraction) * static_cast<double>(n)));
  const std::int64_t n_val = n - n_train;
  if (n_train < 2 || n_val < 2) {
    // Long enough for some split: the fraction is what leaves a side short.
    if (n >= 4) {
      throw_input_error(
          "{}: the validation fraction {} splits its {} tokens into {} train and {} validation; each needs at least "
          "2 (a fraction of {:.3g} or more gives validation 2)",
          text_path, val_fraction, n, n_train, n_val, 2.0 / static_cast<double>(n));
    }
    throw_input_error("{}: text too short: {} tokens split into {} train and {} validation; each needs at least 2",
                      text_path, n, n_train, n_val);
  }

  // Made where missing, and removed again where the prepare fails or is stopped before its files
  // are in place.
  FoldersForOutput folders(out_dir);
  if (folders.error()) throw_input_error("{}: cannot create output directory: {}", out_dir, folders.error().message());
  // What would fail only after the work, at a write or a rename: said first, as bad input.
  for (const char* name : {"train.bin", "val.bin", "vocab.json"}) {
    check_output_path((std::filesystem::path(out_dir) / name).string(), "--out");
  }
  // All three written under staging names first, then renamed into place (vocab.json last): a
  // failure part way (a full disk at train.bin) leaves an earlier dataset in the folder whole, never
  // its token files beside another vocabulary (which would train and decode as garbage without a word).
  const std::filesystem::path dir(out_dir);
  const std::span<const std::uint16_t> all(tokens);
  StagedFiles staged;
  staged.lock_folder(out_dir, "--out");  // a second prepare into it at once is refused
  write_llmc_tokens_at(staged.stage((dir / "train.bin").string()), all.first(static_cast<std::size_t>(n_train)));
  write_llmc_tokens_at(staged.stage((dir / "val.bin").string()), all.subspan(static_cast<std::size_t>(n_train)));
  ckpt::write_file_synced(staged.stage((dir / "vocab.json").string()), vocab.json_text());
  // Everything is written. The earlier vocab.json goes before the renames (as an export's
  // config.json does): a kill between them then leaves no vocabulary beside the new token files
  // and its own still staged (a run refuses such a folder; a prepare again completes it), never
  // the old one, through which they would train and sample as another text without a word.
  staged.commit(out_dir, {(dir / "vocab.json").string()});
  folders.keep();

  return PrepareSummary{vocab.size(), n_train, n_val};
}

}  // namespace zt::data
