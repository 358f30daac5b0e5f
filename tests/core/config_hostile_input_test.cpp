// Config text and --set values no user means to give, which must still end in one short InputError
// naming the key or file (engine/base/core/config_reader.h): values nested deeper than a recursive
// printer's stack, numbers past what a double or a long long holds, bytes that are not UTF-8, a NUL
// before the end of the file, values megabytes long.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/io/json_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"
#include "tests/core/config_test_util.h"

namespace zt {
namespace {

TEST(ConfigHostileInput, ADeeplyNestedValueIsRefusedAtParse) {
  constexpr int kDepth = 100000;  // copying or printing it recursed past the stack: a segfault, exit 139
  const std::string deep = std::string(kDepth, '[') + std::string(kDepth, ']');
  EXPECT_EQ(error_of([&] { parse_config_json("{\"model\": " + deep + "}", "deep.json"); }),
            "config error in deep.json: nested deeper than 64 levels");
  nlohmann::json doc = base();
  EXPECT_EQ(error_of([&] { apply_override(doc, "model.n_layer=" + deep); }),
            "--set 'model.n_layer': the value is nested deeper than 64 levels");
  // Within the limit, the message shows the value's first levels.
  const std::string text = "{\"model\": " + std::string(60, '[') + std::string(60, ']') + "}";
  const std::string msg = error_of([&] { parse_run_config(parse_config_json(text, "nested.json"), "nested.json"); });
  EXPECT_NE(msg.find("key 'model' must be a JSON object (got [[[...]]])"), std::string::npos) << msg;
}

// Any user file read as JSON (a pretrained folder's config.json, an index) has the same limit.
TEST(ConfigHostileInput, JsonFilesHaveTheDepthLimitToo) {
  const std::string path = testing::TempDir() + "/deep_config.json";
  std::ofstream(path) << "{\"n_layer\": " << std::string(100000, '[') << std::string(100000, ']') << "}";
  EXPECT_EQ(error_of([&] { read_json_file(path); }), path + ": JSON nested deeper than 64 levels");
}

TEST(ConfigHostileInput, LongValuesAreCutWithTheirSize) {
  nlohmann::json doc = base();
  doc["train"] = {{"micro_batch", std::string(10'000'000, 'x')}};
  const std::string msg = error_of([&] { parse_run_config(doc, "big.json"); });
  EXPECT_NE(msg.find("(10000000 bytes)"), std::string::npos) << msg.substr(0, 300);
  EXPECT_NE(preview_json(nlohmann::json(std::vector<int>(1000, 7))).find("(1000 elements)"), std::string::npos);
  EXPECT_LT(msg.size(), 250u);
  EXPECT_EQ(preview_json(nlohmann::json::array({1, 2, 3})), "[1, 2, 3]");  // short values whole
  EXPECT_EQ(preview_json(nlohmann::json{{"a", {{"b", {{"c", 1}}}}}}), "{\"a\": {\"b\": {...}}}");
}

TEST(ConfigHostileInput, NumbersPastTheirTypeAreRefusedWithTheirValue) {
  const std::string msg = error_of([] { parse_config_json("{\"train\": {\"micro_batch\": 1e999}}", "huge.json"); });
  EXPECT_EQ(msg, "config error in huge.json: number overflow parsing '1e999' at line 1, column 27");
  // Found outside strings: "x1e999" holds its text first.
  const std::string later = error_of(
      [] { parse_config_json("{\"log\": {\"run_dir\": \"x1e999\"}, \"train\": {\"micro_batch\": 1e999}}", "h.json"); });
  EXPECT_EQ(later, "config error in h.json: number overflow parsing '1e999' at line 1, column 57");
  nlohmann::json doc = base();
  doc["train"] = {{"micro_batch", 18446744073709551615ULL}};  // read as a long long: -1
  expect_error(doc, {"train.micro_batch' = 18446744073709551615 is out of range"});
  doc["train"] = {{"micro_batch", 9223372036854775808ULL}};
  expect_error(doc, {"= 9223372036854775808 is out of range"});
}

// A number below a double's normal range was read as 0 (or a subnormal): "lr": 1e-400 trained at an
// LR of 0 and a check named it "optim.lr = 0". Refused with its text and place; 0, a zero mantissa
// with any exponent, the smallest normal double and digits inside strings are read as before.
TEST(ConfigHostileInput, NumbersBelowADoublesRangeAreRefusedWithTheirText) {
  EXPECT_EQ(error_of([] { parse_config_json("{\"optim\": {\n  \"lr\": 1e-400}}", "tiny.json"); }),
            "config error in tiny.json: number underflow parsing '1e-400' at line 2, column 9 (below the smallest "
            "normal double, 2.22507e-308; write 0 where zero is meant)");
  EXPECT_NE(error_of([] {
              parse_config_json("{\"optim\": {\"lr\": -4.9e-324}}", "t.json");
            }).find("underflow parsing '-4.9e-324' at line 1, column 18"),
            std::string::npos);
  const nlohmann::json fine = parse_config_json(
      "{\"a\": 0, \"b\": 0e-999, \"c\": 2.2250738585072014e-308, \"d\": \"1e-400\", "
      "\"e\\\"1e-400\": -0.0, \"f\": [1e-300]}",
      "fine.json");
  EXPECT_EQ(fine["a"], 0);
  EXPECT_EQ(fine["d"], "1e-400");
  EXPECT_DOUBLE_EQ(fine["f"][0].get<double>(), 1e-300);
  nlohmann::json doc = base();
  EXPECT_EQ(error_of([&] { apply_override(doc, "optim.lr=1e-400"); }),
            "--set optim.lr=1e-400: number underflow parsing '1e-400' (below the smallest normal double, "
            "2.22507e-308; write 0 where zero is meant)");
  EXPECT_NE(error_of([&] { apply_override(doc, "optim={\"lr\": 1e-400}"); }).find("underflow parsing '1e-400'"),
            std::string::npos);  // inside an object given whole
  EXPECT_NO_THROW(apply_override(doc, "optim.lr=0.0"));
  EXPECT_NO_THROW(apply_override(doc, "log.sample_prompt=1e-400x"));  // a bare word, kept as text
}

// A key kept as a float (optim.lr, eps, weight_decay, ...) below float's normal range: 1e-46 is 0 as
// a float (it trained at an LR of 0, "lr": 0.0 in the run's config.json), 1e-40 a subnormal.
// Refused naming the key; 0 and the smallest normal float read as before.
TEST(ConfigHostileInput, FloatKeysBelowAFloatsRangeAreRefused) {
  nlohmann::json doc = base();
  for (const double tiny : {1e-46, 1e-40, 1.1e-38}) {
    doc["optim"] = {{"lr", tiny}};
    const std::string msg = error_of([&] { parse_run_config(doc, "test.json"); });
    EXPECT_NE(msg.find("key 'optim.lr' = "), std::string::npos) << msg;
    EXPECT_NE(msg.find("is below the smallest normal float (1.17549e-38)"), std::string::npos) << msg;
  }
  doc["optim"] = {{"lr", 0.0}, {"min_lr", 0.0}};
  EXPECT_NO_THROW(parse_run_config(doc, "test.json"));
  doc["optim"] = {{"lr", 1.1754944e-38}, {"min_lr", 0.0}};
  EXPECT_NO_THROW(parse_run_config(doc, "test.json"));
}

// Each key in its range, their product past what the memory model counts in int64 ([Note: sizes
// past the memory model] in model_section.cpp): refused before a prediction (train, plan, memory),
// where `zerotrain memory` printed negative totals. The same model at micro-batch 2 is counted, and
// a config is still read whatever its sizes (`sample --from` a long-context model trains nothing).
TEST(ConfigHostileInput, SizesPastTheMemoryModelsCountAreRefusedBeforeAPrediction) {
  nlohmann::json doc = base();
  doc["model"] = {{"n_layer", 2}, {"n_head", 1024}, {"n_embd", 2048}, {"block_size", 1 << 20}, {"vocab_size", 65}};
  doc["train"] = {{"micro_batch", 256}};
  const RunConfig big = parse_run_config(doc, "test.json");
  const std::string msg = error_of([&] { check_trainable(big); });
  EXPECT_NE(msg.find("train.micro_batch x train.seq_len = 256 x 1048576"), std::string::npos) << msg;
  EXPECT_NE(msg.find("past the 64 PiB"), std::string::npos) << msg;
  doc["train"] = {{"micro_batch", 2}};
  EXPECT_NO_THROW(check_trainable(parse_run_config(doc, "test.json")));
  doc["model"] = {{"arch", "llama"},   {"n_layer", 1024},  {"n_head", 1024},  {"n_kv_head", 1024},
                  {"n_embd", 1 << 20}, {"block_size", 16}, {"vocab_size", 65}};
  doc["train"] = {{"micro_batch", 1}};
  EXPECT_NE(error_of([&] { check_trainable(parse_run_config(doc, "test.json")); }).find("past the 64 PiB"),
            std::string::npos)
      << "the parameters alone: 1024 layers of 2^20 x 2^20";
}

TEST(ConfigHostileInput, SetValuesMustBeUtf8) {
  nlohmann::json doc = base();
  const std::string msg = error_of([&] {
    apply_override(doc,
                   "log.sample_prompt=\xff"
                   "abc");
  });
  EXPECT_NE(msg.find("not valid UTF-8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("log.sample_prompt="), std::string::npos) << msg;
  EXPECT_EQ(apply_override(doc, "log.sample_prompt=caf\xc3\xa9"),
            std::vector<std::string>{"log.sample_prompt"});  // UTF-8: read
}

TEST(ConfigHostileInput, TextAfterANulByteIsNotIgnored) {
  const std::string text = std::string("{\"model\": {}}\n") + '\0' + "{\"train\": 1}";
  const std::string msg = error_of([&] { parse_config_json(text, "nul.json"); });
  EXPECT_EQ(msg, "config error in nul.json: a NUL byte at line 2, column 1 (not a JSON text file?)");
}

TEST(ConfigHostileInput, ADuplicateKeyInAnArraysObjectIsNamedByItsPath) {
  // The object in train.x: it was named by the sibling object's last key ('train.a.b').
  const std::string text = R"({"train": {"x": [{"a": 1}, {"b": 1, "b": 2}]}})";
  EXPECT_EQ(error_of([&] { parse_config_json(text, "dup.json"); }),
            "config error in dup.json: key 'train.x.b' appears twice in one object (which one was meant?)");
  EXPECT_EQ(error_of([] { parse_config_json(R"({"zero": {"stage": 1}, "log": {}, "zero": {}})", "top.json"); }),
            "config error in top.json: key 'zero' appears twice in one object (which one was meant?)");
  EXPECT_EQ(error_of([] { parse_config_json(R"({"a": [[{"k": 1, "k": 2}]]})", "nested.json"); }),
            "config error in nested.json: key 'a.k' appears twice in one object (which one was meant?)");
}

TEST(ConfigHostileInput, AdamEpsilonZeroIsRefused) {
  nlohmann::json doc = base();
  doc["optim"] = {{"eps", 0.0}};
  // An older build took it: the message says how to resume such a run without editing its record.
  expect_error(doc, {"optim.eps' = 0 is out of range", "(a --set optim.eps=VALUE overrides the file)"});
}

}  // namespace
}  // namespace zt
