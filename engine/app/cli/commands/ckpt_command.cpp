// `zerotrain ckpt inspect|verify|export PATH`: look into, check, and convert sharded checkpoints.
// PATH is a step_XXXXXXXX directory or a checkpoint folder (then its `latest`, falling back to the
// newest valid checkpoint with a note on stderr).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/app/checkpoint/checkpoint_export.h"
#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/checkpoint/checkpoint_resolution.h"
#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/llmc_model_file.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/weights_location.h"
#include "engine/app/trainer/checkpoint_vocabulary.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"
#include "engine/base/core/memory_tracker.h"

namespace zt::cli {

namespace {

constexpr const char* kCkptUsage =
    "usage: zerotrain ckpt <action> PATH [flags]\n\n"
    "actions:\n"
    "  inspect PATH                       step, config, bytes per rank and state, checksum status\n"
    "  verify PATH                        exit 0 if every file is present and matches its checksums\n"
    "                                     (a folder: the checkpoint --resume would take first)\n"
    "  export PATH --format hf --out DIR [--dtype f32|bf16] [--max-shard-size 5GB]\n"
    "                                                          Hugging Face folder (tensors, config, tokenizer)\n"
    "  export PATH --format llmc --out FILE [--dtype f32|bf16]  llm.c model file\n\n"
    "PATH is a step_XXXXXXXX directory or a checkpoint folder (its newest complete checkpoint, normally\n"
    "the one its 'latest' names); it may come before, between or after the flags.\n";

std::string resolve(const std::string& path, ckpt::Validation validation) {
  const ckpt::ResolvedCheckpoint r = ckpt::resolve_checkpoint(path, validation);
  for (const std::string& note : r.notes) print_err("zerotrain ckpt: note: {}\n", note);
  return r.path;
}

// An HF export writes config.json: into a training run's directory it would replace the run's own,
// which --resume, sample --run and eval --run read. Refused before anything is read or written.
void refuse_run_directory(const std::string& out) {
  // A run's files (a live run's lock before its first record), or a config.json with a "model"
  // section, which an HF config has not: weights_at reads it, as any input, never waiting on a
  // FIFO (a config.json that is none is refused by the export's own check). The files first:
  // weights_at answers "a checkpoint folder" where the run's checkpoints are its directory.
  if (!run_directory_marker(out).empty() || weights_at(out) == WeightsAt::kRunDirectory) {
    throw_input_error(
        "zerotrain ckpt export: --out {} is a training run's directory (its config.json is the run's, which "
        "--resume and sample/eval --run read); export to another folder, e.g. --out {}",
        out, (std::filesystem::path(out) / "hf").string());
  }
}

// Whether `inner` is `outer` or a path below it (both made absolute, `..` resolved, links followed
// as far as they exist).
bool path_within(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  // absolute() first: weakly_canonical leaves a relative path whose first part does not exist
  // relative ("hf" inside the checkpoint's directory would not compare with it).
  std::error_code ec_inner, ec_outer;
  const std::filesystem::path a = std::filesystem::weakly_canonical(std::filesystem::absolute(inner), ec_inner);
  const std::filesystem::path b = std::filesystem::weakly_canonical(std::filesystem::absolute(outer), ec_outer);
  if (ec_inner || ec_outer || b.empty()) return false;
  const auto [end, _] = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return end == b.end();
}

// An export writes its files over what --out names: inside the checkpoint it reads (or its
// folder, which holds the others and `latest`) it would replace a rank file or a manifest; over a
// file that is not an llm.c model (a config, a token file) it would lose that file. Refused before
// anything is written.
void refuse_out_over_inputs(const std::string& out, const std::string& step_dir, const std::string& format) {
  std::error_code ec;  // absolute: a step_dir of "." has no parent to name
  const std::filesystem::path step = std::filesystem::weakly_canonical(std::filesystem::absolute(step_dir), ec);
  const std::filesystem::path folder = step.parent_path();
  const bool in_folder = std::filesystem::exists(folder / "latest") && path_within(out, folder);
  if (path_within(out, step) || in_folder) {
    throw_input_error(
        "zerotrain ckpt export: --out {} is inside the checkpoint{} {} (the export would write over its files); "
        "export to a folder outside it, e.g. --out {}",
        out, in_folder ? " folder" : "", (in_folder ? folder : step).string(),
        (folder.parent_path() / (format == "hf" ? "hf" : "model.bin")).string());
  }
  if (format != "llmc") return;
  // A device, FIFO or socket named: refused, not replaced (the rename over it took /dev/null's
  // entry, as root, and left a regular file there).
  require_regular_file(out, "zerotrain ckpt export: --out");  // where it exists (new folders are made)
  if (!std::filesystem::is_regular_file(out)) return;
  std::int32_t magic = 0;
  std::ifstream in(out, std::ios::binary);
  in.read(reinterpret_cast<char*>(&magic), sizeof(magic));
  if (!in || magic != kLlmcModelMagic) {
    throw_input_error(
        "zerotrain ckpt export: --out {} exists and is not an llm.c model file (the export would replace it); "
        "remove it or choose another --out",
        out);
  }
}

// One entry of a manifest's data identity (each as a run writes it: ckpt::is_data_file_entry):
// "data file (train): PATH, N bytes, fingerprint X, sampled Y".
void print_data_file(const nlohmann::json& f) {
  const std::string split = f.value("split", "");
  // Its contents as a resume's refusal names them (the sampled blocks between the ends too).
  fmt::print("data file{}: {}, {}\n", split.empty() ? "" : " (" + split + ")", f["path"].get<std::string>(),
             describe_contents(f));
}

int inspect(const std::string& path) {
  const ckpt::CheckpointReader reader(resolve(path, ckpt::Validation::kStructure));
  const ckpt::Manifest& m = reader.manifest();
  fmt::print("checkpoint {} (format {})\n", reader.dir(), m.format_version);
  fmt::print("step {} | tokens seen {} | next sample {} | optimizer step {}\n", m.position.step, m.position.tokens_seen,
             m.position.next_sample_index, m.position.optimizer_step);
  fmt::print("saved by {} at ZeRO stage {}, working params {}\n", m.savers(), m.zero_stage, m.param_dtype);
  fmt::print("model: {}\n", m.model.dump());
  // Where export and sample --ckpt take the run's tokenizer from (ckpt::run_directory_of).
  const std::string run_dir = ckpt::run_directory_of(reader.dir(), m);
  fmt::print("run directory: {}\n",
             run_dir.empty() ? ckpt::extra_string(m.extra, "run_dir") + " (no longer exists)" : run_dir);
  fmt::print("parameters: {} in {} tensors, {} units\n", m.table.total_numel(), m.table.tensors().size(),
             m.table.units().size());
  for (const char* section : {"data", "train", "optim", "precision", "zero"}) {
    if (m.config.contains(section)) fmt::print("config.{}: {}\n", section, m.config.at(section).dump());
  }
  // The files a resume compares its data with (engine/app/trainer/run_identity.h).
  if (const auto it = m.extra.find("data_identity"); it != m.extra.end() && it->is_array()) {
    for (const nlohmann::json& f : *it) print_data_file(f);
  }
  fmt::print("\n{:<16} {:>12} {:>12} {:>12} {:>12}  {:<8}  {}\n", "file", "bytes", "master", "exp_avg", "exp_avg_sq",
             "crc32", "checksums");
  int bad = 0;
  std::int64_t total = 0;
  std::array<std::int64_t, ckpt::kNumStateKinds> totals{};
  for (std::size_t i = 0; i < m.files.size(); ++i) {
    const ckpt::RankFile& f = m.files[i];
    std::array<std::int64_t, ckpt::kNumStateKinds> per{};
    for (const ckpt::FileSegment& s : f.segments) per[static_cast<std::size_t>(s.kind)] += (s.end - s.begin) * 4;
    for (int k = 0; k < ckpt::kNumStateKinds; ++k)
      totals[static_cast<std::size_t>(k)] += per[static_cast<std::size_t>(k)];
    total += f.bytes;
    std::string status = "ok";
    try {
      reader.verify_file(static_cast<int>(i));
    } catch (const InputError& e) {
      status = fmt::format("FAILED: {}", e.what());
      ++bad;
    }
    fmt::print("{:<16} {:>12} {:>12} {:>12} {:>12}  {:08x}  {}\n", f.name, format_bytes(f.bytes), format_bytes(per[0]),
               format_bytes(per[1]), format_bytes(per[2]), f.crc32, status);
  }
  fmt::print("{:<16} {:>12} {:>12} {:>12} {:>12}\n", "total", format_bytes(total), format_bytes(totals[0]),
             format_bytes(totals[1]), format_bytes(totals[2]));
  fmt::print("checksums: {}\n", bad == 0 ? fmt::format("ok ({} files verified)", m.files.size())
                                         : fmt::format("{} of {} files FAILED", bad, m.files.size()));
  // The exit status's reason on standard error too, as every failing command gives it.
  if (bad > 0) {
    print_err("{}", error_line(fmt::format("ckpt inspect: rank files of {} that fail their checksums: {} of {} (above)",
                                           reader.dir(), bad, m.files.size())));
  }
  return bad == 0 ? 0 : 2;
}

// "5GB", "500MB", "64KiB", "1000000" -> bytes, read as transformers reads max_shard_size: units in
// any case ("20kB", "5gib"), decimal ones with a lower-case b in bits ("5Gb": 5e9 / 8 bytes), binary
// ones with an i; InputError naming the flag.
std::int64_t parse_size(const std::string& text, const char* flag) {
  std::size_t used = 0;
  double value = -1.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {}
  const std::string unit = text.substr(std::min(used, text.size()));
  std::string upper = unit;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const double bits = upper.size() == 2 && unit[1] == 'b' ? 8.0 : 1.0;  // "kb", "Gb"
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"KIB", 1024.0}, {"MIB", 1 << 20}, {"GIB", 1 << 30}};
  for (const auto& [name, per_unit] : kUnits) {
    const double scale = per_unit / bits;
    if (upper != name || !(value >= 0.0)) continue;
    if (value * scale >= 1.0 && value * scale < 1e15) return static_cast<std::int64_t>(value * scale);
    // A size, but outside what a shard can be: the bound named, not "not a size".
    throw_input_error("zerotrain ckpt export: {} must be from 1 byte to below 1e15 bytes (got '{}')", flag, text);
  }
  throw_input_error(
      "zerotrain ckpt export: {} must be a size such as 5GB, 500MB or 64KiB, in B, KB, MB, GB, KiB, MiB or GiB (got "
      "'{}')",
      flag, text);
}

DType export_dtype(const ArgParser& parser) {
  const std::string d = parser.get("dtype", "f32");
  if (d == "f32" || d == "fp32" || d == "float32") return DType::kF32;
  if (d == "bf16" || d == "bfloat16") return DType::kBF16;
  throw_input_error("zerotrain ckpt export: --dtype must be f32 or bf16 (got '{}')", d);
}

}  // namespace

namespace {

int run_action(const std::string& action, const std::string& path, const ArgParser& parser) {
  if (action == "inspect") return inspect(path);
  if (action == "verify") {
    const std::string target = ckpt::checkpoint_to_verify(path);
    if (target != path && std::filesystem::exists(std::filesystem::path(path) / ckpt::kLatestName) &&
        ckpt::read_latest(path).empty()) {  // as inspect, export and --resume say
      print_err("zerotrain ckpt: note: {}/{} is unreadable; verifying the newest checkpoint\n", path,
                ckpt::kLatestName);
    }
    std::string dir;
    try {
      dir = resolve(target, ckpt::Validation::kChecksums);
    } catch (const InputError& e) {
      if (target == path) throw;
      std::string fallback;  // what --resume latest would use instead
      try {
        fallback = ckpt::resolve_checkpoint(path, ckpt::Validation::kChecksums).path;
      } catch (const InputError&) {}
      throw_input_error(
          "{} (the checkpoint a resume from {} tries first; {})", e.what(), path,
          fallback.empty() ? "no older valid one either" : "--resume latest would fall back to " + fallback);
    }
    const ckpt::CheckpointReader reader(dir);
    fmt::print("ok: {} (step {}, {} files, checksums match)\n", dir, reader.manifest().position.step,
               reader.manifest().files.size());
    // Files the manifest does not list are no part of it (a rank file copied in from another
    // checkpoint): named, so "ok" is not read as covering them.
    std::set<std::string> listed = {std::string(ckpt::kManifestName)};
    for (const ckpt::RankFile& f : reader.manifest().files) listed.insert(f.name);
    std::vector<std::string> others;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (!listed.contains(e.path().filename().string())) others.push_back(e.path().filename().string());
    }
    std::sort(others.begin(), others.end());
    if (!others.empty()) {
      print_err("zerotrain ckpt: note: {} also holds {}, which its manifest does not list (not verified, never read)\n",
                dir, fmt::join(others, ", "));
    }
    return 0;
  }
  const std::string format = parser.get("format");
  if (format != "hf" && format != "llmc") {
    throw_input_error("zerotrain ckpt export: --format must be hf or llmc (got '{}')", format);
  }
  const DType dtype = export_dtype(parser);
  const std::string out = parser.get("out");                     // never empty (ArgParser refuses an empty path)
  if (format == "llmc" && std::filesystem::is_directory(out)) {  // before any tensor is read or written
    throw_input_error("zerotrain ckpt export: --out {} is a directory; llm.c's model is one file (e.g. --out {})", out,
                      (std::filesystem::path(out) / "model.bin").string());
  }
  if (format == "hf") refuse_run_directory(out);
  if (format == "llmc" && parser.has("max-shard-size")) {
    throw_input_error("zerotrain ckpt export: --max-shard-size applies to --format hf (llm.c's model is one file)");
  }
  const ckpt::CheckpointReader reader(resolve(path, ckpt::Validation::kChecksumsToChoose));
  refuse_out_over_inputs(out, reader.dir(), format);
  if (format == "hf") {
    std::string moved;  // where the checkpoint's vocabulary is no longer its run directory's
    const std::string text_dir = checkpoint_text_dir(
        ckpt::run_directory_of(reader.dir(), reader.manifest()), reader.dir(),
        reader.manifest().extra.value("data_identity", nlohmann::json()), reader.manifest().config, moved);
    if (!moved.empty()) print_err("zerotrain ckpt: note: {}\n", moved);
    const ckpt::HfExport e = ckpt::export_hf(
        reader, out, dtype, parse_size(parser.get("max-shard-size", "5GB"), "--max-shard-size"), text_dir);
    fmt::print(
        "wrote {}/config.json and {} ({}){} from step {}\n", out,
        e.files.size() == 1 ? e.files[0] : fmt::format("{} shards with model.safetensors.index.json", e.files.size()),
        format_bytes(e.total_bytes),
        e.tokenizer_files.empty() ? ""
        : e.tokenizer_from_vocab  ? fmt::format(", and the run's vocabulary as {}", fmt::join(e.tokenizer_files, ", "))
                                  : fmt::format(", and the run's {}", fmt::join(e.tokenizer_files, ", ")),
        reader.manifest().position.step);
    const std::string no_tokenizer =
        e.run_dir.empty() ? fmt::format("the run directory {} that saved the checkpoint no longer exists",
                                        ckpt::extra_string(reader.manifest().extra, "run_dir"))
                          : fmt::format("no tokenizer.json or vocab.json in the run directory {}", e.run_dir);
    if (e.tokenizer_files.empty() && e.kept_tokenizer_files.empty()) {
      // AutoTokenizer.from_pretrained(out) would fail: said, not left to find.
      print_err("zerotrain ckpt: note: {}: the folder has no tokenizer (put the model's tokenizer files there)\n",
                no_tokenizer);
    } else if (!e.kept_tokenizer_files.empty()) {
      print_err(
          "zerotrain ckpt: note: {}/{} {} not this export's (yours, or an older export's), kept: check {} this "
          "model's tokenizer{}\n",
          out, fmt::join(e.kept_tokenizer_files, ", " + out + "/"), e.kept_tokenizer_files.size() == 1 ? "is" : "are",
          e.kept_tokenizer_files.size() == 1 ? "it is" : "they are",
          e.tokenizer_files.empty() ? fmt::format(" ({})", no_tokenizer) : "");
    }
  } else {
    ckpt::export_llmc(reader, out, dtype);
    fmt::print("wrote {} ({}, llm.c version {}) from step {}\n", out,
               format_bytes(static_cast<std::int64_t>(std::filesystem::file_size(out))), dtype == DType::kF32 ? 3 : 5,
               reader.manifest().position.step);
  }
  // A bf16-parameter run computed (and evaluated) with its masters rounded to bf16: the fp32 export
  // holds the masters, whose losses differ from the run's logged ones in the last digits
  // (DeepSpeed's zero_to_fp32 exports masters too).
  if (reader.manifest().param_dtype == "bf16" && dtype == DType::kF32) {
    print_err(
        "zerotrain ckpt: note: the run computed with bf16 working weights (precision.param_dtype); this export "
        "holds its fp32 master weights, whose losses differ slightly from the run's logged ones: --dtype bf16 "
        "exports the weights it computed with\n");
  }
  return 0;
}

}  // namespace

int ckpt_main(const std::vector<std::string>& args) {
  remove_partial_outputs_on_signal();  // an export stopped by Ctrl-C leaves no .tmp behind
  if (args.empty()) {                  // one line, as every command's missing argument
    throw_input_error("zerotrain ckpt: missing action (inspect, verify or export; see 'zerotrain ckpt --help')");
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::fputs(kCkptUsage, stdout);
    return 0;
  }
  const std::string action = args[0];
  if (action != "inspect" && action != "verify" && action != "export") {
    throw_input_error("zerotrain ckpt: unknown action '{}' (inspect, verify or export)", action);
  }
  ArgParser parser("ckpt " + action, "See 'zerotrain ckpt --help'.");
  if (action == "export") {
    parser.value_flag("format", "hf|llmc", "output format", true)
        .value_flag("out", "PATH", "output folder (hf) or file (llmc)", true)
        .value_flag("dtype", "f32|bf16", "tensor dtype (default f32)")
        .value_flag("max-shard-size", "SIZE",
                    "hf: safetensors shards of at most SIZE (5GB, 500MB, 64KiB; default 5GB)");
  }
  // PATH before, between or after the flags, as every other command takes its arguments: the one
  // argument that is neither a flag nor a value flag's value. --help anywhere asks for help (also
  // where a value flag would take it for its value); the flags are parsed before the PATHs are
  // counted, so a misspelt flag is named rather than its value taken for a second PATH.
  if (std::any_of(args.begin() + 1, args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    fmt::print("{}", kCkptUsage);
    return 0;
  }
  const std::set<std::string> value_flags = {"--format", "--out", "--dtype", "--max-shard-size"};
  std::vector<std::string> flags, paths;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i].starts_with("--")) {
      flags.push_back(args[i]);
      if (action == "export" && value_flags.count(args[i]) > 0 && i + 1 < args.size()) flags.push_back(args[++i]);
      continue;
    }
    paths.push_back(args[i]);
  }
  if (!parser.parse(flags)) {
    fmt::print("{}", kCkptUsage);
    return 0;
  }
  if (paths.empty()) throw_input_error("zerotrain ckpt {}: missing PATH (a checkpoint directory or folder)", action);
  if (paths.size() > 1) {
    throw_input_error("zerotrain ckpt {}: one PATH, got '{}' and '{}'", action, paths[0], paths[1]);
  }
  const std::string path = paths.front();
  // A live run's folder: the action starts over where the checkpoint it read went meanwhile.
  int status = 0;
  ckpt::read_while_folder_changes(
      path, [&] { status = run_action(action, path, parser); },
      [](const std::string& changed) { print_err("zerotrain ckpt: note: {}: reading the folder again\n", changed); });
  return status;
}

}  // namespace zt::cli
