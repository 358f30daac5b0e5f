// The planner's step-time model (see the header).
#include "engine/app/plan/step_time_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "engine/app/config/config_limits.h"
#include "engine/app/config/model_section.h"
#include "engine/app/io/json_file.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/app/trainer/store_comm.h"
#include "engine/base/core/check.h"
#include "models/model_family.h"

namespace zt::plan {

namespace fs = std::filesystem;

namespace {

// What an op's time grows with.
enum class OpClass { kLinear, kAttention, kVocab, kMlpActivation, kElementwise, kOptimizer };

OpClass op_class(const std::string& op) {
  if (op.starts_with("matmul")) return OpClass::kLinear;
  if (op.starts_with("gelu") || op.starts_with("swiglu")) return OpClass::kMlpActivation;  // over the MLP's width
  if (op.find("attention") != std::string::npos) return OpClass::kAttention;
  if (op.find("cross_entropy") != std::string::npos) return OpClass::kVocab;
  if (op.starts_with("adamw") || op.starts_with("sum_of_squares") || op == "cast" || op == "accumulate_into" ||
      op == "fill_zero" || op == "copy" || op.find("int8") != std::string::npos || op == "scale") {
    return OpClass::kOptimizer;  // the parameters' and gradients' own work, once per step
  }
  return OpClass::kElementwise;
}

// The forward ops a checkpointed block runs again in backward (their names: "..._forward").
bool block_forward_op(const std::string& op) {
  return op.ends_with("_forward") && op.find("embedding") == std::string::npos &&
         op.find("cross_entropy") == std::string::npos;
}
// The cheap ones selective checkpointing recomputes (the norms, GELU or SwiGLU).
bool selective_op(const std::string& op) {
  return op == "layernorm_forward" || op == "rmsnorm_forward" || op == "gelu_forward" || op == "swiglu_forward";
}

struct Shape {
  // params: the weights a token meets in the matrix products; updated: every parameter the
  // optimizer steps (an untied token table, position table, norms and biases too).
  double params = 0, updated = 0, tokens = 0, seq = 0, width = 0, mlp_width = 0, layers = 0, vocab = 0,
         micro_batches = 1, optimizer_ranks = 1;
};

// The parts of a shape that are the model's: its family counts the weights a token meets in the
// matrix products (a GPT block's 12 C^2, a Llama block's with its grouped keys and values and
// SwiGLU width, each with the head's V C) and the MLP's width, so a profile of one family scales to
// another.
Shape model_shape(const ModelConfig& m) {
  const ModelFamily& family = model_family(m.arch);
  Shape s;
  s.params = family.matmul_weights_per_token(m);
  s.updated = static_cast<double>(build_param_table(ModelSpec{m, UnitLayout{}}).total_numel());
  s.width = m.n_embd;
  s.mlp_width = family.mlp_width(m);
  s.layers = m.n_layer;
  s.vocab = m.padded_vocab_size();
  return s;
}

double work(OpClass c, const Shape& s) {
  switch (c) {
    case OpClass::kLinear: return s.params * s.tokens;  // every weight used once per token (the head's tied)
    case OpClass::kAttention: return s.tokens * s.seq * s.width * s.layers;
    case OpClass::kVocab: return s.tokens * s.vocab;
    case OpClass::kMlpActivation: return s.tokens * s.mlp_width * s.layers;
    case OpClass::kElementwise: return s.tokens * s.width * s.layers;
    case OpClass::kOptimizer: return s.updated / s.optimizer_ranks;
  }
  return 0;
}

}  // namespace

namespace {

OpProfile load_op_profile_or_throw(const std::string& path) {
  nlohmann::json config, profile, machine;
  if (fs::is_directory(path)) {
    config = read_json_file((fs::path(path) / "config.json").string(), "--profile");
    profile = read_json_file((fs::path(path) / "op_profile.json").string(), "--profile");
  } else {
    const nlohmann::json doc = read_json_file(path, "--profile");
    if (!doc.contains("config") || !doc.contains("op_profile")) {
      throw_input_error(
          "--profile: {} holds no \"config\" and \"op_profile\" (give a run directory with op_profile.json)", path);
    }
    config = doc["config"];
    profile = doc["op_profile"];
    machine = doc.value("machine", nlohmann::json());
  }
  // Each field as a run writes it, else named: a count out of its range (micro_batch 0 made a step
  // of hours), a negative or infinite time (ranked a negative step first), another type.
  const auto object = [&](const nlohmann::json& doc, const char* where) -> const nlohmann::json& {
    if (!doc.is_object()) throw_input_error("--profile: {}: {} is {}, not an object", path, where, doc.dump());
    return doc;
  };
  const auto count = [&](const nlohmann::json& section, const char* where, const char* key, long long fallback,
                         long long least, long long most) {
    if (!section.contains(key)) return fallback;
    const nlohmann::json& v = section[key];
    if (!v.is_number_integer() || v.get<long long>() < least || v.get<long long>() > most) {
      throw_input_error("--profile: {}: {}.{} is {}, not an integer in [{}, {}]", path, where, key, v.dump(), least,
                        most);
    }
    return v.get<long long>();
  };
  const auto section = [&](const nlohmann::json& doc, const char* key) {
    return doc.contains(key) ? object(doc[key], key) : nlohmann::json::object();
  };
  object(config, "config");
  object(profile, "op_profile");
  OpProfile p;
  p.source = path;
  if (profile.contains("device") && !profile["device"].is_string()) {
    throw_input_error("--profile: {}: op_profile.device is {}, not a string", path, profile["device"].dump());
  }
  p.device = profile.value("device", std::string("?"));
  if (!machine.is_null() && !machine.is_string()) {
    throw_input_error("--profile: {}: machine is {}, not a string", path, machine.dump());
  }
  // Printed in plan's note: one line, ASCII control characters as '?', at most 300 characters,
  // cut between two (a UTF-8 sequence cut in two was no JSON for --json to print).
  int characters = 0;
  for (const char ch : machine.is_string() ? machine.get<std::string>() : std::string()) {
    const auto byte = static_cast<unsigned char>(ch);
    const bool continues = (byte & 0xC0) == 0x80;  // a UTF-8 sequence's later byte
    if (!continues && ++characters > 300) break;
    p.machine += byte < 0x20 || byte == 0x7f ? '?' : ch;
  }
  if (p.device.starts_with("cpu")) {  // "cpu (2 threads)"; another form: threads unknown (0)
    const std::size_t open = p.device.find('(');
    long long threads = 0;
    if (open != std::string::npos) {
      const char* first = p.device.c_str() + open + 1;
      const std::from_chars_result parsed = std::from_chars(first, p.device.c_str() + p.device.size(), threads);
      if (parsed.ec == std::errc() && (threads < 1 || threads > (1 << 16))) {
        throw_input_error("--profile: {}: op_profile.device \"{}\" names {} threads", path, p.device, threads);
      }
      if (parsed.ec == std::errc::result_out_of_range) {
        throw_input_error("--profile: {}: op_profile.device \"{}\" names too many threads", path, p.device);
      }
      if (parsed.ec != std::errc()) threads = 0;
    }
    p.threads = static_cast<int>(threads);
  }
  // The model section read as a config's (its family's own keys too: a Llama's SwiGLU width and
  // key/value heads), its errors naming the file.
  const nlohmann::json model_section = section(config, "model");
  RunConfig profiled;
  read_model_section(ConfigReader(model_section, path, "model"), profiled);
  p.model = profiled.model;
  const nlohmann::json t = section(config, "train");
  const long long seq_len = count(t, "train", "seq_len", 0, 0, kMaxConfigDim);
  p.seq_len = seq_len > 0 ? static_cast<int>(seq_len) : p.model.block_size;
  p.tokens = count(t, "train", "micro_batch", 4, 1, kMaxConfigDim) * p.seq_len;
  p.micro_batches = static_cast<int>(count(profile, "op_profile", "micro_batches_per_step", 1, 1, kMaxConfigGradAccum));
  const nlohmann::json z = section(config, "zero");
  p.optimizer_ranks = count(z, "zero", "stage", 0, 0, 3) >= 1
                          ? static_cast<int>(count(profile, "op_profile", "ranks", 1, 1, kMaxPredictedRanks))
                          : 1;
  const nlohmann::json ops = profile.contains("ops") ? profile["ops"] : nlohmann::json::array();
  if (!ops.is_array()) throw_input_error("--profile: {}: op_profile.ops is {}, not a list", path, ops.dump());
  for (const nlohmann::json& op : ops) {
    const nlohmann::json ms = op.is_object() && op.contains("ms_per_step") ? op["ms_per_step"] : nlohmann::json();
    if (!op.is_object() || !op.contains("op") || !op["op"].is_string() || !ms.is_number() ||
        !std::isfinite(ms.get<double>()) || ms.get<double>() < 0.0 || ms.get<double>() > 1e9) {
      throw_input_error("--profile: {}: op {} is not {{\"op\": name, \"ms_per_step\": milliseconds in [0, 1e9]}}", path,
                        op.dump());
    }
    p.ms_per_step[op["op"].get<std::string>()] = ms.get<double>();
  }
  if (p.ms_per_step.empty()) throw_input_error("--profile: {} lists no ops", path);
  return p;
}

}  // namespace

OpProfile load_op_profile(const std::string& path) {
  try {
    return load_op_profile_or_throw(path);
  } catch (const nlohmann::json::exception& e) {  // a field of another type than a run writes
    throw_input_error("--profile: {} is not an op profile a run wrote ({})", path, e.what());
  }
}

StepTime estimate_step_time(const OpProfile& profile, const RunConfig& c, int world_size, const Links& links) {
  Shape from = model_shape(profile.model);
  from.tokens = static_cast<double>(profile.tokens);
  from.seq = profile.seq_len;
  from.micro_batches = profile.micro_batches;
  from.optimizer_ranks = profile.optimizer_ranks;
  const StoreCommChoice choice = store_comm_choice(c, world_size);
  Shape to = model_shape(c.model);
  to.tokens = static_cast<double>(c.train.micro_batch) * c.train.seq_len;
  to.seq = c.train.seq_len;
  to.micro_batches = c.train.grad_accum;
  to.optimizer_ranks = c.zero.stage >= 1 ? choice.group_size : 1;
  const CheckpointPolicy& ckpt = c.train.activation_checkpointing;
  int checkpointed = 0;
  for (int b = 0; b < c.model.n_layer; ++b) checkpointed += ckpt.is_checkpointed(b) ? 1 : 0;
  const double recomputed_blocks = static_cast<double>(checkpointed) / c.model.n_layer;
  // Of the linear work: the head's logits. None for a family without matrix products (a table
  // lookup: the toy family's 0 weights made it inf, and every estimate NaN).
  const double head_share = to.params > 0 ? std::min(1.0, to.vocab * to.width / to.params) : 0.0;
  StepTime t;
  for (const auto& [op, ms] : profile.ms_per_step) {
    const OpClass k = op_class(op);
    const bool per_step = k == OpClass::kOptimizer;
    // ms per micro-batch (per step for the optimizer's), scaled by the work, then per step.
    const double unit_ms = per_step ? ms : ms / from.micro_batches;
    double scaled = unit_ms * work(k, to) / std::max(work(k, from), 1.0);
    double extra = 0;
    if (block_forward_op(op)) {
      const double blocks_only = k == OpClass::kLinear ? 1.0 - head_share : 1.0;
      if (ckpt.selective()) {
        if (selective_op(op)) extra += scaled;
      } else {
        extra += scaled * blocks_only * recomputed_blocks;
      }
      if (k == OpClass::kLinear && c.train.head_chunks > 1) extra += scaled * head_share;  // the logits again
    }
    t.compute_s += (scaled + extra) * (per_step ? 1.0 : to.micro_batches) / 1000.0;
  }
  // CPU ranks on a shared machine: the threads a rank really gets, against the profile's.
  if (c.device == Device::kCPU && profile.threads > 0 && links.cores_per_node > 0) {
    const double threads =
        std::min(static_cast<double>(c.train.num_threads), links.cores_per_node / std::max(1, links.ranks_per_node));
    t.compute_s *= profile.threads / threads;
  }
  const StepVolume v = predict_run_volume(c, c.zero.stage, world_size);
  const int g = choice.group_size, groups = world_size / g;
  t.comm_s = static_cast<double>(v.collectives_in_group) * links.latency_s * (g - 1) +
             static_cast<double>(v.bytes_in_group) / links.bytes_per_s +
             static_cast<double>(v.collectives_across_groups) * links.across_latency_s * (groups - 1) +
             static_cast<double>(v.bytes_across_groups) / links.across_bytes_per_s;
  // With zero.overlap_comm, communication hides behind compute but for the gathers an acquire
  // waits for as soon as it issues them (stage 3 without prefetch: each unit's, before its compute
  // can start); without it, nothing overlaps.
  const double exposed_s = static_cast<double>(v.exposed_gathers) * links.latency_s * (g - 1) +
                           static_cast<double>(v.exposed_gather_bytes) / links.bytes_per_s;
  t.step_s = c.zero.overlap_comm ? exposed_s + std::max(t.compute_s, t.comm_s - exposed_s) : t.compute_s + t.comm_s;
  return t;
}

}  // namespace zt::plan
