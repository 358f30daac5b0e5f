// Parsing and validation of RunConfig (the schema lives here, next to its defaults).
#include "engine/config/run_config.h"

#include <omp.h>

#include <fstream>
#include <sstream>

#include "engine/config/config_reader.h"
#include "engine/core/check.h"

namespace zt {

namespace {

constexpr long long kMaxDim = 1 << 20;

void read_model(ConfigReader r, gpt::GptConfig& m) {
  for (const char* key : {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"}) {
    if (!r.has(key)) throw_input_error("config error in {}: missing required key '{}'", r.file(), r.dotted(key));
  }
  m.n_layer = r.get_int("n_layer", m.n_layer, 1, 1024);
  m.n_head = r.get_int("n_head", m.n_head, 1, 1024);
  m.n_embd = r.get_int("n_embd", m.n_embd, 1, kMaxDim);
  m.block_size = r.get_int("block_size", m.block_size, 1, kMaxDim);
  m.vocab_size = r.get_int("vocab_size", m.vocab_size, 1, 1 << 24);
  r.reject_unknown_keys();
  if (m.n_embd % m.n_head != 0) {
    throw_input_error("config error in {}: model.n_embd = {} is not divisible by model.n_head = {}", r.file(), m.n_embd,
                      m.n_head);
  }
}

void read_train(ConfigReader r, TrainConfig& t, int block_size) {
  t.micro_batch = r.get_int("micro_batch", t.micro_batch, 1, kMaxDim);
  t.seq_len = r.get_int("seq_len", block_size, 1, kMaxDim);
  if (t.seq_len > block_size) {
    throw_input_error("config error in {}: train.seq_len = {} exceeds model.block_size = {}", r.file(), t.seq_len,
                      block_size);
  }
  t.seed = static_cast<std::uint64_t>(r.get_int("seed", static_cast<int>(t.seed), 0, 2147483647));
  t.num_threads = r.get_int("num_threads", 0, 0, 1024);
  if (t.num_threads == 0) t.num_threads = omp_get_num_procs();
  const std::string ac = r.get_string("activation_checkpointing", "none");
  if (!gpt::CheckpointPolicy::parse(ac, &t.activation_checkpointing)) {
    throw_input_error("config error in {}: train.activation_checkpointing = \"{}\" is not none, all or every:K (K >= 1)",
                      r.file(), ac);
  }
  r.reject_unknown_keys();
}

void read_optim(ConfigReader r, cpu::AdamWHyper& o) {
  o.lr = static_cast<float>(r.get_double("lr", 1e-3, 0.0, 10.0));
  o.beta1 = static_cast<float>(r.get_double("beta1", 0.9, 0.0, 0.999999));
  o.beta2 = static_cast<float>(r.get_double("beta2", 0.95, 0.0, 0.999999));
  o.eps = static_cast<float>(r.get_double("eps", 1e-8, 0.0, 1.0));
  o.weight_decay = static_cast<float>(r.get_double("weight_decay", 0.1, 0.0, 10.0));
  r.reject_unknown_keys();
}

}  // namespace

RunConfig parse_run_config(nlohmann::json doc, const std::string& source) {
  RunConfig c;
  c.source = source;
  ConfigReader root(doc, source, "");
  if (!root.has("model")) throw_input_error("config error in {}: missing required section 'model'", source);
  const std::string device = root.get_enum("device", "cpu", {"cpu", "cuda"});
  if (device == "cuda") {
    throw_input_error("config error in {}: device = \"cuda\": the CUDA backend cannot train yet (use \"cpu\")", source);
  }
  read_model(root.section("model"), c.model);
  read_train(root.section("train"), c.train, c.model.block_size);
  ConfigReader precision = root.section("precision");
  c.param_dtype = precision.get_enum("param_dtype", "f32", {"f32", "bf16"}) == "bf16" ? DType::kBF16 : DType::kF32;
  precision.reject_unknown_keys();
  read_optim(root.section("optim"), c.optim);
  root.reject_unknown_keys();
  return c;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw_input_error("config error: cannot open '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset where parsing stopped; report line and column.
    std::size_t line = 1, col = 1;
    const std::string s = text.str();
    for (std::size_t i = 0; i + 1 < e.byte && i < s.size(); ++i) {
      if (s[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    throw_input_error("config error in {}: malformed JSON at line {}, column {}", path, line, col);
  }
  for (const std::string& o : overrides) apply_override(doc, o);
  return parse_run_config(std::move(doc), path);
}

nlohmann::json RunConfig::to_json() const {
  return {
      {"device", std::string(device_name(device))},
      {"model",
       {{"n_layer", model.n_layer}, {"n_head", model.n_head}, {"n_embd", model.n_embd},
        {"block_size", model.block_size}, {"vocab_size", model.vocab_size}}},
      {"train",
       {{"micro_batch", train.micro_batch}, {"seq_len", train.seq_len}, {"seed", train.seed},
        {"num_threads", train.num_threads}, {"activation_checkpointing", train.activation_checkpointing.to_string()}}},
      {"precision", {{"param_dtype", param_dtype == DType::kBF16 ? "bf16" : "f32"}}},
      {"optim",
       {{"lr", optim.lr}, {"beta1", optim.beta1}, {"beta2", optim.beta2}, {"eps", optim.eps},
        {"weight_decay", optim.weight_decay}}},
  };
}

}  // namespace zt
