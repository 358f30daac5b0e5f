// `zerotrain sample`: generates text from a model's saved weights (engine/app/cli/commands/
// standalone_model.h: a run's, a checkpoint's or pretrained ones, on the CPU or a GPU).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/cli/commands/standalone_model.h"
#include "engine/app/data/token_text.h"
#include "engine/app/data/utf8.h"
#include "engine/app/trainer/text_sampler.h"
#include "engine/base/core/console.h"
#include "engine/distributed/launch/signals.h"

namespace zt::cli {

namespace {

// A number flag's value as std::stod reads the whole of it, else NaN, which no range holds: each
// caller refuses what is outside its own range, naming it.
double number_or_nan(const std::string& given) {
  std::size_t used = 0;
  try {
    const double value = std::stod(given, &used);
    if (used == given.size()) return value;
  } catch (const std::exception&) {}
  return std::numeric_limits<double>::quiet_NaN();
}

SamplingOptions sampling_options(const ArgParser& parser, const data::TokenText& text) {
  double temperature = 0.8;
  if (parser.has("temperature")) {
    const std::string given = parser.get("temperature");
    temperature = number_or_nan(given);
    // log.sample_temperature's range: near 0 the logits' scale 1/T overflows a float (1e-50 became
    // 0). 0 itself is greedy decoding, as HF's and vLLM's users write it.
    if (!(temperature == 0.0 || (temperature >= 0.001 && temperature <= 100.0))) {
      throw_input_error("zerotrain sample: --temperature must be 0 (greedy) or a number in [0.001, 100] (got '{}')",
                        given);
    }
  }
  const bool greedy = temperature == 0.0;  // the most likely token each time (ties: the lowest id)
  SamplingOptions options{
      parser.get_int("tokens", 200, 0, 1000000), greedy ? 1.0f : static_cast<float>(temperature),
      greedy ? 1 : parser.get_int("top-k", 40, 0, 65535),
      // Up to 2^63 - 1: a logged sample's seed is train.seed (< 2^31) + its step.
      static_cast<std::uint64_t>(parser.get_int64("seed", 1, 0, std::numeric_limits<std::int64_t>::max())),
      text.size()};
  options.drawable = text.decodable();
  options.kv_cache = !parser.has("no-kv-cache");
  options.greedy = greedy;
  if (parser.has("top-p")) {
    const double top_p = number_or_nan(parser.get("top-p"));
    if (!(top_p > 0.0 && top_p <= 1.0)) {
      throw_input_error("zerotrain sample: --top-p must be a number in (0, 1] (got '{}')", parser.get("top-p"));
    }
    options.top_p = static_cast<float>(top_p);
  }
  return options;
}

// The prompt's and the sample's text: --tokenizer or --vocab when given, else the tokenizer.json
// or vocab.json in `dir` (the run directory, or a pretrained folder), else token ids.
data::TokenText token_text(const ArgParser& parser, const std::string& dir) {
  if (parser.has("tokenizer") && parser.has("vocab")) {
    throw_input_error("zerotrain sample: --tokenizer and --vocab each give the text's tokens: give one");
  }
  for (const char* flag : {"tokenizer", "vocab"}) {
    if (parser.has(flag) && !std::filesystem::exists(parser.get(flag))) {
      throw_input_error("zerotrain sample: --{} {}: no such file", flag, parser.get(flag));
    }
  }
  if (parser.has("tokenizer")) return data::TokenText::from_tokenizer_file(parser.get("tokenizer"));
  if (parser.has("vocab")) return data::TokenText(data::Vocab::load(parser.get("vocab")));
  return dir.empty() ? data::TokenText() : data::TokenText::from_dir(dir);
}

// The prompt's tokens, and the most positions its sample may attend to.
struct Prompt {
  std::string text;
  std::vector<std::int32_t> ids;
  int limit = 1;
  int model_positions = 1;               // the model's own (block_size): more than `limit` from a run's seq_len
  bool text_encodes_to_nothing = false;  // ids then hold token 0 alone
};

Prompt encode_prompt(const ArgParser& parser, const data::TokenText& text, const std::string& text_dir, int limit,
                     int model_positions, int vocab_size) {
  // Without a tokenizer or vocabulary a prompt has no tokens: refused rather than dropped (the
  // sample would continue nothing, whatever the prompt said).
  if (parser.has("prompt") && !text.has()) {
    throw_input_error(
        "zerotrain sample: --prompt needs a tokenizer to encode it, and none was found ({}): give --tokenizer "
        "FILE or --vocab FILE",
        "no tokenizer.json or vocab.json " + (text_dir.empty() ? std::string("beside the weights") : "in " + text_dir));
  }
  Prompt p{parser.get("prompt", "\n"), {}, limit, model_positions};
  try {
    p.ids = text.encode_prompt(p.text);
  } catch (const InputError& e) {
    // The default prompt, a newline, in a vocabulary without one: say which prompt it was.
    if (parser.has("prompt")) throw_input_error("zerotrain sample: --prompt: {}", e.what());
    throw_input_error("zerotrain sample: the default prompt (a newline): {}; give one with --prompt", e.what());
  }
  // A model predicts from at least one position: a prompt of no tokens (an empty one where the
  // tokenizer has no document delimiter, or no tokenizer at all) starts from token 0 (said so by
  // generate_and_print where there is a tokenizer; without one the ids line says it).
  if (p.ids.empty()) {
    p.ids.push_back(0);
    p.text_encodes_to_nothing = true;
  }
  for (const std::int32_t id : p.ids) {  // a tokenizer not the model's: its ids would index past the table
    if (id >= vocab_size) {
      throw_input_error(
          "zerotrain sample: the prompt encodes to token {}, outside the model's vocabulary of {}: is the "
          "tokenizer the model's?",
          id, vocab_size);
    }
  }
  return p;
}

// The prompt's continuation, printed (after the prompt's text where there is a tokenizer).
int generate_and_print(StandaloneModel& model, const data::TokenText& text, const SamplingOptions& options,
                       const Prompt& prompt, const std::vector<std::int32_t>& end_ids) {
  const SamplingModelBuilder build = [&](int seq_len) { return model.build(1, seq_len); };
  // The text as it is drawn, token by token (a long sample shows at once, and a Ctrl-C keeps what
  // came): the same bytes as decoding the whole, since decoding joins each token's bytes (token
  // ids without a tokenizer: joined by spaces).
  // A byte-level vocabulary's character may come in several tokens, or never complete: the text is
  // printed as valid UTF-8 as it completes (what the run's metrics log holds of a sample).
  data::Utf8Repair utf8;
  if (text.has() && prompt.text_encodes_to_nothing) {
    const std::int32_t zero[] = {0};
    print_err("zerotrain sample: note: the prompt encodes to no token; the sample starts from token 0 ({:?})\n",
              text.decode(zero));
  }
  if (text.has()) print_out("{}", utf8.feed(prompt.text));
  SamplingOptions streaming = options;
  bool first = true;
  // A drawn end of text (the model's eos_token_id) ends the sample after it, as generate stops.
  std::optional<std::int32_t> ended_at;
  streaming.on_token = [&](std::int32_t token) {
    const std::int32_t one[] = {token};
    print_out("{}{}", !text.has() && !first ? " " : "", utf8.feed(text.decode(one)));
    flush_stdout();
    first = false;
    if (std::find(end_ids.begin(), end_ids.end(), token) != end_ids.end()) ended_at = token;
  };
  // Ctrl-C (or SIGTERM) ends a long sample after the token being drawn, with its text and the
  // summary below; a second one ends it at once. Installed only now, so that one during the
  // weights' load still ends the process there.
  install_stop_request_handlers(
      "zerotrain sample", "the sample ends after the token being drawn (a second SIGTERM or SIGINT ends it at once)");
  set_second_stop_line("zerotrain sample: a second stop signal: exiting now\n");
  // Standard output that cannot be written (a full disk, a pipe whose reader ended while SIGPIPE is
  // ignored) ends the sample too: its tokens would be drawn for nobody (200,000 of them took 86 s).
  streaming.stop_requested = [&] { return ended_at.has_value() || stop_signal() != 0 || std::ferror(stdout) != 0; };
  const auto started = std::chrono::steady_clock::now();
  const auto tokens = sample_tokens(build, model.store(), prompt.ids, streaming, prompt.limit);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  print_out("{}\n", utf8.finish());
  flush_stdout();
  // On stderr, so the text on stdout stays the text alone (tools/bench_sampling.py reads this line).
  // A signal after the last draw stopped nothing: the sample is whole.
  const int stopped_by = static_cast<int>(tokens.size()) < options.max_new_tokens ? stop_signal() : 0;
  const bool ended = ended_at.has_value() && static_cast<int>(tokens.size()) < options.max_new_tokens;
  // "N tokens in S s" stays whole: tools parse it.
  // A prompt past the positions the model attends to conditions the sample by its last ones only,
  // as nanoGPT crops it (transformers' generate refuses such a prompt): said, and counted as run.
  const std::size_t prompt_run = std::min(prompt.ids.size(), static_cast<std::size_t>(prompt.limit));
  // Where a run trained on windows shorter than its model's positions, the sample keeps to them
  // (what the run trained the model on): a draw past them slides the window, and a sample of the
  // same weights from their export (or generate) attends to every position and draws otherwise.
  // (A prompt cut off is said apart, below.) The k-th draw reads the prompt and k tokens before it.
  const auto limit = static_cast<std::size_t>(prompt.limit);
  const bool slid = prompt.limit < prompt.model_positions && prompt.ids.size() <= limit && !tokens.empty() &&
                    prompt.ids.size() + tokens.size() - 1 > limit;
  print_err(
      "zerotrain sample: {}{} tokens in {:.3f} s ({:.1f} tokens/s; the models' set-up and the prompt's {} "
      "position{} included){}{}{}\n",
      stopped_by != 0 ? fmt::format("stopped by {} after ", signal_name(stopped_by)) : "", tokens.size(), seconds,
      static_cast<double>(tokens.size()) / seconds, prompt_run, prompt_run == 1 ? "" : "s",
      ended && stopped_by == 0
          ? fmt::format("; ended by the end-of-text token {} (--ignore-eos draws on past it)", *ended_at)
          : "",
      prompt.ids.size() > prompt_run
          ? fmt::format("; the prompt's first {} of {} tokens were cut off: the sample attends to {} positions",
                        prompt.ids.size() - prompt_run, prompt.ids.size(), prompt.limit)
          : "",
      slid ? fmt::format("; past {} positions each token attended to the last {} only, the run's train.seq_len (the "
                         "model has {}: a sample of its export attends to them all)",
                         prompt.limit, prompt.limit, prompt.model_positions)
           : "");
  return stopped_by != 0 ? 128 + stopped_by : 0;  // as a shell reports a command its signal ended
}

}  // namespace

int sample_main(const std::vector<std::string>& args) {
  ArgParser parser("sample", "Generate text from a training run's final weights, a checkpoint or pretrained weights.");
  add_weight_flags(parser, "sample in");
  parser
      .value_flag("tokenizer", "FILE",
                  "tokenizer.json to encode the prompt and decode with (default: the run's, or the folder's)")
      .value_flag("vocab", "FILE",
                  "zerotrain vocab.json to decode with (default: the run directory's; no larger than the model's)")
      .value_flag("tokens", "N", "tokens to generate (default 200)")
      .value_flag("temperature", "T", "softmax temperature (default 0.8; 0: greedy, the most likely token each time)")
      .value_flag("top-k", "K", "sample among the K most likely tokens, 0 = all (default 40)")
      .value_flag("top-p", "P",
                  "then among the most likely of those while the probability before each is under P (nucleus "
                  "sampling; default 1: all)")
      .value_flag(
          "prompt", "TEXT",
          "text to continue (default a newline; \"\": a document's start, the bos_token of the tokenizer_config.json "
          "beside the tokenizer, else its <|endoftext|> or its kind, else token 0)")
      .value_flag("seed", "S", "sampling seed (default 1)")
      .bool_flag("ignore-eos",
                 "draw all --tokens tokens, past the model's end-of-text token (by default the sample ends at it, "
                 "as generate stops at eos_token_id)")
      .bool_flag("no-kv-cache",
                 "run the whole window for every token instead of the new token through a key/value "
                 "cache (slower; for comparison)");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  // Under a launcher every rank would draw the same text: rank 0 alone reads the weights, samples
  // and prints (each rank printed its errors and notes too; rank 0's error still fails the job). No
  // world is made for it (a rank past 0 has nothing to send). Outside mpirun, where a rank variable
  // may be one left in the environment (ZT_RANK=1, a torchrun worker's RANK), such a rank says why
  // it prints nothing rather than exiting 0 in silence.
  if (quiet_past_rank_zero("zerotrain sample")) return 0;
  WeightSource source = resolve_weight_source(parser, "sample");
  const std::string threads_note = fit_threads_to_idle_cores(parser, source);
  for (const std::string& note : source.notes) print_err("{}\n", note);
  // A bf16-activation run's samples (its logged ones) come from bf16 forwards; --dtype's default is
  // f32, whose logits differ in the last bits, and so, at times, the tokens drawn.
  const nlohmann::json precision = source.saved_config.is_object()
                                       ? source.saved_config.value("precision", nlohmann::json::object())
                                       : nlohmann::json::object();
  if (!parser.has("dtype") && precision.is_object() && precision.contains("activations") &&
      precision["activations"] == "bf16") {
    print_err(
        "zerotrain sample: note: the run computed with bf16 activations (precision.activations); this sample's "
        "forwards are fp32 (--dtype bf16 samples as the run did)\n");
  }
  // The text, the options and the prompt before the weights load, so a bad one fails at once.
  const data::TokenText text = token_text(parser, source.text_dir);
  // A zerotrain vocabulary holds no tokens past its model's (a run refuses one that would), so one
  // larger than the model's is another run's: its ids would decode as other characters. (A
  // tokenizer may: added tokens past the embedding leave the model's ids decoding as they should.)
  if (parser.has("vocab") && text.size() > source.spec.vocab_size()) {
    throw_input_error(
        "zerotrain sample: --vocab {} has {} tokens, more than the model's vocabulary of {}: not the vocabulary "
        "it was trained with (its samples would decode as other characters)",
        parser.get("vocab"), text.size(), source.spec.vocab_size());
  }
  const SamplingOptions options = sampling_options(parser, text);
  const Prompt prompt =
      encode_prompt(parser, text, source.text_dir, source.context, source.spec.block_size(), source.spec.vocab_size());
  StandaloneModel model(source);
  source.checkpoint.reset();  // loaded: a live run's keep_last may take its checkpoint now
  if (!text.has()) {          // what stdout will hold, where it is no text (said once the weights are sound)
    print_err(
        "zerotrain sample: no tokenizer.json or vocab.json {}: printing token ids (--tokenizer FILE or --vocab "
        "FILE decodes them)\n",
        source.text_dir.empty() ? std::string("beside the weights") : "in " + source.text_dir);
  }
  const int code = generate_and_print(model, text, options, prompt,
                                      parser.has("ignore-eos") ? std::vector<std::int32_t>{} : source.end_of_text_ids);
  if (!threads_note.empty()) print_err("zerotrain sample: note: {}\n", threads_note);
  return code;
}

}  // namespace zt::cli
