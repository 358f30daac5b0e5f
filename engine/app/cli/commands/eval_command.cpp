// `zerotrain eval`: a model's multiple-choice accuracy (llm.c's eval files: HellaSwag) from its
// saved weights (engine/app/cli/commands/standalone_model.h: a run's, a checkpoint's or pretrained
// ones, on the CPU or a GPU), scored as a training run's evaluations score data.choice_file.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/cli/commands/standalone_model.h"
#include "engine/app/data/choice_file.h"
#include "engine/app/trainer/choice_eval.h"

namespace zt::cli {

int eval_main(const std::vector<std::string>& args) {
  ArgParser parser("eval", "Score a model's saved weights on a multiple-choice eval file (HellaSwag).");
  add_weight_flags(parser, "evaluate in");
  parser
      .value_flag("choices", "FILE",
                  "a multiple-choice eval file in llm.c's format (dev/data/hellaswag.py's hellaswag_val.bin)",
                  /*required=*/true)
      .value_flag("batch-tokens", "N", "tokens a forward holds, in rows as long as the longest example (default 8192)");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  const WeightSource source = resolve_weight_source(parser, "eval");
  const int batch_tokens = parser.get_int("batch-tokens", 8192, 1, 1 << 30);
  const std::string path = parser.get("choices");
  const data::ChoiceFile file = data::ChoiceFile::load(path, source.spec.vocab_size());
  if (file.longest_input() > source.spec.block_size()) {
    throw_input_error("zerotrain eval: --choices {}: its longest example needs {} positions, over the model's {}", path,
                      file.longest_input(), source.spec.block_size());
  }
  StandaloneModel model(source);
  const ChoiceScore score = score_choices(
      file, [&](int rows, int seq_len) { return model.build(rows, seq_len); }, model.store(), model.comm(),
      batch_tokens);
  fmt::print("{}: {}/{} correct = {:.4f} (each completion's mean loss given its context, the lowest the answer)\n",
             path, score.correct, score.examples, score.accuracy());
  return 0;
}

}  // namespace zt::cli
