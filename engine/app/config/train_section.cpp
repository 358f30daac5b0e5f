// The train and optim sections (see the header).
#include "engine/app/config/train_section.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <strings.h>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "engine/app/config/config_limits.h"
#include "engine/base/core/check.h"
#include "engine/base/core/float_text.h"
#include "engine/distributed/launch/rendezvous.h"

namespace zt {

namespace {

// The global batch given (t.global_batch_tokens, read before the split is resolved).
template <typename... Args>
[[noreturn]] void throw_batch_split(const TrainConfig& t, int world_size, fmt::format_string<Args...> f,
                                    Args&&... args) {
  throw BatchSplitError(fmt::format(f, std::forward<Args>(args)...), t.micro_batch, t.seq_len, world_size,
                        t.global_batch_tokens);
}

}  // namespace

BatchSplit batch_split(int config_micro_batch, int seq_len, int world_size, std::int64_t global) {
  const std::int64_t per_sequence = std::int64_t{seq_len} * world_size;
  if (per_sequence > kMaxConfigGlobalBatchTokens) {  // one sequence a rank is past any global batch already
    return {
        fmt::format("no micro-batch splits it on {} rank(s): one sequence a rank, train.seq_len x ranks = {}, is "
                    "past the {} train.global_batch_tokens takes",
                    world_size, per_sequence, kMaxConfigGlobalBatchTokens)};
  }
  if (global % per_sequence != 0) {
    return {fmt::format("no micro-batch splits it on {} rank(s): it must be a multiple of train.seq_len x ranks = {}",
                        world_size, per_sequence)};
  }
  const std::int64_t sequences = global / per_sequence;  // micro_batch x grad_accum
  const auto splits = [&](std::int64_t m) { return sequences % m == 0 && sequences / m <= kMaxConfigGradAccum; };
  std::int64_t micro_batch = std::min<std::int64_t>(config_micro_batch, sequences);
  while (micro_batch > 1 && !splits(micro_batch)) --micro_batch;
  if (!splits(micro_batch)) {  // every split below needs more accumulation than its range: the least above
    micro_batch = smallest_splitting_micro_batch(seq_len, world_size, global);
    if (micro_batch == 0) {
      return {fmt::format("no micro-batch splits it on {} rank(s) within train.grad_accum's largest, {}", world_size,
                          kMaxConfigGradAccum)};
    }
  }
  return {fmt::format("train.micro_batch = {} splits it: grad_accum {}", micro_batch, sequences / micro_batch), true};
}

std::string batch_split_hint(int config_micro_batch, int seq_len, int world_size, std::int64_t global) {
  const BatchSplit s = batch_split(config_micro_batch, seq_len, world_size, global);
  return s.split ? fmt::format(" ({})", s.text) : "; " + s.text;
}

int smallest_splitting_micro_batch(int seq_len, int world_size, std::int64_t global) {
  const std::int64_t per_sequence = std::int64_t{seq_len} * world_size;
  if (per_sequence <= 0 || global <= 0 || global % per_sequence != 0) return 0;
  const std::int64_t sequences = global / per_sequence;  // micro_batch x grad_accum
  // From the least that keeps grad_accum in range: each divisor from there does.
  const std::int64_t most = std::min<std::int64_t>(sequences, kMaxConfigDim);
  for (std::int64_t m = (sequences + kMaxConfigGradAccum - 1) / kMaxConfigGradAccum; m <= most; ++m) {
    if (sequences % m == 0) return static_cast<int>(m);
  }
  return 0;
}

bool omp_waits_passively() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy != nullptr && strcasecmp(policy, "passive") == 0;
}

int omp_num_threads_from_environment() {
  // OpenMP's syntax: a list of counts, one a nesting level; the first is the outer regions'.
  const char* given = std::getenv("OMP_NUM_THREADS");
  if (given == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(given, &end, 10);
  while (*end == ' ' || *end == '\t') ++end;  // libgomp takes surrounding blanks
  const bool whole = end != given && (*end == '\0' || *end == ',');
  return whole && n >= 1 && n <= 1024 ? static_cast<int>(n) : 0;
}

namespace {

// The micro-batch that splits train.global_batch_tokens at train.grad_accum on `world_size`
// ranks, within micro_batch's range; 0 where none does.
int micro_batch_keeping_accum(const TrainConfig& t, int world_size) {
  const double per_micro_wide =
      static_cast<double>(t.seq_len) * static_cast<double>(t.grad_accum) * static_cast<double>(world_size);
  if (per_micro_wide > static_cast<double>(kMaxConfigGlobalBatchTokens)) return 0;
  const std::int64_t per_micro = std::int64_t{t.seq_len} * t.grad_accum * world_size;
  const std::int64_t micro = t.global_batch_tokens / per_micro;
  return t.global_batch_tokens % per_micro == 0 && micro >= 1 && micro <= kMaxConfigDim ? static_cast<int>(micro) : 0;
}

// The batch terms must agree: global_batch_tokens = micro_batch * seq_len * grad_accum * ranks.
// A missing one is derived (and noted, so the run prints it).
void resolve_batch(ConfigReader& r, RunConfig& c, bool has_micro, bool has_accum, bool has_global) {
  TrainConfig& t = c.train;
  // The global batch and the accumulation given, the micro-batch not: it is what splits the one
  // by the other, as DeepSpeed derives train_micro_batch_size_per_gpu (the default micro-batch
  // disagreed, and the refusal asked to change the accumulation the user gave).
  if (const int micro = micro_batch_keeping_accum(t, c.world_size);
      has_global && has_accum && !has_micro && micro > 0) {
    t.micro_batch = micro;
    t.micro_batch_derived = true;
    c.derived.push_back(fmt::format(
        "train.micro_batch = {} (train.global_batch_tokens = {} over seq_len {} x grad_accum {} x ranks {})",
        t.micro_batch, t.global_batch_tokens, t.seq_len, t.grad_accum, c.world_size));
  }
  // In double first: the int64 product of the largest terms (2^20 x 2^20 x 2^24 ranks) overflows.
  const double per_accum_wide =
      static_cast<double>(t.micro_batch) * static_cast<double>(t.seq_len) * static_cast<double>(c.world_size);
  const bool past_any_batch = per_accum_wide > static_cast<double>(kMaxConfigGlobalBatchTokens);
  const std::int64_t per_accum =
      past_any_batch ? 0 : static_cast<std::int64_t>(t.micro_batch) * t.seq_len * c.world_size;
  if (has_global && !has_accum) {
    if (past_any_batch || t.global_batch_tokens % per_accum != 0) {
      throw_batch_split(
          t, c.world_size,
          "config error in {}: train.global_batch_tokens = {} is not a multiple of train.micro_batch x train.seq_len "
          "x ranks = {} x {} x {}{}",
          r.sources_of({"train.global_batch_tokens", "train.micro_batch", "train.seq_len"}), t.global_batch_tokens,
          t.micro_batch, t.seq_len, c.world_size,
          batch_split_hint(t.micro_batch, t.seq_len, c.world_size, t.global_batch_tokens));
    }
    const std::int64_t accum = t.global_batch_tokens / per_accum;
    if (accum > kMaxConfigGradAccum) {  // the range train.grad_accum itself is read in
      throw_batch_split(
          t, c.world_size,
          "config error in {}: train.global_batch_tokens = {} over train.micro_batch x train.seq_len x ranks = {} x "
          "{} x {} makes train.grad_accum = {}, above its largest, {} (raise train.micro_batch)",
          r.sources_of({"train.global_batch_tokens", "train.micro_batch", "train.seq_len"}), t.global_batch_tokens,
          t.micro_batch, t.seq_len, c.world_size, accum, kMaxConfigGradAccum);
    }
    t.grad_accum = static_cast<int>(accum);
    c.derived.push_back(fmt::format("train.grad_accum = {} (from train.global_batch_tokens = {})", t.grad_accum,
                                    t.global_batch_tokens));
    return;
  }
  const double implied_wide = per_accum_wide * t.grad_accum;
  if (!has_global && implied_wide > static_cast<double>(kMaxConfigGlobalBatchTokens)) {
    // Past the range a given one is read in.
    const std::string message = fmt::format(
        "config error in {}: train.micro_batch x train.seq_len x train.grad_accum x ranks = {} x {} x {} x {} = {:.0f} "
        "tokens a step, past the {} train.global_batch_tokens takes",
        r.sources_of({"train.micro_batch", "train.seq_len", "train.grad_accum"}), t.micro_batch, t.seq_len,
        t.grad_accum, c.world_size, implied_wide, kMaxConfigGlobalBatchTokens);
    // Too many at one rank already: no rank count's batch cures it (memory and plan stand by it).
    if (implied_wide / c.world_size > static_cast<double>(kMaxConfigGlobalBatchTokens)) throw InputError(message);
    throw BatchSplitError(message, t.micro_batch, t.seq_len, c.world_size, 0);
  }
  const std::int64_t implied = past_any_batch ? 0 : per_accum * t.grad_accum;
  if (has_global && (past_any_batch || t.global_batch_tokens != implied)) {
    // The ways to agree: the accumulation that agrees with the micro-batch, and the micro-batch that
    // keeps the accumulation given (naming only the first dropped the user's grad_accum); where
    // neither does, any split, and that none keeps the accumulation. A micro-batch not given is
    // named as the default it is (a value the user never wrote).
    std::vector<std::string> ways;
    if (!has_micro) ways.push_back(fmt::format("train.micro_batch is not given: its default, {}", t.micro_batch));
    const bool accum_agrees = !past_any_batch && t.global_batch_tokens % per_accum == 0 &&
                              t.global_batch_tokens / per_accum <= kMaxConfigGradAccum;
    if (accum_agrees) {
      ways.push_back(fmt::format("train.grad_accum = {} agrees with it", t.global_batch_tokens / per_accum));
    }
    if (const int keeping = micro_batch_keeping_accum(t, c.world_size); keeping > 0) {
      ways.push_back(fmt::format("train.micro_batch = {} keeps grad_accum {}", keeping, t.grad_accum));
    } else if (!accum_agrees) {
      ways.push_back(fmt::format("no micro-batch keeps grad_accum {}; {}", t.grad_accum,
                                 batch_split(t.micro_batch, t.seq_len, c.world_size, t.global_batch_tokens).text));
    } else {
      ways.push_back(fmt::format("no micro-batch keeps grad_accum {}", t.grad_accum));
    }
    const std::string hint = fmt::format(" ({})", fmt::join(ways, "; "));
    throw_batch_split(
        t, c.world_size,
        "config error in {}: train.global_batch_tokens = {} disagrees with train.micro_batch x train.seq_len x "
        "train.grad_accum x ranks = {} x {} x {} x {} = {:.0f}{}",
        r.sources_of({"train.global_batch_tokens", "train.micro_batch", "train.seq_len", "train.grad_accum"}),
        t.global_batch_tokens, t.micro_batch, t.seq_len, t.grad_accum, c.world_size, implied_wide, hint);
  }
  if (!has_global) {
    c.derived.push_back(
        fmt::format("train.global_batch_tokens = {} (micro_batch {} x seq_len {} x grad_accum {} x "
                    "ranks {})",
                    implied, t.micro_batch, t.seq_len, t.grad_accum, c.world_size));
  }
  t.global_batch_tokens = implied;
}

}  // namespace

void read_train_section(ConfigReader r, RunConfig& c) {
  TrainConfig& t = c.train;
  const int block_size = c.model.block_size;
  t.init_from = r.get_path("init_from", "");
  t.micro_batch = r.get_int("micro_batch", t.micro_batch, 1, kMaxConfigDim);
  t.seq_len_given = r.has("seq_len");
  if (!t.seq_len_given) c.derived.push_back(fmt::format("train.seq_len = {} (model.block_size)", block_size));
  t.seq_len = r.get_int("seq_len", block_size, 1, kMaxConfigDim);
  if (t.seq_len > block_size) {
    throw_input_error("config error in {}: train.seq_len = {} exceeds model.block_size = {}",
                      r.sources_of({"train.seq_len", "model.block_size"}), t.seq_len, block_size);
  }
  bool has_accum = r.has("grad_accum"), has_global = r.has("global_batch_tokens");
  t.grad_accum = r.get_int("grad_accum", 1, 1, kMaxConfigGradAccum);
  t.global_batch_tokens = r.get_int64("global_batch_tokens", 0, 1, kMaxConfigGlobalBatchTokens);
  // A batch term given with --set wins over the file's other one (which is then derived): the
  // way to take a config whose file fixes grad_accum to a global batch kept at any rank count.
  const bool accum_set = has_accum && r.source_of("grad_accum") != r.file(),
             global_set = has_global && r.source_of("global_batch_tokens") != r.file();
  if (has_accum && has_global && accum_set != global_set) {
    c.derived.push_back(fmt::format("the file's train.{} set aside for {}",
                                    accum_set ? "global_batch_tokens" : "grad_accum",
                                    r.source_of(accum_set ? "grad_accum" : "global_batch_tokens")));
    (accum_set ? has_global : has_accum) = false;
  }
  resolve_batch(r, c, r.has("micro_batch"), has_accum, has_global);
  t.global_batch_given = has_global;
  t.max_steps = r.get_int("max_steps", t.max_steps, 0, kMaxConfigSteps);
  // The run's token count and sample indices (steps times a step's) are int64.
  if (static_cast<double>(t.max_steps) * static_cast<double>(t.global_batch_tokens) >
      static_cast<double>(kMaxRunTokens)) {
    // Named by the keys that set the global batch: given, or derived from its terms.
    const std::string sources =
        t.global_batch_given
            ? r.sources_of({"train.max_steps", "train.global_batch_tokens"})
            : r.sources_of({"train.max_steps", "train.micro_batch", "train.seq_len", "train.grad_accum"});
    throw_input_error(
        "config error in {}: train.max_steps x train.global_batch_tokens = {} x {} tokens, past the {} a run counts",
        sources, t.max_steps, t.global_batch_tokens, kMaxRunTokens);
  }
  t.seed = static_cast<std::uint64_t>(r.get_int("seed", static_cast<int>(t.seed), 0, 2147483647));
  t.deterministic = r.get_bool("deterministic", t.deterministic);
  t.num_threads = r.get_int("num_threads", 0, 0, 1024);
  t.num_threads_given = t.num_threads > 0;
  // Left out, OMP_NUM_THREADS where it gives a count, as PyTorch and llm.c read it (torchrun sets
  // it to 1 a rank).
  const int environment_threads = t.num_threads == 0 ? omp_num_threads_from_environment() : 0;
  const bool from_environment = environment_threads > 0;
  if (from_environment) {
    t.num_threads = environment_threads;
    c.derived.push_back(fmt::format("train.num_threads = {} (OMP_NUM_THREADS)", t.num_threads));
  }
  if (t.num_threads == 0) {
    // The node's cores shared among its ranks: each rank taking every core oversubscribed the node
    // (2 ranks on 2 cores: 350 ms a step against 125 with one thread each). Deterministic runs too:
    // their products take the same bits at any thread count ([Note: products the same at any
    // thread count] in kernels/cpu/blas.cpp), so a rank count's threads do not move them.
    const int cores = omp_get_num_procs(), node_ranks = ranks_on_this_node();
    t.num_threads = std::max(1, cores / node_ranks);
    // An OMP_NUM_THREADS that gives no count (abc, 99999) was left aside in silence.
    const char* unread = std::getenv("OMP_NUM_THREADS");
    const std::string aside = unread != nullptr && !t.num_threads_given
                                  ? fmt::format("; OMP_NUM_THREADS=\"{}\" is no count from 1 to 1024, left aside",
                                                std::string(unread).substr(0, 40))
                                  : "";
    c.derived.push_back(node_ranks > 1
                            ? fmt::format("train.num_threads = {} (this node's {} cores shared by its {} "
                                          "ranks{})",
                                          t.num_threads, cores, node_ranks, aside)
                            : fmt::format("train.num_threads = {} (this node's cores{})", t.num_threads, aside));
  } else if (const int cores = omp_get_num_procs(), node_ranks = ranks_on_this_node();
             c.device == Device::kCPU && t.num_threads > 1 && t.num_threads * node_ranks > cores &&
             !omp_waits_passively()) {
    // More threads than cores: OpenMP's waiting threads spin (its default wait policy) on cores
    // another thread needs. configs/tiny.json on 2 ranks of a 2-core machine: 353-406 ms a step at
    // 2 threads a rank against 74 at 1, and 79 at 2 with OMP_WAIT_POLICY=passive
    // (docs/results/threads_past_cores_cpu.md). One thread a rank has no team to wait (3 ranks on
    // 2 cores were warned, and told to leave the key out for the 1 they had).
    c.warnings.push_back(fmt::format(
        "train.num_threads = {} ({}) on each of this node's {} rank(s) asks for {} threads on its {} cores: "
        "OpenMP's spinning waits can make the steps several times slower; {} ({} {}here) or set "
        "OMP_WAIT_POLICY=passive",
        t.num_threads, from_environment ? "from OMP_NUM_THREADS" : "given in " + r.source_of("num_threads"), node_ranks,
        t.num_threads * node_ranks, cores,
        from_environment ? "unset OMP_NUM_THREADS and leave train.num_threads out" : "leave train.num_threads out",
        std::max(1, cores / node_ranks), node_ranks > 1 ? "a rank " : ""));
  }
  constexpr const char* kCheckpointingChoices = "none, selective, all or every:K (K from 1 to 2147483647)";
  const std::string ac = r.get_choice("activation_checkpointing", "none", kCheckpointingChoices);
  if (!CheckpointPolicy::parse(ac, &t.activation_checkpointing)) {
    throw_input_error("config error in {}: train.activation_checkpointing = \"{}\" is not {}",
                      r.source_of("activation_checkpointing"), ac, kCheckpointingChoices);
  }
  // Said where it recomputes less than it reads: every:K past the model's blocks checkpoints block 0
  // alone (every:1 is all of them).
  if (const CheckpointPolicy& p = t.activation_checkpointing;
      p.kind == CheckpointPolicy::Kind::kEvery && p.every_k >= c.model.n_layer && c.model.n_layer > 1) {
    c.derived.push_back(
        fmt::format("train.activation_checkpointing = {}: of the model's {} blocks only block 0 recomputes its forward",
                    p.to_string(), c.model.n_layer));
  }
  t.head_chunks = r.get_int("head_chunks", 1, 1, c.model.padded_vocab_size() / 64);
  t.block_units = r.get_int("block_units", 1, 1, 2);
  t.eval_every = r.get_int("eval_every", t.eval_every, 0, kMaxConfigSteps);
  t.eval_batches = r.get_int("eval_batches", t.eval_batches, 1, 100000);
  t.nonfinite = r.get_enum("nonfinite", t.nonfinite, {"stop", "skip"});
  t.max_skipped_steps = r.get_int("max_skipped_steps", t.max_skipped_steps, 1, 1000000);
  t.check_memory = r.get_bool("check_memory", t.check_memory);
  t.collective_timeout_s = r.get_double("collective_timeout_s", t.collective_timeout_s, 0.1, 86400.0);
  r.reject_unknown_keys();
}

void read_optim_section(ConfigReader r, RunConfig& c) {
  OptimConfig& o = c.optim;
  const int max_steps = c.train.max_steps;
  std::vector<std::string>& derived = c.derived;
  AdamWHyper& a = o.adamw;
  a.lr = r.get_float("lr", 1e-3, 0.0, 10.0);
  a.beta1 = r.get_float("beta1", 0.9, 0.0, 0.999999);
  a.beta2 = r.get_float("beta2", 0.95, 0.0, 0.999999);
  // Not 0: a parameter whose gradients are all 0 (a padded vocabulary row) would update by 0 / 0.
  a.eps = r.get_float("eps", 1e-8, 1e-30, 1.0);
  a.weight_decay = r.get_float("weight_decay", 0.1, 0.0, 10.0);
  o.min_lr = r.get_float("min_lr", a.lr / 10.0, 0.0, 10.0);
  o.min_lr_given = r.has("min_lr");
  o.warmup_steps = r.get_int("warmup_steps", 0, 0, kMaxConfigSteps);
  o.decay = r.get_enum("decay", o.decay, {"cosine", "linear", "constant", "wsd"});
  // From the single-precision lr: 1e-3 gives 0.000100000005, not the float nearest 1e-4, so a run
  // that states 0.0001 is another schedule (a resume says which to write). A constant rate reads it not.
  if (!r.has("min_lr") && o.decay != "constant") {
    derived.push_back(fmt::format("optim.min_lr = {} (optim.lr / 10)", o.min_lr));
  }
  if (r.has("cooldown_fraction") && o.decay != "wsd") {
    throw_input_error(
        "config error in {}: optim.cooldown_fraction is read only with optim.decay = \"wsd\" (decay is \"{}\")",
        r.source_of("cooldown_fraction"), o.decay);
  }
  o.cooldown_fraction = r.get_double("cooldown_fraction", o.cooldown_fraction, 0.0, 1.0);
  // By default the decay ends with the run (or with the warmup, for a run shorter than its warmup).
  o.decay_steps = r.get_int("decay_steps", std::max(max_steps, o.warmup_steps), 0, kMaxConfigSteps);
  o.decay_steps_given = r.has("decay_steps");
  if (!r.has("decay_steps") && o.decay != "constant") {  // a resume that changes max_steps changes it too
    derived.push_back(fmt::format(
        "optim.decay_steps = {} ({})", o.decay_steps,
        max_steps >= o.warmup_steps ? "train.max_steps" : "optim.warmup_steps: the run is shorter than its warmup"));
  }
  o.grad_clip = r.get_float("grad_clip", 1.0, 0.0, 1e6);
  if (o.min_lr > a.lr) {
    throw_input_error("config error in {}: optim.min_lr = {} exceeds optim.lr = {}",
                      r.sources_of({"optim.min_lr", "optim.lr"}), o.min_lr, a.lr);
  }
  if (o.decay != "constant" && o.decay_steps < o.warmup_steps) {
    throw_input_error("config error in {}: optim.decay_steps = {} is before the end of optim.warmup_steps = {}",
                      r.sources_of({"optim.decay_steps", "optim.warmup_steps"}), o.decay_steps, o.warmup_steps);
  }
  r.reject_unknown_keys();
}

nlohmann::json train_section_json(const TrainConfig& t) {
  return {{"micro_batch", t.micro_batch},
          {"seq_len", t.seq_len},
          {"grad_accum", t.grad_accum},
          {"max_steps", t.max_steps},
          {"seed", t.seed},
          {"init_from", t.init_from},
          {"num_threads", t.num_threads},
          {"activation_checkpointing", t.activation_checkpointing.to_string()},
          {"head_chunks", t.head_chunks},
          {"block_units", t.block_units},
          {"eval_every", t.eval_every},
          {"eval_batches", t.eval_batches},
          {"nonfinite", t.nonfinite},
          {"max_skipped_steps", t.max_skipped_steps},
          {"deterministic", t.deterministic},
          {"check_memory", t.check_memory},
          {"collective_timeout_s", t.collective_timeout_s}};
}

nlohmann::json optim_section_json(const OptimConfig& o) {
  const AdamWHyper& a = o.adamw;
  nlohmann::json j = {{"lr", shortest_decimal(a.lr)},
                      {"beta1", shortest_decimal(a.beta1)},
                      {"beta2", shortest_decimal(a.beta2)},
                      {"eps", shortest_decimal(a.eps)},
                      {"weight_decay", shortest_decimal(a.weight_decay)},
                      {"min_lr", shortest_decimal(o.min_lr)},
                      {"warmup_steps", o.warmup_steps},
                      {"decay", o.decay},
                      {"decay_steps", o.decay_steps},
                      {"grad_clip", shortest_decimal(o.grad_clip)}};
  // Only where it is read, so the configs saved before the key existed compare equal on resume.
  if (o.decay == "wsd") j["cooldown_fraction"] = o.cooldown_fraction;
  return j;
}

}  // namespace zt
