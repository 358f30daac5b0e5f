// The JSON syntax hints: for each habit JSON lacks, the parser's real error on a real text, and the
// words the hint says; and no hint where none is known, so a hint never misleads.
#include "engine/base/core/json_syntax_hint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace zt {
namespace {

// The hint for `text`, which must fail to parse.
std::string hint_for(const std::string& text) {
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    ADD_FAILURE() << "parsed: " << text << " as " << parsed.dump();
  } catch (const nlohmann::json::parse_error& e) {
    return json_syntax_hint(text, e.byte, e.what());
  }
  return "";
}

TEST(JsonSyntaxHint, SaysTheHabitJsonLacks) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"optim\": {\"lr\": .5}}", "0.5, not .5"},
      {"{\"optim\": {\"lr\": +1}}", "no '+' sign"},
      {"{\"optim\": {\"lr\": 0x10}}", "decimal"},
      {"{\"train\": {\"max_steps\": 01}}", "no leading zero"},
      {"{\"train\": {\"max_steps\": -01}}", "no leading zero"},
      {"{\"optim\": {\"lr\": 1.}}", "without its digits"},
      {"{\"optim\": {\"lr\": -}}", "without its digits"},
      {"{\"model\": {\"kind\": gpt2}}", "without quotes: JSON strings take double quotes, \"gpt2\""},
      {"{\"data\": [train.bin, val.bin]}", "\"train\""},
      {"{'model': 1}", "double quotes: \"...\", not '...'"},
      {"{\"model\": 'gpt2'}", "not '...'"},
      {"{\"optim\": {\"lr\": NaN}}", "no NaN or Infinity"},
      {"{\"optim\": {\"lr\": -Infinity}}", "no NaN or Infinity"},
      {"{\"optim\": {\"lr\": -inf}}", "no NaN or Infinity"},
      {"{\"train\": {\"deterministic\": TRUE}}", "JSON writes true in lower case"},
      {"{\"init\": {\"from\": NULL}}", "JSON writes null in lower case"},
      {"{\"a\": \"x\ty\"}", "write a tab as \\t"},
      {"{\"train\": {\"deterministic\": True}}", "JSON writes true"},
      {"{\"init\": {\"from\": None}}", "null for None"},
      {"{\"a\": 1\n \"b\": 2}", "a comma missing"},
      {"{\"a\": [1 2]}", "a comma missing"},
      {"{\"a\": {} {}}", "a comma missing"},
      {"{\"a\" 1}", "needs a ':'"},
      {"{\"a\": 1}}", "one } or ] too many"},
      {"{\"a\": 1} x", "text after the JSON value's end"},
      {"{\"a\": {\"b\": 1}", "ends before every { and [ is closed"},
      {"{\"model\": {\"kind\": \"gpt2}}", "a missing \""},
      {"{\"a\": \"x\ny\"}", "a missing \""},
      {"{\"a\": 1,}", "no comma after a last item"},
      {"{\"a\": [1, 2, ]}", "no comma after a last item"},
      {"{\n  // the model\n  \"model\": {}\n}", "no comments"},
      {"{\"a\": 1 /* x */}", "no comments"},
  };
  for (const auto& [text, words] : cases) {
    const std::string hint = hint_for(text);
    EXPECT_NE(hint.find(words), std::string::npos) << text << " gave: " << hint;
    EXPECT_TRUE(hint.starts_with(" (") && hint.ends_with(")")) << hint;
  }
}

TEST(JsonSyntaxHint, NoHintWhereNoneIsKnown) {
  // A division is no comment; a lone ',,' is not a trailing comma, nor a missing one; a value
  // missing, or a ':' in an array or after a value, is no key without its ':' (nlohmann's
  // "unexpected ':'" holds the words "expected ':'").
  for (const std::string text : {"{\"n_layer\": 4/2}", "{\"a\": 1,,}", "{\"a\": [,]}", "{,}", "{\"a\": \n \"b\": 1}",
                                 "{\"a\": [\"b\": 1]}", "{\"a\": \"b\": \"c\"}"}) {
    const std::string hint = hint_for(text);
    EXPECT_EQ(hint.find("comment"), std::string::npos) << text << " gave: " << hint;
    EXPECT_EQ(hint.find("comma missing"), std::string::npos) << text << " gave: " << hint;
    EXPECT_EQ(hint.find("needs a ':'"), std::string::npos) << text << " gave: " << hint;
    EXPECT_EQ(hint.find("missing \""), std::string::npos) << text << " gave: " << hint;
  }
  // A very long bare word is quoted cut, not whole.
  const std::string long_word(500, 'w');
  EXPECT_LT(hint_for("{\"a\": " + long_word + "}").size(), 120U);
}

}  // namespace
}  // namespace zt
