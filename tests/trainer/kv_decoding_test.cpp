// Decoding through a key/value cache (ForwardOptions::kv_cache, models/kv_cache.h) against the
// whole window's forward, for both families and their unit layouts: a prompt's forward and then
// steps of one and of several tokens, each on a model built for its own length, give the logits the
// whole sequence's forward gives those rows. Tolerances (normwise per row): 1e-5 with fp32
// activations (products over fewer rows, rounded in another order), 2e-2 with bf16 ones (a last-bit
// difference before a bf16 rounding moves an activation by 2^-8, and it carries through the
// layers). And sample_tokens draws the same tokens through the cache as over the whole window, and
// the models it builds (forwards only) hold none of the backward's scratch, as their footprint says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/text_sampler.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops.h"
#include "models/model_family.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/trainer/resident_model.h"

namespace zt {
namespace {

using nlohmann::json;

struct DecodeCase {
  std::string name;
  json model, train;
  DType activations = DType::kF32;
};

const json kGpt = {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 32}, {"block_size", 32}, {"vocab_size", 200}};
const json kLlama = {{"arch", "llama"},  {"n_layer", 2},          {"n_head", 4},       {"n_kv_head", 2},
                     {"n_embd", 32},     {"block_size", 32},      {"vocab_size", 200}, {"rope_theta", 500.0},
                     {"norm_eps", 1e-5}, {"tie_embeddings", true}};

std::vector<DecodeCase> cases() {
  json llama_untied = kLlama;
  llama_untied["tie_embeddings"] = false;
  return {
      {"gpt2", kGpt, json::object()},
      {"gpt2 head_chunks 2, block_units 2", kGpt, {{"head_chunks", 2}, {"block_units", 2}}},
      {"gpt2 bf16 activations", kGpt, json::object(), DType::kBF16},
      {"llama grouped-query", kLlama, json::object()},
      {"llama untied, head_chunks 2, block_units 2", llama_untied, {{"head_chunks", 2}, {"block_units", 2}}},
      {"llama bf16 activations", kLlama, json::object(), DType::kBF16},
  };
}

// A one-rank resident store of the case's model, initialised from `seed`.
struct DecodeSetup : testing::ResidentModel {
  DType activations;

  DecodeSetup(const DecodeCase& c, std::uint64_t seed)
      : ResidentModel({{"model", c.model}, {"train", c.train}}, c.name, seed), activations(c.activations) {}
  std::unique_ptr<LanguageModel> build(int seq_len) {
    return ResidentModel::build(sampling_build(seq_len, activations));
  }
  // Logits [T, V] of a forward of `tokens` on a model built for their length.
  std::vector<float> logits(const std::vector<std::int32_t>& tokens, KvCache* cache = nullptr) {
    const std::unique_ptr<LanguageModel> model = build(static_cast<int>(tokens.size()));
    std::vector<float> out(tokens.size() * static_cast<std::size_t>(model->vocab_size()));
    const std::vector<std::int32_t> targets(tokens.size(), 0);
    model->forward(store, tokens.data(), targets.data(),
                   {.training = false, .logits_out = out.data(), .kv_cache = cache});
    return out;
  }
};

TEST(KvDecoding, StepsGiveTheWholeWindowsLogits) {
  ZT_SEEDED_RNG(rng);
  for (const DecodeCase& c : cases()) {
    SCOPED_TRACE(c.name);
    DecodeSetup s(c, static_cast<std::uint64_t>(rng.ints(1, 0, 1 << 30)[0]));
    const int N = 13, V = s.spec.vocab_size();
    const std::vector<std::int32_t> tokens = rng.ints(N, 0, V);
    const std::vector<float> whole = s.logits(tokens);

    const std::unique_ptr<KvCache> cache = s.build(1)->make_kv_cache(N);
    ASSERT_NE(cache, nullptr);
    std::vector<float> decoded;
    // The prompt (5), single tokens, a step of three, single tokens again.
    for (const auto& [begin, end] : {std::pair{0, 5}, {5, 6}, {6, 7}, {7, 10}, {10, 11}, {11, 12}, {12, 13}}) {
      const std::vector<float> rows = s.logits({tokens.begin() + begin, tokens.begin() + end}, cache.get());
      decoded.insert(decoded.end(), rows.begin(), rows.end());
      EXPECT_EQ(cache->length(), end);
    }
    const double tol = c.activations == DType::kBF16 ? 2e-2 : 1e-5;
    for (int r = 0; r < N; ++r) {
      const std::vector<float> got(decoded.begin() + r * V, decoded.begin() + (r + 1) * V);
      const std::vector<double> want(whole.begin() + r * V, whole.begin() + (r + 1) * V);
      EXPECT_TRUE(test::close_normwise(got, want, tol)) << "position " << r;
    }
    EXPECT_THROW(s.logits({tokens[0]}, cache.get()), std::exception) << "a step past the cache's capacity";
    // Refused before the store is touched (a pass left open would refuse the next forward).
    EXPECT_NO_THROW(s.logits(tokens)) << "the store is in no pass";
  }
}

TEST(KvDecoding, ACacheOfAnotherShapeOrPastTheContextIsRefused) {
  ZT_SEEDED_RNG(rng);
  const std::vector<DecodeCase> all = cases();
  DecodeSetup gpt(all[0], 1), llama(all[3], 2);
  const std::unique_ptr<KvCache> llama_cache = llama.build(1)->make_kv_cache(4);
  const std::vector<std::int32_t> tokens = rng.ints(2, 0, gpt.spec.vocab_size());
  EXPECT_THROW(gpt.logits(tokens, llama_cache.get()), std::exception) << "another model's cache";
  EXPECT_NO_THROW(gpt.logits(tokens)) << "the store is in no pass";
  const int context = gpt.spec.block_size();
  EXPECT_NE(gpt.build(1)->make_kv_cache(context), nullptr);
  EXPECT_THROW(gpt.build(1)->make_kv_cache(context + 1), std::exception) << "past the model's context";
  const SamplingModelBuilder build = [&](int seq_len) { return gpt.build(seq_len); };
  const SamplingOptions options{context, 1.0f, 0, 5, 0};
  EXPECT_THROW(generate_tokens_cached(build, gpt.store, {1, 2}, options), std::exception)
      << "a prompt and draws past the context";
  EXPECT_EQ(sample_tokens(build, gpt.store, {1, 2}, options, context).size(), static_cast<std::size_t>(context))
      << "sample_tokens slides the window instead";
}

TEST(KvDecoding, SamplingThroughTheCacheDrawsTheWindowsTokens) {
  ZT_SEEDED_RNG(rng);
  for (const DecodeCase& c : cases()) {
    if (c.activations != DType::kF32) continue;  // a bf16 rounding may move a draw
    SCOPED_TRACE(c.name);
    DecodeSetup s(c, static_cast<std::uint64_t>(rng.ints(1, 0, 1 << 30)[0]));
    const SamplingModelBuilder build = [&](int seq_len) { return s.build(seq_len); };
    SamplingOptions options{/*max_new_tokens=*/20, /*temperature=*/1.0f, /*top_k=*/0,
                            static_cast<std::uint64_t>(rng.ints(1, 0, 1 << 30)[0]), 0};
    const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5};
    const auto cached = sample_tokens(build, s.store, prompt, options, s.spec.block_size());
    options.kv_cache = false;
    const auto windowed = sample_tokens(build, s.store, prompt, options, s.spec.block_size());
    EXPECT_EQ(cached.size(), 20u);
    EXPECT_EQ(cached, windowed);
    // Past the context the window slides, with or without kv_cache; with it, the draws that fit
    // the context still go through the cache (a prompt model, a one-token model, then the window's:
    // one token past the context made every draw run the whole window, ~100x slower).
    options.max_new_tokens = 40;
    std::vector<int> built;
    const SamplingModelBuilder counting = [&](int seq_len) {
      built.push_back(seq_len);
      return s.build(seq_len);
    };
    const auto long_windowed = sample_tokens(counting, s.store, prompt, options, s.spec.block_size());
    EXPECT_EQ(built, std::vector<int>{s.spec.block_size()});
    options.kv_cache = true;
    built.clear();
    EXPECT_EQ(sample_tokens(counting, s.store, prompt, options, s.spec.block_size()), long_windowed);
    EXPECT_EQ(built, (std::vector<int>{static_cast<int>(prompt.size()), 1, s.spec.block_size()}));
  }
}

// A stop request (`zerotrain sample`'s Ctrl-C) ends a sample after the draw in hand: the tokens so
// far, the first ones of the whole sample, through the cache and over the window alike.
TEST(KvDecoding, AStopRequestEndsTheSampleWithTheTokensSoFar) {
  ZT_SEEDED_RNG(rng);
  const DecodeCase c = cases().front();
  DecodeSetup s(c, static_cast<std::uint64_t>(rng.ints(1, 0, 1 << 30)[0]));
  const SamplingModelBuilder build = [&](int seq_len) { return s.build(seq_len); };
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5};
  for (const bool kv_cache : {true, false}) {
    SCOPED_TRACE(kv_cache ? "through the cache" : "over the window");
    SamplingOptions options{
        /*max_new_tokens=*/20,
        /*temperature=*/1.0f,
        /*top_k=*/0,           static_cast<std::uint64_t>(rng.ints(1, 0, 1 << 30)[0]), 0, kv_cache};
    const auto whole = sample_tokens(build, s.store, prompt, options, s.spec.block_size());
    ASSERT_EQ(whole.size(), 20u);
    // A sample asks whether to stop before each draw after its first, through the cache or the
    // window, fitting the context or not (the trainer votes on every 16th ask: an ask after the
    // last draw could throw a whole sample away).
    for (const int tokens : {20, s.spec.block_size() + 3}) {
      int asks = 0;
      SamplingOptions counted = options;
      counted.max_new_tokens = tokens;
      counted.stop_requested = [&] { return ++asks, false; };
      EXPECT_EQ(sample_tokens(build, s.store, prompt, counted, s.spec.block_size()).size(),
                static_cast<std::size_t>(tokens));
      EXPECT_EQ(asks, tokens - 1) << tokens << " tokens";
    }
    // The last draw through the cache, where the sliding window would take over in a longer sample.
    const int at_context = s.spec.block_size() - static_cast<int>(prompt.size()) + 1;
    options.max_new_tokens = at_context + 3;
    const auto longer = sample_tokens(build, s.store, prompt, options, s.spec.block_size());
    int longer_drawn = 0;
    options.on_token = [&](std::int32_t) { ++longer_drawn; };
    options.stop_requested = [&] { return longer_drawn >= at_context; };
    EXPECT_EQ(sample_tokens(build, s.store, prompt, options, s.spec.block_size()),
              std::vector<std::int32_t>(longer.begin(), longer.begin() + at_context));
    options.max_new_tokens = 20;
    for (const int stop_after : {1, 7}) {
      int drawn = 0;
      options.on_token = [&](std::int32_t) { ++drawn; };
      options.stop_requested = [&] { return drawn >= stop_after; };
      const auto stopped = sample_tokens(build, s.store, prompt, options, s.spec.block_size());
      EXPECT_EQ(stopped, std::vector<std::int32_t>(whole.begin(), whole.begin() + stop_after));
    }
    // A request before the first draw still draws one token: the prompt's forward has run.
    options.on_token = {};
    options.stop_requested = [] { return true; };
    EXPECT_EQ(sample_tokens(build, s.store, prompt, options, s.spec.block_size()).size(), 1u);
  }
}

// A prompt's forward through the cache keeps no [NH, T, T] probabilities (the window's forward on
// the CPU does, a block's while the block runs): its activation peak is the window's less exactly
// one layer's of those bytes.
TEST(KvDecoding, APromptsForwardKeepsNoAttentionProbabilities) {
  for (const DecodeCase& c : cases()) {
    if (c.activations != DType::kF32) continue;
    SCOPED_TRACE(c.name);
    DecodeSetup s(c, 3);
    const int T = 24;
    const std::vector<std::int32_t> tokens(T, 1);
    std::int64_t peak[2];
    for (const bool cached : {false, true}) {
      const std::unique_ptr<KvCache> cache = cached ? s.build(1)->make_kv_cache(T) : nullptr;
      s.tracker.reset_peaks();
      const std::int64_t before = s.tracker.snapshot().current(MemCategory::kActivations);
      s.logits(tokens, cache.get());
      peak[cached] = s.tracker.snapshot().peak(MemCategory::kActivations) - before;
    }
    // fp32, one layer (a sampling model frees each block's activations after its forward, so one
    // block's are held at a time): the probabilities, in place of which a decoding layer's buffer
    // lays out an (unwritten) log-sum-exp row per head.
    const std::int64_t heads = std::int64_t{4} * s.spec.model.n_head;
    EXPECT_EQ(peak[0] - peak[1], heads * T * T - heads * T) << "window " << peak[0] << " B, cached " << peak[1];
  }
}

TEST(KvDecoding, SamplingModelsAllocateNoBackwardScratch) {
  ZT_SEEDED_RNG(rng);
  for (const DecodeCase& c : cases()) {
    SCOPED_TRACE(c.name);
    DecodeSetup s(c, static_cast<std::uint64_t>(rng.ints(1, 0, 1 << 30)[0]));
    for (const bool backward : {false, true}) {
      ModelBuild b = sampling_build(7);
      b.activations = c.activations;
      b.backward = backward;
      const std::int64_t before = s.tracker.snapshot().current(MemCategory::kWorkspace);
      const std::unique_ptr<LanguageModel> model = make_model(s.spec, b, s.tracker, s.ctx);
      const std::int64_t held = s.tracker.snapshot().current(MemCategory::kWorkspace) - before;
      EXPECT_EQ(held, s.spec.family().footprint(s.spec, b, DType::kF32, Device::kCPU).workspace_bytes)
          << "backward " << backward;
      if (backward) {
        EXPECT_GE(held, 4 * s.table.max_unit_numel()) << "the fp32 gradient scratch of the largest unit";
        continue;
      }
      EXPECT_EQ(held, 0) << "fp32 parameters, fp32 or bf16 activations on the CPU: nothing but the backward's";
      const std::vector<std::int32_t> tokens = rng.ints(7, 0, s.spec.vocab_size()), targets(7, 0);
      model->forward(s.store, tokens.data(), targets.data(), {.training = false});
      EXPECT_THROW(model->backward(s.store), std::exception);
    }
  }
}

// The GPT-2 block's fused-residual branch (CUDA's; models/fused_residual_test.cpp), run on the CPU:
// a prompt then single steps through the cache give the unfused block's logits bit for bit.
TEST(KvDecoding, TheFusedResidualBranchDecodesTheSameLogits) {
  ZT_SEEDED_RNG(rng);
  for (const DecodeCase& c : cases()) {
    if (c.model.contains("arch")) continue;  // the Llama adds every residual in its products anyway
    SCOPED_TRACE(c.name);
    DecodeSetup s(c, static_cast<std::uint64_t>(rng.ints(1, 0, 1 << 30)[0]));
    const std::vector<std::int32_t> tokens = rng.ints(7, 0, s.spec.vocab_size());
    const auto decode = [&] {
      const std::unique_ptr<KvCache> cache = s.build(1)->make_kv_cache(7);
      std::vector<float> rows = s.logits({tokens.begin(), tokens.begin() + 4}, cache.get());
      for (int t = 4; t < 7; ++t) {
        const std::vector<float> step = s.logits({tokens[t]}, cache.get());
        rows.insert(rows.end(), step.begin(), step.end());
      }
      return rows;
    };
    const std::vector<float> unfused = decode(), unfused_whole = s.logits(tokens);
    const ops::ScopedCpuBackend fusing(cpu::residual_fusing_ops_backend());
    EXPECT_TRUE(decode() == unfused);
    EXPECT_TRUE(s.logits(tokens) == unfused_whole);
  }
}

}  // namespace
}  // namespace zt
