// `zerotrain eval`: a model's multiple-choice accuracy (llm.c's eval files: HellaSwag), scored as a
// training run's evaluations score data.choice_file, and its loss on a token file, from its saved
// weights (engine/app/cli/commands/standalone_model.h: a run's, a checkpoint's or pretrained ones,
// on the CPU or a GPU). Under mpirun every rank holds the whole model and scores its share of the
// rows or windows (on its own GPU with --device cuda); rank 0 prints the same figures one rank
// would.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/cli/commands/standalone_model.h"
#include "engine/app/config/config_limits.h"
#include "engine/app/config/zero_section.h"
#include "engine/app/data/batch_sampler.h"
#include "engine/app/data/choice_file.h"
#include "engine/app/data/token_corpus.h"
#include "engine/app/data/token_file.h"
#include "engine/app/io/input_file.h"
#include "engine/app/trainer/choice_eval.h"
#include "engine/app/trainer/data_changes.h"
#include "engine/app/trainer/data_source.h"
#include "engine/app/trainer/evaluation.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/console.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/launch/rendezvous.h"

namespace zt::cli {

namespace {

// The ranks that computed what --val compares with: a checkpoint's (as a resume counts them), else
// the run's last memory record's (its final segment's, whose weights final.safetensors holds); 0
// where neither says.
int logged_ranks(const WeightSource& source) {
  if (source.checkpoint) return source.checkpoint->manifest().data_parallel_ranks();
  const std::string path = (std::filesystem::path(source.path) / "metrics.jsonl").string();
  require_regular_file(path, "metrics file");  // a FIFO there: refused, not waited on
  std::ifstream log(path);
  int ranks = 0;
  for (std::string line; std::getline(log, line);) {
    if (line.find("\"memory\"") == std::string::npos) continue;  // the parse for those records alone
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_object() && r.value("type", "") == "memory" && r.contains("ranks")) {
      ranks = static_cast<int>(json_integer_in(r["ranks"], 0, kMaxPredictedRanks).value_or(0));
    }
  }
  return ranks;
}

// The mean cross-entropy over every position of the first `windows` windows of T + 1 tokens laid
// back to back from the corpus' start (llm.c's sequential order, shard after shard). Each rank of
// `world` takes a contiguous run of them, in forwards of as many windows as `batch_tokens` holds,
// and sums each window's positions in order; the windows' sums are then added in window order on
// every rank, so the ranks print the same value whatever their number.
// `oom_hint` (where non-empty) is added to an out-of-memory error's line.
double token_loss(StandaloneModel& model, const data::TokenCorpus& corpus, int T, std::int64_t windows,
                  int batch_tokens, Communicator& world, const std::string& oom_hint) {
  const std::int64_t per_rank = (windows + world.world_size() - 1) / world.world_size();
  const std::int64_t first = std::min<std::int64_t>(windows, world.rank() * per_rank);
  const std::int64_t last = std::min<std::int64_t>(windows, first + per_rank);
  std::vector<double> window_sums(static_cast<std::size_t>(per_rank), 0.0);  // this rank's, padded with zeros
  // Each rank's windows alone (no collective inside), then agreed: a token past the vocabulary in
  // several ranks' windows ends the job with the first rank's line (its windows come first in the
  // file), printed once, rather than one line a rank naming different positions.
  on_every_rank(world, [&] {
    if (last <= first) return;
    try {
      const int B = static_cast<int>(std::clamp<std::int64_t>(batch_tokens / T, 1, last - first));
      const std::unique_ptr<LanguageModel> m = model.build(B, T);
      const data::SampleStream sequential{data::SampleOrder::kSequential, 0, data::kValStream};
      std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());
      std::vector<float> losses(inputs.size());
      for (std::int64_t begin = first; begin < last; begin += B) {
        // A last forward short of B windows reads this rank's first one again and leaves its losses out.
        const std::int64_t live = std::min<std::int64_t>(B, last - begin);
        for (std::int64_t b = 0; b < B; ++b) {
          data::fill_batch(corpus, sequential, 1, T, b < live ? begin + b : first, inputs.data() + b * T,
                           targets.data() + b * T);
        }
        m->forward(model.store(), inputs.data(), targets.data(), {.training = false, .losses_out = losses.data()});
        for (std::int64_t b = 0; b < live; ++b) {
          double sum = 0.0;
          for (int i = 0; i < T; ++i) sum += losses[static_cast<std::size_t>(b * T + i)];
          window_sums[static_cast<std::size_t>(begin - first + b)] = sum;
        }
      }
    } catch (const RuntimeError& e) {
      if (oom_hint.empty() || std::string_view(e.what()).find("out of memory") == std::string_view::npos) throw;
      throw_runtime_error("{} ({})", e.what(), oom_hint);
    }
  });
  const std::vector<double> all = all_gather_values<double>(world, window_sums);
  double sum = 0.0;
  for (std::int64_t w = 0; w < windows; ++w) sum += all[static_cast<std::size_t>(w)];  // rank r's at r * per_rank
  return sum / static_cast<double>(windows * T);
}

}  // namespace

int eval_main(const std::vector<std::string>& args) {
  ArgParser parser("eval", "Score saved weights: multiple-choice accuracy (HellaSwag) and the loss on a token file.");
  add_weight_flags(parser, "evaluate in");
  parser
      .value_flag("choices", "FILE",
                  "a multiple-choice eval file in llm.c's format (dev/data/hellaswag.py's hellaswag_val.bin)")
      .value_flag("tokens", "FILE", "a token file, or a glob of shards (llm.c's or nanoGPT's format): the mean loss")
      .bool_flag("val",
                 "--run or --ckpt: the run's validation loss, as its evaluations make it: train.eval_batches batches "
                 "of train.micro_batch windows of its validation data, drawn as its data.order draws them, in its "
                 "activation dtype unless --dtype says, as are the command's other scores then (its logged val_loss "
                 "at those weights: bit for bit where it trained with train.deterministic on this device; refused "
                 "where its validation files are no longer those it evaluated)")
      .value_flag(
          "seq-len", "T",
          "--tokens: tokens a window feeds the model (default: the run's train.seq_len with --run or --ckpt, the "
          "model's context with --from)")
      .value_flag("windows", "N", "--tokens: windows read back to back from the start, at most (default 100)")
      .value_flag("format", "F",
                  "--tokens: auto (llm.c's header where there is one, else raw uint16 in a .bin file), llmc or "
                  "nanogpt (raw uint16, whatever the name), as data.format (default auto)")
      .value_flag("batch-tokens", "N",
                  "tokens a forward holds (default 8192): --choices in rows of the longest example rounded up to 64 "
                  "positions, --tokens in windows");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  if (!parser.has("choices") && !parser.has("tokens") && !parser.has("val")) {
    throw_input_error("zerotrain eval: give --choices FILE, --tokens FILE, --val, or several");
  }
  if (parser.has("val") && parser.has("from")) {
    throw_input_error(
        "zerotrain eval: --val scores a run's validation data: give its --run or --ckpt (--tokens "
        "FILE scores pretrained weights on a token file)");
  }
  for (const char* flag : {"seq-len", "windows", "format"}) {  // --tokens' flags: nothing else reads them
    if (parser.has(flag) && !parser.has("tokens")) {
      throw_input_error("zerotrain eval: --{} is read only with --tokens", flag);
    }
  }
  if (parser.has("batch-tokens") && !parser.has("tokens") && !parser.has("choices")) {  // --val's are the run's
    throw_input_error(
        "zerotrain eval: --batch-tokens is read only with --tokens or --choices (--val forwards the run's "
        "train.micro_batch windows)");
  }
  // The ranks' world (one rank without a launcher); each rank's model is whole, in a store of its own.
  MemoryTracker world_tracker;
  const std::unique_ptr<Communicator> world = make_communicator(world_tracker, {});
  const bool root = world->rank() == 0;
  // Each rank reads its inputs (every file opened and checked before the weights load: a token
  // file's headers; its tokens are checked against the vocabulary as the windows are read).
  WeightSource source;
  std::optional<data::ChoiceFile> choices;
  std::optional<data::TokenCorpus> corpus;
  std::optional<RunConfig> run;  // --val: the run's config and its data
  std::optional<DataSource> run_data;
  int run_ranks = 0;  // --val: the ranks its logged val_loss was computed on (0: not known)
  int T = 1;
  std::int64_t windows = 0;
  // A checkpoint folder is resolved by rank 0 alone and its choice sent to the others: resolved on
  // each rank, a live run's folder could give ranks different checkpoints (then refused below as
  // ranks that disagree). Rank 0's hold keeps it in place until the others hold it too.
  std::string chosen;
  if (parser.has("ckpt") && world->world_size() > 1) {
    on_every_rank(*world, [&] {
      if (root) source = resolve_weight_source(parser, "eval");
    });
    chosen = broadcast_string(*world, root ? source.path : std::string());
  }
  on_every_rank(*world, [&] {
    if (chosen.empty() || !root) source = resolve_weight_source(parser, "eval", chosen);
    if (parser.has("choices")) {
      choices.emplace(data::ChoiceFile::load(parser.get("choices"), source.spec.vocab_size()));
      if (choices->longest_input() > source.spec.block_size()) {
        throw_input_error("zerotrain eval: --choices {}: its longest example needs {} positions, over the model's {}",
                          choices->path(), choices->longest_input(), source.spec.block_size());
      }
    }
    if (parser.has("val")) {
      run.emplace(saved_run_config(source.saved_config, fmt::format("{}'s config", source.path)));
      run_ranks = logged_ranks(source);
      // Its data keys as it read them: paths relative to where it started, which a refusal from
      // elsewhere says (its config.json keeps them as given).
      try {
        run_data.emplace(*run, DataSource::Splits::kValidationOnly);  // its training files need not be here
      } catch (const InputError& e) {
        const DataConfig& d = run->data;
        // The paths it reads: the validation split's (and an embedded text's vocabulary).
        std::vector<std::string> paths = {d.val_file};
        if (d.dataset != "embedded") paths.push_back(d.dataset);
        if (d.reads_embedded_text()) paths.push_back(d.vocab_file);
        paths.insert(paths.end(), d.val_files.begin(), d.val_files.end());
        const bool relative = std::any_of(paths.begin(), paths.end(), [](const std::string& p) {
          return !p.empty() && std::filesystem::path(p).is_relative();
        });
        if (!relative) throw;
        throw_input_error(
            "{} (--val reads the run's data paths as it gave them, relative to the directory it "
            "started in: run eval from there)",
            e.what());
      }
      // The validation files the run evaluated, where its weights record them: another file at
      // the path (the dataset prepared again, a relative path read from another directory) would
      // be scored as the run's validation data, which its logged val_loss is not of.
      if (source.saved_data_identity.is_array()) {
        const std::vector<std::string> changed =
            validation_data_changes(source.saved_data_identity, data_identity_of_split(*run, kValSplit));
        if (!changed.empty()) {
          // --run pairs config.json (written as each run in the folder starts) with final.safetensors
          // (as one ends): a later run on other data that stopped early leaves the two unpaired.
          throw_input_error(
              "zerotrain eval: --val on {}: the validation data are not the files the run evaluated: {} (its "
              "logged val_loss is of those; --tokens FILE scores a file as it is{})",
              source.path, fmt::join(changed, "; "),
              source.kind == WeightSource::Kind::kRun
                  ? "; or config.json is a later run's than final.safetensors, one that stopped before its end: "
                    "--ckpt of a checkpoint pairs the two"
                  : "");
        }
      } else if (!run->data.reads_embedded_text()) {
        // Weights an earlier build wrote record no data identity: the files are scored unchecked.
        source.notes.push_back(fmt::format(
            "zerotrain eval: note: --val on {}: its weights record no identity of the validation files (an earlier "
            "build's), so they are not checked to be the ones the run evaluated",
            source.path));
      }
      // Its evaluations' activations (a bf16 run's val_loss is not an fp32 forward's), unless
      // --dtype asks for others.
      if (!parser.has("dtype")) source.activations = run->activation_dtype;
    }
    // Past the model's positions: said with where that bound is written (a Llama has no position
    // table, but it was trained to its max_position_embeddings, the bound transformers states).
    const int positions = source.spec.block_size();
    const std::string asked = parser.has("seq-len") ? parser.get("seq-len") : "";
    const bool digits =
        !asked.empty() && asked.size() <= 9 && asked.find_first_not_of("0123456789") == std::string::npos;
    if (digits && std::stoi(asked) > positions) {  // else get_int below names what is wrong
      const bool llmc_file =
          source.kind == WeightSource::Kind::kPretrained && !std::filesystem::is_directory(source.path);
      throw_input_error("zerotrain eval: --seq-len {} is past the model's {} positions ({}): pass at most {}",
                        parser.get("seq-len"), positions,
                        source.kind != WeightSource::Kind::kPretrained ? "its model.block_size"
                        : llmc_file                                    ? "the max_seq_len of its llm.c header"
                                    : "max_position_embeddings, or GPT-2's n_positions, in its config.json",
                        positions);
    }
    T = parser.get_int("seq-len", source.context, 1, positions);
    if (parser.has("tokens")) {
      data::TokenFileFormat format = data::TokenFileFormat::kAuto;
      if (!data::parse_token_file_format(parser.get("format", "auto"), &format)) {
        throw_input_error("zerotrain eval: --format must be auto, llmc or nanogpt (got '{}')", parser.get("format"));
      }
      corpus.emplace(
          data::TokenCorpus::open_shards({parser.get("tokens")}, format, source.spec.vocab_size(), "--tokens"));
      windows = std::min<std::int64_t>(parser.get_int("windows", 100, 1, 1 << 30),
                                       corpus->window_count(data::SampleOrder::kSequential, T));
      if (windows == 0) {
        throw_input_error("zerotrain eval: --tokens {}: no window of {} tokens (--seq-len {} and its next token)",
                          parser.get("tokens"), T + 1, T);
      }
    }
  });
  if (world->world_size() > 1) {
    // The cores this process may use, shared with the other ranks on its node (unbound ranks would
    // otherwise each start as many threads as the node has cores).
    source.num_threads = std::max(1, source.num_threads / ranks_on_this_node(world->world_size()));
  }
  const std::string threads_note = fit_threads_to_idle_cores(parser, source, ranks_on_this_node(world->world_size()));
  if (root) {
    for (const std::string& note : source.notes) print_err("{}\n", note);
  }
  const int batch_tokens = parser.get_int("batch-tokens", 8192, 1, 1 << 30);
  // Every rank must score the same files with the same model (a rank given other arguments would
  // otherwise hang in the gathers or print a mixture): one line naming what differs, exit 2.
  check_ranks_agree(*world, {{"command line", fmt::format("{}", fmt::join(args, " "))},
                             {"weights", source.path},
                             {"choices", choices ? fmt::format("{} rows", choices->rows()) : ""},
                             {"windows", fmt::format("{}", windows)},
                             {"validation data", run_data ? run_data->description() : ""}});
  std::optional<StandaloneModel> loaded;
  // Where a rank stopped by the launcher was (not "start-up"): the loading, then each scoring.
  world->set_context("the model's loading");
  on_every_rank(*world, [&] { loaded.emplace(source); });  // a GPU may be full on one rank only
  source.checkpoint.reset();                               // loaded: a live run's keep_last may take its checkpoint now
  StandaloneModel& model = *loaded;
  if (choices) {
    world->set_context("the scoring of --choices");
    // The forwards are each rank's own (a whole model in a store of its own); the rows' losses are
    // summed over the world.
    const ChoiceScore score = score_choices(
        *choices, plan_choices(*choices, world->world_size(), batch_tokens, source.spec.block_size()),
        [&](int rows, int seq_len) { return model.build(rows, seq_len); }, model.store(), *world);
    if (!score.nonfinite.empty()) {  // every rank holds the same: one line for the job
      fail_on_every_rank(
          *world, fmt::format("{}: {} (its forward overflowed): no score to report", choices->path(), score.nonfinite),
          /*input_error=*/false);
    }
    if (root)
      print_out("{}: {}/{} correct = {:.4f} (each completion's mean loss given its context, the lowest the answer)\n",
                choices->path(), score.correct, score.examples, score.accuracy());
  }
  if (corpus) {
    world->set_context("the scoring of --tokens");
    // The default window is the model's whole context (131072 tokens for a Llama 3.2): said where
    // it runs out of memory.
    const std::string oom_hint =
        parser.has("seq-len") ? ""
                              : fmt::format(
                                    "the windows are --seq-len tokens, by default the model's context of {}: pass a "
                                    "smaller --seq-len",
                                    T);
    const double loss = token_loss(model, *corpus, T, windows, batch_tokens, *world, oom_hint);
    if (!std::isfinite(loss)) {  // every rank holds the same sum: one line for the job
      fail_on_every_rank(*world,
                         fmt::format("{}: the model's loss is {} (its forward overflowed): no loss to report",
                                     parser.get("tokens"), loss),
                         /*input_error=*/false);
    }
    if (root) {
      // How much of the file that is (the default --windows reads its first 100), and the
      // activations where --val made them the run's rather than the default f32.
      const std::int64_t fitting = corpus->window_count(data::SampleOrder::kSequential, T);
      print_out(
          "{}: loss {:.6f} (perplexity {:.3f}) over {} window{} of {} token{}: {} of its {} tokens scored{}{}\n",
          parser.get("tokens"), loss, std::exp(loss), windows, windows == 1 ? "" : "s", T, T == 1 ? "" : "s",
          windows * T, corpus->token_count(),
          windows < fitting ? fmt::format(" ({} windows fit: --windows {} scores them all)", fitting, fitting) : "",
          run_data && !parser.has("dtype") && source.activations == DType::kBF16
              ? "; bf16 activations, the run's, as --val takes them (--dtype f32 for fp32)"
              : "");
    }
  }
  if (run_data) {
    world->set_context("the run's validation loss (--val)");
    const int B = run->train.micro_batch, seq_len = run->train.seq_len, batches = run->train.eval_batches;
    std::unique_ptr<LanguageModel> m;
    on_every_rank(*world, [&] { m = model.build(B, seq_len); });
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * seq_len), targets(inputs.size());
    const ValidationLoss v = validation_loss(
        run_data->val(), run_data->val_stream(), B, seq_len, batches, *world, inputs.data(), targets.data(),
        [&] { return m->forward(model.store(), inputs.data(), targets.data(), {.training = false}); },
        [&] { m->release_activations(); });
    if (!std::isfinite(*v.loss)) {  // every rank holds the same loss: one line for the job
      fail_on_every_rank(
          *world, fmt::format("the run's validation loss is {} (its forward overflowed): no loss to report", *v.loss),
          /*input_error=*/false);
    }
    // The float as the run's metrics.jsonl records it, shortest form: read back, the same bits.
    // Where the run's forwards were not these (another device, dtype, or int8-decoded weights),
    // the line says so.
    const auto named = [](DType d) { return d == DType::kBF16 ? "bf16" : "fp32"; };  // as the config says
    std::vector<std::string> unlike;
    if (source.device != run->device) unlike.push_back(fmt::format("it trained on {}", device_name(run->device)));
    if (source.activations != run->activation_dtype) {
      unlike.push_back(fmt::format("its activations were {}", named(run->activation_dtype)));
    }
    // int8 gathers act on several ranks (or one off its solo path): as the run was, where it says.
    RunConfig as_run = *run;
    as_run.world_size = run_ranks > 0 ? run_ranks : 2;
    if (acting_zero_options(as_run).gather_wire == WireDType::kInt8) {
      unlike.push_back(
          fmt::format("it computed with int8-decoded weights (zero.gather_dtype{}), these are its exact ones",
                      run_ranks > 0 ? "" : ", on several ranks"));
    }
    if (root && !unlike.empty()) {
      print_err("zerotrain eval: note: --val on {} with {} activations: {}; its logged val_loss differs slightly\n",
                device_name(source.device), named(source.activations), fmt::join(unlike, "; "));
    }
    if (root) {
      print_out(
          "validation (the run's evaluation: {} batch{} of {} window{} of {} tokens, data.order {}): val_loss {}\n",
          batches, batches == 1 ? "" : "es", B, B == 1 ? "" : "s", seq_len, run->data.order, *v.loss);
    }
  }
  if (root && !threads_note.empty()) print_err("zerotrain eval: note: {}\n", threads_note);
  return 0;
}

}  // namespace zt::cli
