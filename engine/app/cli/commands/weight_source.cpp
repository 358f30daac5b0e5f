// Where a standalone model's weights come from (see the header).
#include "engine/app/cli/commands/weight_source.h"

#include <fmt/format.h>

#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <vector>

#include "engine/app/checkpoint/checkpoint_export.h"
#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/checkpoint/checkpoint_resolution.h"
#include "engine/app/checkpoint/folder_lock.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/config/run_config.h"
#include "engine/app/config/train_section.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/json_file.h"
#include "engine/app/io/pretrained.h"
#include "engine/app/io/safetensors.h"
#include "engine/app/io/weights_location.h"
#include "engine/app/trainer/checkpoint_vocabulary.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"
#include "engine/distributed/launch/rendezvous.h"

namespace zt::cli {

namespace fs = std::filesystem;

namespace {

// The values write_final_weights records in the file's metadata as JSON text (the data identity,
// the run's config), by key, parsed from one read of the header; a key it records none of (written
// before it did), or a header that cannot be read (the load says why), is absent.
nlohmann::json final_weights_metadata(const std::string& path) {
  nlohmann::json recorded = nlohmann::json::object();
  try {
    const nlohmann::json meta = read_safetensors_header(path).json.value("__metadata__", nlohmann::json::object());
    if (!meta.is_object()) return recorded;
    for (auto it = meta.begin(); it != meta.end(); ++it) {
      if (!it->is_string()) continue;
      nlohmann::json value = nlohmann::json::parse(it->get<std::string>(), nullptr, false);
      if (!value.is_discarded()) recorded[it.key()] = std::move(value);
    }
  } catch (const std::exception&) {}
  return recorded;
}

}  // namespace

void add_weight_flags(ArgParser& parser, const std::string& what) {
  parser.value_flag("run", "DIR", "run directory written by 'zerotrain train': its final weights")
      .value_flag("ckpt", "PATH", "a checkpoint directory, or a checkpoint folder (its latest valid checkpoint)")
      .value_flag("from", "PATH", "pretrained weights: a Hugging Face folder or an llm.c model file")
      .value_flag("device", "DEV", "cpu or cuda (the first GPU, or under mpirun its local rank's; default cpu)")
      .value_flag("dtype", "D",
                  fmt::format("f32 (fp32) or bf16: the activations {} (default f32); the weights stay in the run's or "
                              "checkpoint's parameter dtype, pretrained ones go to bf16 with bf16",
                              what))
      .value_flag(
          "threads", "N",
          "CPU threads, per process (default: OMP_NUM_THREADS, else the cores other processes' runnable threads "
          "leave idle, at least 1: threads past "
          "them spin-wait on cores another process, a training run, holds)");
}

namespace {

// An eos_token_id's ids (an integer, or a list of them) inside the model's vocabulary, in order.
std::vector<std::int32_t> vocabulary_ids(const nlohmann::json& eos, std::int64_t vocab_size) {
  std::vector<std::int32_t> ids;
  for (const nlohmann::json& id : eos.is_array() ? eos : nlohmann::json::array({eos})) {
    if (id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() < vocab_size) {
      ids.push_back(id.get<std::int32_t>());
    }
  }
  return ids;
}

std::vector<std::int32_t> run_end_of_text_ids(const std::string& run_dir, const nlohmann::json& carried,
                                              std::int64_t vocab_size) {
  return vocabulary_ids(ckpt::run_special_token_ids(run_dir, carried).value("eos_token_id", nlohmann::json()),
                        vocab_size);
}

// A pretrained folder's: generation_config.json's eos_token_id before config.json's, as
// from_pretrained sets the generation config (read_pretrained_model).
std::vector<std::int32_t> pretrained_end_of_text_ids(const std::string& path, std::int64_t vocab_size) {
  if (!fs::is_directory(path)) return {};  // an llm.c model file names none
  return vocabulary_ids(read_pretrained_model(path).special_token_ids.value("eos_token_id", nlohmann::json()),
                        vocab_size);
}

}  // namespace

// The run's model; its config's device and precision keys aside (the flags choose them).
// Its model keys are all in its config: train.init_from's folder is not needed. Its optimizer
// plays no part: its section is left out, so a run whose optimizer values this build refuses
// (optim.eps = 0, which builds before 2026-12-03 took) can still be sampled and evaluated. Nor
// does its batch: a global batch kept as given (RunConfig::run_file_json) need not divide into
// micro-batches of one process.
RunConfig saved_run_config(nlohmann::json doc, const std::string& source) {
  // The micro-batch as the run ran it, also where it was derived ("derived" names it, and its
  // terms go below): an evaluation's windows follow it (the default 4 scored others).
  const nlohmann::json micro_batch = doc.is_object() && doc.contains("train") && doc["train"].is_object()
                                         ? doc["train"].value("micro_batch", nlohmann::json())
                                         : nlohmann::json();
  take_derived_out(doc, source);
  if (doc.is_object()) doc.erase("optim");
  // Nor its attention kernels' choice: the flags choose the device and dtype, and a "cudnn" that
  // this build refuses for the run's shape (a rule newer than the run) must not refuse its weights.
  if (doc.is_object() && doc.contains("precision") && doc["precision"].is_object()) {
    doc["precision"].erase("attention");
  }
  if (doc.is_object() && doc.contains("train") && doc["train"].is_object()) {
    doc["train"].erase("grad_accum");
    doc["train"].erase("global_batch_tokens");
    if (!micro_batch.is_null()) doc["train"]["micro_batch"] = micro_batch;
  }
  return parse_run_config(std::move(doc), source, 1, nullptr,
                          [](const RunConfig&) { return nlohmann::json::object(); });
}

namespace {

// Which flag reads a file given where a folder belongs: one inside a run directory (its config.json,
// final.safetensors), a checkpoint (its manifest.json, a rank's shard) or a Hugging Face folder
// names the folder; a lone safetensors file, the folder that should hold it; anything else may be
// an llm.c model file, which --from reads.
std::string file_advice(const std::string& path) {
  const std::string parent = fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : ".";
  const WeightsAt parent_at = weights_at(parent);
  switch (parent_at) {
    case WeightsAt::kRunDirectory: return fmt::format(" (it is in the run directory {}: --run {})", parent, parent);
    case WeightsAt::kHuggingFaceFolder:
      return fmt::format(" (it is in the Hugging Face folder {}: --from {})", parent, parent);
    case WeightsAt::kCheckpoint:
    case WeightsAt::kCheckpointFolder:
      return fmt::format(" (it is in {} {}: --ckpt {})", weights_at_name(parent_at), parent, parent);
    default: break;
  }
  if (fs::path(path).extension() == ".safetensors") {
    return " (a Hugging Face folder holds it beside its config.json: --from that folder)";
  }
  return fmt::format(" (--from {} reads an llm.c model file)", path);
}

}  // namespace

WeightSource resolve_weight_source(const ArgParser& parser, const std::string& command, const std::string& checkpoint) {
  if (static_cast<int>(parser.has("run")) + static_cast<int>(parser.has("ckpt")) +
          static_cast<int>(parser.has("from")) !=
      1) {
    throw_input_error("zerotrain {}: give exactly one of --run, --ckpt and --from", command);
  }
  WeightSource s;
  const std::string device = parser.get("device", "cpu"), dtype = parser.get("dtype", "f32");
  if (device != "cpu" && device != "cuda") {
    throw_input_error("zerotrain {}: --device must be cpu or cuda (got '{}')", command, device);
  }
  // Each dtype as the config keys and ckpt export's --dtype spell it.
  const bool f32 = dtype == "f32" || dtype == "fp32" || dtype == "float32";
  if (!f32 && dtype != "bf16" && dtype != "bfloat16") {
    throw_input_error("zerotrain {}: --dtype must be f32 (fp32) or bf16 (got '{}')", command, dtype);
  }
  s.device = device == "cuda" ? Device::kCUDA : Device::kCPU;
  s.device_index = s.device == Device::kCUDA ? cuda_device_for_local_rank(detect_launch().local_rank) : 0;
  s.activations = f32 ? DType::kF32 : DType::kBF16;
  s.num_threads = omp_get_num_procs();
  if (parser.has("ckpt")) {
    // The model from the manifest, whatever the number of ranks and stage that saved it (its units:
    // e.g. its token table in as many chunk units as its run's head had).
    // A live run's folder: its keep_last may delete the newest checkpoint between its choice and the
    // reader's shared hold on it, which then keeps it until the model is loaded.
    const std::string folder = checkpoint.empty() ? parser.get("ckpt") : checkpoint;
    if (weights_at(folder) == WeightsAt::kFile) {
      throw_input_error("zerotrain {}: --ckpt {}: a file, not a checkpoint or checkpoint folder{}", command, folder,
                        file_advice(folder));
    }
    ckpt::read_while_folder_changes(
        folder,
        [&] {
          const ckpt::ResolvedCheckpoint resolved =
              ckpt::resolve_checkpoint(folder, ckpt::Validation::kChecksumsToChoose);
          s.checkpoint = std::make_shared<const ckpt::CheckpointReader>(resolved.path);
          for (const std::string& note : resolved.notes) {
            s.notes.push_back(fmt::format("zerotrain {}: {}", command, note));
          }
          s.path = resolved.path;
        },
        [&](const std::string& changed) {
          s.notes.push_back(fmt::format("zerotrain {}: note: {}: read the folder again", command, changed));
        });
    s.kind = WeightSource::Kind::kCheckpoint;
    const ckpt::CheckpointReader& reader = *s.checkpoint;
    // A folder named: which of its checkpoints eval scores (its stdout names no step, and a live
    // run's folder holds another newest each time).
    if (std::error_code ec; command == "eval" && !fs::equivalent(folder, s.path, ec)) {
      s.notes.push_back(fmt::format("zerotrain eval: --ckpt {}: {} (after step {})", folder, s.path,
                                    reader.manifest().position.step));
    }
    s.spec = ckpt::model_spec_of(reader);
    // The run's working parameters: its fp32 masters rounded where it held bf16 ones, as it did.
    s.param_dtype = reader.manifest().param_dtype == "bf16" ? DType::kBF16 : DType::kF32;
    s.saved_config = reader.manifest().config;
    s.saved_data_identity = reader.manifest().extra.value("data_identity", nlohmann::json());
    // As for --run: the positions its run trained (train.seq_len), where its config records them.
    const nlohmann::json seq_len =
        reader.manifest().config.value("train", nlohmann::json::object()).value("seq_len", nlohmann::json());
    s.context = seq_len.is_number_integer() && seq_len.get<std::int64_t>() >= 1 &&
                        seq_len.get<std::int64_t>() <= s.spec.block_size()
                    ? seq_len.get<int>()
                    : s.spec.block_size();
    // The run's tokenizer and end of text, in its directory (beside its checkpoint folder, or
    // where the manifest records it).
    std::string moved;  // where the checkpoint's vocabulary is no longer its run directory's
    // eval reads no vocabulary; sample's --tokenizer or --vocab names the one it reads.
    const bool text_read = command == "sample" && !parser.has("tokenizer") && !parser.has("vocab");
    const std::string run_dir = ckpt::run_directory_of(s.path, reader.manifest());
    s.text_dir = text_read ? checkpoint_text_dir(run_dir, reader.dir(),
                                                 reader.manifest().extra.value("data_identity", nlohmann::json()),
                                                 reader.manifest().config, moved)
                           : run_dir;
    if (!moved.empty()) s.notes.push_back(fmt::format("zerotrain {}: note: {}", command, moved));
    if (s.text_dir.empty() && command == "sample") {
      s.notes.push_back(fmt::format("zerotrain sample: the run directory {} that saved the checkpoint no longer exists",
                                    ckpt::extra_string(reader.manifest().extra, "run_dir")));
    }
    if (command == "sample") {
      s.end_of_text_ids = run_end_of_text_ids(
          s.text_dir, ckpt::extra_object(reader.manifest().extra, "special_token_ids"), s.spec.vocab_size());
    }
    return s;
  }
  if (parser.has("from")) {  // as train.init_from reads it
    s.kind = WeightSource::Kind::kPretrained;
    s.path = parser.get("from");
    std::error_code ec;
    if (!fs::exists(s.path, ec)) {  // named as the flag it is, not as train.init_from, which the user never set
      // Another fault than absence (a loop of symlinks, a folder above it unreadable) said as it is.
      throw_input_error("zerotrain {}: --from {}: {}", command, s.path,
                        ec && ec != std::errc::no_such_file_or_directory
                            ? fmt::format("cannot be read: {}", ec.message())
                            : std::string("no such Hugging Face folder or llm.c model file"));
    }
    // The reader's refusal named by the flag: through the config below it would be a "config
    // error" in train.init_from, which the user never set.
    try {
      static_cast<void>(read_pretrained_model(s.path));
    } catch (const InputError& e) {
      throw_input_error("zerotrain {}: --from {}", command, e.what());
    }
    const nlohmann::json doc = {{"model", nlohmann::json::object()}, {"train", {{"init_from", s.path}}}};
    const RunConfig cfg = parse_run_config(doc, "--from " + s.path, 1);
    s.spec = cfg.model_spec();
    s.param_dtype = s.activations;  // no run's precision to keep: bf16 activations read bf16 weights as they are
    s.context = cfg.model.block_size;
    s.text_dir = fs::is_directory(s.path) ? s.path : "";
    if (command == "sample") s.end_of_text_ids = pretrained_end_of_text_ids(s.path, s.spec.vocab_size());
    return s;
  }
  s.kind = WeightSource::Kind::kRun;
  s.path = parser.get("run");
  const fs::path dir(s.path);
  // A run training in the directory now: its config.json is already that run's, and its final
  // weights come at its end (a final.safetensors there is an earlier run's, for another config).
  if (const std::string holder = ckpt::live_holder((dir / "RUN_LOCK").string()); !holder.empty()) {
    throw_input_error(
        "zerotrain {}: {} is being trained now, by {}: its final weights come at the run's end{}; use its latest "
        "checkpoint: --ckpt and its checkpoint folder",
        command, dir.string(), holder,
        fs::exists(dir / "final.safetensors") ? " (the final.safetensors there now is an earlier run's)" : "");
  }
  // Weights another flag reads: named with it (it said "has no final.safetensors").
  switch (const WeightsAt at = weights_at(s.path)) {
    case WeightsAt::kCheckpoint:
    case WeightsAt::kCheckpointFolder:
      throw_input_error("zerotrain {}: --run {}: {}, not a run directory: --ckpt {} reads it", command, s.path,
                        weights_at_name(at), s.path);
    case WeightsAt::kHuggingFaceFolder:
      throw_input_error("zerotrain {}: --run {}: a Hugging Face folder, not a run directory: --from {} reads it",
                        command, s.path, s.path);
    case WeightsAt::kFile:
      throw_input_error("zerotrain {}: --run {}: a file, not a run directory{}", command, s.path, file_advice(s.path));
    case WeightsAt::kRunDirectory:
    case WeightsAt::kNothingKnown: break;
  }
  if (!fs::is_directory(dir)) throw_input_error("zerotrain {}: --run {}: no such run directory", command, s.path);
  for (const char* f : {"config.json", "final.safetensors"}) {
    if (fs::exists(dir / f)) continue;
    // A run stopped before its end (a signal, a kill) wrote no final weights, but its checkpoints;
    // so does one whose config asked for none.
    const bool final_weights = std::string_view(f) == "final.safetensors";
    const bool checkpoints = final_weights && fs::exists(dir / "checkpoints" / "latest");
    const nlohmann::json config =
        final_weights ? nlohmann::json::parse(read_whole_input((dir / "config.json").string(), "--run"), nullptr,
                                              /*allow_exceptions=*/false)
                      : nlohmann::json();
    const bool none_asked = final_weights && config.is_object() && config.contains("log") &&
                            config["log"].is_object() && config["log"].value("final_weights", true) == false;
    const std::string why = none_asked ? "its config sets log.final_weights = false" : "it stopped before its end?";
    throw_input_error("zerotrain {}: {} has no {}{}", command, dir.string(), f,
                      checkpoints
                          ? fmt::format(" ({}: use its checkpoint, --ckpt {})", why, (dir / "checkpoints").string())
                      : none_asked ? fmt::format(" ({})", why)
                                   : "");
  }
  const std::string config_path = (dir / "config.json").string();
  s.saved_config = read_json_file(config_path);
  const std::string weights = (dir / "final.safetensors").string();
  const nlohmann::json recorded = final_weights_metadata(weights);
  const nlohmann::json identity = recorded.value("data_identity", nlohmann::json());
  if (!identity.is_null() &&
      (!identity.is_array() || !std::all_of(identity.begin(), identity.end(), ckpt::is_data_file_entry))) {
    throw_input_error("zerotrain {}: {}: its data_identity is {}, not a list of files (path, bytes, fingerprint)",
                      command, weights, identity.dump().substr(0, 200));
  }
  s.saved_data_identity = identity;
  const RunConfig cfg = saved_run_config(s.saved_config, config_path);
  // The model config.json describes is the one final.safetensors was trained as (its metadata keeps
  // the run's config): a config.json edited since, or written by a later run in the directory that
  // stopped before its end, computed another model from the weights, whose shapes still fit, in
  // silence (another norm_eps, rope_theta or head count). Compared as the model computes (a
  // checkpoint's model keys: not dropout, which a resume may change), where this build reads the
  // recorded config.
  std::optional<RunConfig> as_trained;
  if (const nlohmann::json trained = recorded.value("run_config", nlohmann::json()); trained.is_object()) {
    try {
      as_trained = saved_run_config(trained, weights);
    } catch (const std::exception&) {  // another build's config: the weights' shapes are still checked
    }
  }
  if (as_trained) {
    const nlohmann::json now = ckpt::model_json(cfg.model_spec()), then = ckpt::model_json(as_trained->model_spec());
    if (const std::vector<std::string> keys = ckpt::differing_model_keys(then, now); !keys.empty()) {
      const std::string& key = keys.front();
      const auto shown = [&](const nlohmann::json& m) { return m.contains(key) ? m[key].dump() : "absent"; };
      throw_input_error(
          "zerotrain {}: {} says model.{} = {}, but its final.safetensors was trained with {} (config.json edited "
          "since, or written by a later run in the directory that stopped before its end): --ckpt reads a checkpoint "
          "whole",
          command, config_path, key, shown(now), shown(then));
    }
  }
  s.spec = cfg.model_spec();
  s.spec.layout = {};  // the weights file holds whole tensors, so any unit layout reads it: the default one
  s.param_dtype = cfg.param_dtype;
  s.context = cfg.train.seq_len;
  s.num_threads = omp_get_num_procs();  // not the run's training threads, a rank's share of its node
  s.text_dir = s.path;
  if (command != "sample") return s;
  // What its checkpoints carry of the model it started from (a final.safetensors carries nothing),
  // as sample --ckpt and ckpt export read it: the newest checkpoint's. Not train.init_from again:
  // its config keeps the path as given, relative to where the run started, so read from elsewhere
  // it named no folder or another model's.
  nlohmann::json carried = nlohmann::json::object();
  if (!cfg.train.init_from.empty()) {
    try {
      const ckpt::ResolvedCheckpoint newest =
          ckpt::resolve_checkpoint(cfg.checkpoint.folder_for(s.path), ckpt::Validation::kStructure);
      carried = ckpt::extra_object(ckpt::CheckpointReader(newest.path).manifest().extra, "special_token_ids");
    } catch (const InputError&) {  // none saved: the run's tokenizer alone
    }
  }
  s.end_of_text_ids = run_end_of_text_ids(s.path, carried, s.spec.vocab_size());
  return s;
}

}  // namespace zt::cli
