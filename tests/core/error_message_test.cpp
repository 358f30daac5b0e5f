// The user-facing errors (engine/base/core/check.h) are one line whatever they quote: a path with a
// newline or a NUL in it (a config's string, a shell's $'...') is written with escapes, so the CLI's
// error stays the one line it promises and what(), a C string, is the whole message.
#include <gtest/gtest.h>

#include <string>

#include "engine/base/core/check.h"
#include "engine/base/core/console.h"

namespace zt {
namespace {

TEST(ErrorMessage, ControlCharactersAreEscapedAndTheRestKept) {
  EXPECT_EQ(one_line("plain text, UTF-8 \xC3\xA9 and all"), "plain text, UTF-8 \xC3\xA9 and all");
  EXPECT_EQ(one_line("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(one_line(std::string("ab\0cd", 5)), "ab\\x00cd");
  EXPECT_EQ(one_line("\x1b[31m\x7f"), "\\x1b[31m\\x7f");
}

TEST(ErrorMessage, InputAndRuntimeErrorsAreOneLine) {
  const std::string path("runs/a\nb\0c", 10);
  try {
    throw_input_error("{}: cannot open", path);
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "runs/a\\nb\\x00c: cannot open");
  }
  try {
    throw RuntimeError("write to '" + path + "' failed");
  } catch (const RuntimeError& e) {
    EXPECT_STREQ(e.what(), "write to 'runs/a\\nb\\x00c' failed");
  }
  // A library's message reaches the user through error_line: one line too.
  EXPECT_EQ(error_line("zerotrain sample: x\ny"), "zerotrain: error: sample: x\\ny\n");
}

}  // namespace
}  // namespace zt
