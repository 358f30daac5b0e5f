// UTF-8: the encoding of one code point, shared by the vocabularies and the tokenizer, and the
// repair of decoded text whose bytes are not all UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zt::data {

inline constexpr const char* kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// Appends code point c (at most U+10FFFF) to out as UTF-8.
inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Bytes in, valid UTF-8 out, as they come: a byte-level vocabulary's tokens may split a character,
// or a model may draw bytes that make none. A sequence still open waits for its next bytes; each
// maximal part of an invalid sequence becomes one U+FFFD, as Python's decode(errors="replace") and
// the metrics log's JSON writer give, so a sample printed token by token reads as the one logged.
class Utf8Repair {
 public:
  // The text that the bytes so far complete.
  std::string feed(std::string_view bytes) {
    std::string out;
    for (const char c : bytes) take(static_cast<unsigned char>(c), out);
    return out;
  }
  // The end: a sequence left open is one U+FFFD.
  std::string finish() {
    std::string out;
    if (!open_.empty()) replace(out);
    return out;
  }

 private:
  void replace(std::string& out) {
    out += kReplacementChar;
    open_.clear();
  }
  void take(unsigned char b, std::string& out) {
    if (!open_.empty()) {
      // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
      const auto lead = static_cast<unsigned char>(open_[0]);
      const bool second = open_.size() == 1;
      const unsigned char lo = second && lead == 0xE0 ? 0xA0 : second && lead == 0xF0 ? 0x90 : 0x80;
      const unsigned char hi = second && lead == 0xED ? 0x9F : second && lead == 0xF4 ? 0x8F : 0xBF;
      if (b >= lo && b <= hi) {
        open_ += static_cast<char>(b);
        if (open_.size() == need_) {
          out += open_;
          open_.clear();
        }
        return;
      }
      replace(out);  // then b starts afresh: it may be fine on its own
    }
    if (b < 0x80) {
      out += static_cast<char>(b);
    } else if (b >= 0xC2 && b <= 0xF4) {
      open_ = static_cast<char>(b);
      need_ = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    } else {
      replace(out);  // a lone continuation byte, or one no sequence starts with
    }
  }
  std::string open_;
  std::size_t need_ = 0;
};

// `bytes` with each invalid part replaced by U+FFFD.
inline std::string repaired_utf8(std::string_view bytes) {
  Utf8Repair r;
  std::string text = r.feed(bytes);
  return text + r.finish();  // after feed: the operands of + are unsequenced
}

}  // namespace zt::data
