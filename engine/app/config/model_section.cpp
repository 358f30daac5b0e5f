// The model section (see the header). A family's own keys are refused by name in another family's
// config, so a key of one family under another's model.arch says which arch it belongs to.
#include "engine/app/config/model_section.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/app/config/config_limits.h"
#include "engine/base/core/check.h"
#include "engine/base/core/float_text.h"
#include "kernels/contracts/dropout_spec.h"

namespace zt {

namespace {

// Keys of other registered families present in the section: an error naming the first one.
void refuse_foreign_keys(ConfigReader& r, const ModelFamily& family) {
  const std::vector<std::string> mine = family.own_keys();
  for (const std::string& name : model_family_names()) {
    if (name == family.name()) continue;
    const ModelFamily& other = model_family(name);
    for (const std::string& key : other.own_keys()) {
      if (!r.has(key) || std::find(mine.begin(), mine.end(), key) != mine.end()) continue;
      throw_input_error("config error in {}: {} is a {} key; set model.arch = \"{}\" or remove it", r.source_of(key),
                        r.dotted(key), other.display_name(), other.name());
    }
  }
}

}  // namespace

void read_model_section(ConfigReader r, RunConfig& c) {
  ModelConfig& m = c.model;
  for (const char* key : {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"}) {
    if (!r.has(key))
      throw_input_error("config error in {}: missing required key '{}'", r.section_sources(), r.dotted(key));
  }
  m.arch = r.get_enum("arch", std::string(kDefaultModelFamily), model_family_names());
  const ModelFamily& family = model_family(m.arch);
  m.n_layer = r.get_int("n_layer", m.n_layer, 1, kMaxConfigLayersOrHeads);
  m.n_head = r.get_int("n_head", m.n_head, 1, kMaxConfigLayersOrHeads);
  m.n_embd = r.get_int("n_embd", m.n_embd, 1, kMaxConfigDim);
  m.block_size = r.get_int("block_size", m.block_size, 1, kMaxConfigDim);
  // Up to 2^24: llm.c's uint32 token files carry vocabularies above 65,535 (Llama 3's 128,256).
  m.vocab_size = r.get_int("vocab_size", m.vocab_size, 1, kMaxConfigVocab);
  if (m.n_embd % m.n_head != 0) {
    throw_input_error("config error in {}: model.n_embd = {} is not divisible by model.n_head = {}",
                      r.sources_of({"model.n_embd", "model.n_head"}), m.n_embd, m.n_head);
  }
  refuse_foreign_keys(r, family);
  if (family.has_dropout()) {
    c.dropout = r.get_float("dropout", 0.0, 0.0, 0.95);
  } else if (r.has("dropout") && r.get_double("dropout", 0.0, 0.0, 0.95) != 0.0) {
    // 0 is what the model does anyway (a GPT-2 config switched to a Llama by model.arch says it).
    throw_input_error("config error in {}: model.dropout: a {} model (model.arch = \"{}\") has no dropout",
                      r.sources_of({"model.dropout", "model.arch"}), family.display_name(), family.name());
  }
  family.read_keys(r, m, c.derived);
  r.reject_unknown_keys();
}

namespace {

// [Note: sizes past the memory model]
// The memory model counts bytes in int64 (models/*_footprint.cpp, memory_model.cpp). Each key has
// its range, but their products do not: micro-batch x heads x T x T of attention probabilities at
// T = 2^20 wraps past 2^63, and `zerotrain memory` printed negative totals while `train`'s memory
// check, seeing a wrapped figure, let a run start that then failed to allocate exbibytes. The
// unsharded bytes of one step are estimated here in floating point, generously (16 bytes a
// parameter, 4 an activation element, every layer's attention probabilities and MLP kept): past
// 2^56 (64 PiB, far beyond any machine) a config is refused, which leaves the exact integer counts
// at least 128 times below the wrap. Asked where a run's memory is predicted (train, plan,
// memory), not where a config is read: `sample --from` a 1M-context model reads a config of
// micro_batch 4 x seq_len 2^20 and trains nothing.
constexpr double kMaxModelBytes = 72057594037927936.0;  // 2^56

double unsharded_step_bytes(const RunConfig& c, int mlp_width) {
  const double L = c.model.n_layer, C = c.model.n_embd, F = mlp_width, V = c.model.padded_vocab_size();
  const double H = c.model.n_head, T = c.train.seq_len, B = c.train.micro_batch, P = c.model.block_size;
  const double params = L * (4.0 * C * C + 3.0 * C * F + 8.0 * C) + 2.0 * V * C + P * C;
  const double activations = B * T * (L * (16.0 * C + 4.0 * F + 2.0 * H * T) + 4.0 * V);
  return 16.0 * params + 4.0 * activations;
}

}  // namespace

void check_memory_countable(const RunConfig& c) {
  const ModelFamily& family = model_family(c.model.arch);
  if (const double bytes = unsharded_step_bytes(c, family.mlp_width(c.model)); bytes > kMaxModelBytes) {
    throw_input_error(
        "config error in {}: the model and train.micro_batch x train.seq_len = {} x {} ask about {:.3g} PiB a step "
        "before sharding, past the 64 PiB the memory prediction takes (docs/zero_memory.md)",
        c.sources_of({"model.n_layer", "model.n_head", "model.n_embd", "model.block_size", "model.vocab_size",
                      "train.micro_batch", "train.seq_len"}),
        c.train.micro_batch, c.train.seq_len, bytes / 1125899906842624.0);
  }
}

void check_model_support(const RunConfig& c) {
  const ModelFamily& family = model_family(c.model.arch);
  const std::string refusal = family.refuse_run(c.model, {c.device, c.train.micro_batch});
  // The family's refusal reads the model's shape, the device and the micro-batch: named wherever
  // they came from (the file, or --set alone).
  if (!refusal.empty()) {
    throw_input_error("config error in {}: {}",
                      c.sources_of({"model.arch", "model.n_layer", "model.n_head", "model.n_kv_head", "model.n_embd",
                                    "model.block_size", "model.vocab_size", "device", "train.micro_batch"}),
                      refusal);
  }
  // Dropout draws its mask from a Philox counter of 32 bits a sample ([Note: dropout masks]): the
  // attention probabilities' n_head x T x T elements must fit it, or the first step's kernel would
  // stop the run with an internal error (past T 37837 at 12 heads, past 23170 at 32).
  if (family.has_dropout() && c.dropout > 0.0f) {
    const std::int64_t probs = std::int64_t{c.model.n_head} * c.train.seq_len * c.train.seq_len;
    if (!dropout_rules::mask_fits_counter(probs)) {
      throw_input_error(
          "config error in {}: model.dropout = {} over model.n_head x train.seq_len^2 = {} x {}^2 attention "
          "probabilities a sample is past the dropout mask's 2^34 elements: set model.dropout = 0 or a shorter "
          "train.seq_len (model.block_size where it is not set)",
          c.sources_of({"model.dropout", "model.n_head", "train.seq_len", "model.block_size"}),
          shortest_decimal(c.dropout), c.model.n_head, c.train.seq_len);
    }
  }
  if (c.gelu_epilogue && !family.has_gelu_mlp()) {
    throw_input_error(
        "config error in {}: model.arch = \"{}\" does not support precision.gelu_epilogue = true (a {}'s MLP has no "
        "GELU)",
        c.sources_of({"model.arch", "precision.gelu_epilogue"}), family.name(), family.display_name());
  }
  if (c.gelu_epilogue && c.train.activation_checkpointing.selective()) {
    throw_input_error(
        "config error in {}: train.activation_checkpointing = \"selective\" recomputes GELU in backward with the "
        "GELU kernel, whose bits the matmul epilogue's need not match: set precision.gelu_epilogue = false",
        c.sources_of({"train.activation_checkpointing", "precision.gelu_epilogue", "precision.activations", "device"}));
  }
}

nlohmann::json model_section_json(const RunConfig& c) {
  const ModelConfig& model = c.model;
  nlohmann::json m = {{"arch", model.arch},     {"n_layer", model.n_layer},       {"n_head", model.n_head},
                      {"n_embd", model.n_embd}, {"block_size", model.block_size}, {"vocab_size", model.vocab_size}};
  m.update(model.family_keys);
  if (model_family(model.arch).has_dropout()) m["dropout"] = shortest_decimal(c.dropout);
  return m;
}

}  // namespace zt
