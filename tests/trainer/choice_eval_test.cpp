// Multiple-choice scoring (engine/app/trainer/choice_eval.h) on the CPU: how the rows are cut
// across ranks and forwards, and the score of random examples on a GPT-2 and a Llama against each
// row scored alone (a model built for exactly its inputs, the mean of its completion's position
// losses by hand from the logits), at every batching from a row a forward to all rows in one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/choice_eval.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "models/model_family.h"
#include "tests/trainer/resident_model.h"

namespace zt {
namespace {

using nlohmann::json;

// Writes examples in llm.c's eval file layout and loads them back.
data::ChoiceFile write_and_load(const std::vector<data::ChoiceExample>& examples, int vocab, const std::string& name) {
  std::vector<std::int32_t> header(256, 0);
  header[0] = data::kChoiceFileMagic;
  header[1] = data::kChoiceFileVersion;
  header[2] = static_cast<std::int32_t>(examples.size());
  std::vector<std::uint16_t> words;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const data::ChoiceExample& x = examples[i];
    const std::size_t start = words.size();
    words.insert(words.end(),
                 {65535, 0, static_cast<std::uint16_t>(i), static_cast<std::uint16_t>(x.label),
                  static_cast<std::uint16_t>(x.completions.size()), static_cast<std::uint16_t>(x.context.size())});
    words.insert(words.end(), x.context.begin(), x.context.end());
    for (const auto& c : x.completions) {
      words.push_back(static_cast<std::uint16_t>(c.size()));
      words.insert(words.end(), c.begin(), c.end());
    }
    words[start + 1] = static_cast<std::uint16_t>(2 * (words.size() - start));
    header[3] = std::max<std::int32_t>(header[3], words[start + 1]);  // the longest example's bytes, as llm.c writes
  }
  const std::string path = ::testing::TempDir() + "/zt_choices_" + name + ".bin";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(2 * words.size()));
  out.close();
  return data::ChoiceFile::load(path, vocab);
}

std::vector<data::ChoiceExample> random_examples(std::mt19937& rng, int count, int vocab) {
  std::uniform_int_distribution<int> token(0, vocab - 1), len(1, 6), ncomp(2, 5);
  std::vector<data::ChoiceExample> out(static_cast<std::size_t>(count));
  for (auto& x : out) {
    x.context.resize(static_cast<std::size_t>(len(rng)));
    for (auto& t : x.context) t = token(rng);
    x.completions.resize(static_cast<std::size_t>(ncomp(rng)));
    for (auto& c : x.completions) {
      c.resize(static_cast<std::size_t>(len(rng)));
      for (auto& t : c) t = token(rng);
    }
    x.label = std::uniform_int_distribution<int>(0, static_cast<int>(x.completions.size()) - 1)(rng);
  }
  return out;
}

TEST(ChoiceEval, RowsAreCutEvenlyAcrossRanksAndForwards) {
  std::mt19937 rng(1);
  std::vector<data::ChoiceExample> examples = random_examples(rng, 7, 50);
  const data::ChoiceFile f = write_and_load(examples, 50, "plan");
  const int T = f.longest_input();
  for (int world : {1, 2, 3, 4, 64}) {
    for (std::int64_t tokens : {std::int64_t{1}, std::int64_t{3} * T, std::int64_t{1000} * T}) {
      const ChoicePlan p = plan_choices(f, world, tokens, 64);
      SCOPED_TRACE(::testing::Message() << world << " ranks, " << tokens << " tokens a forward");
      // The longest input rounded up to the attention kernels' tile, within the forward's tokens.
      EXPECT_EQ(p.seq_len, std::max<std::int64_t>(T, std::min<std::int64_t>(64, tokens)));
      EXPECT_EQ(plan_choices(f, world, tokens, T).seq_len, T);  // within the model's context
      EXPECT_GE(p.rows_per_rank * world, f.rows());
      EXPECT_LT((p.rows_per_rank - 1) * world, f.rows());
      EXPECT_GE(p.rows_per_forward, 1);
      EXPECT_LE(p.rows_per_forward, std::max<std::int64_t>(1, tokens / T));
      EXPECT_LE(p.rows_per_forward, std::max<std::int64_t>(1, p.rows_per_rank));
      EXPECT_GE(p.forwards * p.rows_per_forward, p.rows_per_rank);
      EXPECT_LT((p.forwards - 1) * p.rows_per_forward, p.rows_per_rank);
    }
  }
}

struct ScoringSetup : testing::ResidentModel {
  explicit ScoringSetup(const json& model) : ResidentModel({{"model", model}}, "choice test", 5) {}
  std::unique_ptr<LanguageModel> build(int rows, int seq_len) {
    return ResidentModel::build(scoring_build(rows, seq_len));
  }
  // A row alone: its inputs exactly, the mean over its completion of -log softmax(logits)[target].
  double row_loss(const data::ChoiceExample& x, int k) {
    std::vector<std::int32_t> seq(x.context.begin(), x.context.end());
    seq.insert(seq.end(), x.completions[static_cast<std::size_t>(k)].begin(),
               x.completions[static_cast<std::size_t>(k)].end());
    const int n = static_cast<int>(seq.size()) - 1;
    const std::unique_ptr<LanguageModel> model = build(1, n);
    const int V = model->vocab_size();
    std::vector<float> logits(static_cast<std::size_t>(n) * V);
    const std::vector<std::int32_t> targets(seq.begin() + 1, seq.end());
    model->forward(store, seq.data(), targets.data(), {.training = false, .logits_out = logits.data()});
    double sum = 0.0;
    for (int i = static_cast<int>(x.context.size()) - 1; i < n; ++i) {
      const float* row = logits.data() + static_cast<std::size_t>(i) * V;
      double top = -std::numeric_limits<double>::infinity(), z = 0.0;
      for (int v = 0; v < V; ++v) top = std::max(top, static_cast<double>(row[v]));
      for (int v = 0; v < V; ++v) z += std::exp(row[v] - top);
      sum += top + std::log(z) - row[targets[static_cast<std::size_t>(i)]];
    }
    return sum / (n - (static_cast<int>(x.context.size()) - 1));
  }
};

TEST(ChoiceEval, ScoresAsEachRowAloneAtEveryBatching) {
  const json gpt = {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 32}, {"block_size", 16}, {"vocab_size", 60}};
  const json llama = {{"arch", "llama"},  {"n_layer", 2},     {"n_head", 4},         {"n_kv_head", 2},  {"n_embd", 32},
                      {"block_size", 16}, {"vocab_size", 60}, {"rope_theta", 500.0}, {"norm_eps", 1e-5}};
  for (const json& model : {gpt, llama}) {
    SCOPED_TRACE(model.dump());
    const std::uint64_t seed = std::random_device{}();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    ScoringSetup s(model);
    // Each example labelled from its rows scored alone: even ones their lowest-loss completion,
    // odd ones another. Drawn again (rarely) while two completions' losses lie within 1e-5, where
    // rounding alone could reorder them.
    std::vector<data::ChoiceExample> labelled;
    for (int attempt = 0; attempt < 20 && labelled.empty(); ++attempt) {
      labelled = random_examples(rng, 12, 60);
      for (std::size_t e = 0; e < labelled.size() && !labelled.empty(); ++e) {
        data::ChoiceExample& x = labelled[e];
        std::vector<double> loss;
        for (std::size_t k = 0; k < x.completions.size(); ++k) loss.push_back(s.row_loss(x, static_cast<int>(k)));
        const std::size_t best = static_cast<std::size_t>(std::min_element(loss.begin(), loss.end()) - loss.begin());
        for (std::size_t k = 0; k < loss.size(); ++k)
          if (k != best && loss[k] - loss[best] < 1e-5) labelled.clear();
        if (!labelled.empty()) x.label = static_cast<int>(e % 2 == 0 ? best : (best + 1) % loss.size());
      }
    }
    ASSERT_FALSE(labelled.empty()) << "20 draws of 12 examples, each with a near tie";
    const data::ChoiceFile f = write_and_load(labelled, 60, "score");
    const std::int64_t T = f.longest_input();
    for (std::int64_t tokens : {std::int64_t{1}, 5 * T, 1000 * T}) {
      const ChoiceScore score = score_choices(
          f, plan_choices(f, s.comm.world_size(), tokens, 16),
          [&](int rows, int seq_len) { return s.build(rows, seq_len); }, s.store, s.comm);
      EXPECT_EQ(score.examples, 12);
      EXPECT_EQ(score.correct, 6) << tokens << " tokens a forward";
    }
  }
}

// Completions of equal loss: the earliest is the model's choice, as llm.c's argmin takes it. Equal
// to the bit where every completion is the same tokens and each row runs in a forward of its own.
TEST(ChoiceEval, ATieGoesToTheEarlierCompletion) {
  const json gpt = {{"n_layer", 1}, {"n_head", 2}, {"n_embd", 16}, {"block_size", 16}, {"vocab_size", 60}};
  ScoringSetup s(gpt);
  std::vector<data::ChoiceExample> tied(2);
  tied[0].context = {3, 14, 15};
  tied[0].completions = {{9, 26}, {9, 26}, {9, 26}};
  tied[1].context = {27, 18};
  tied[1].completions = {{28, 1, 8}, {28, 1, 8}};
  const data::ChoiceFile f = write_and_load(tied, 60, "tie");  // both labelled 0
  const ChoiceScore score = score_choices(
      f, plan_choices(f, s.comm.world_size(), 1, 16), [&](int rows, int seq_len) { return s.build(rows, seq_len); },
      s.store, s.comm);
  EXPECT_EQ(score.examples, 2);
  EXPECT_EQ(score.correct, 2) << "a tie went to a later completion";
}

}  // namespace
}  // namespace zt
