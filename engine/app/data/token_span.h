// A read-only run of token ids stored 2 or 4 bytes each (llm.c's GPT-2 and Llama 3 token files,
// nanoGPT's raw uint16, the embedded dataset): what the batch sampler and the statistics read,
// without copying a memory-mapped file into one width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <vector>

namespace zt::data {

class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(std::span<const std::uint16_t> s)
      : data_(s.data()), size_(static_cast<std::int64_t>(s.size())), wide_(false) {}
  TokenSpan(std::span<const std::uint32_t> s)
      : data_(s.data()), size_(static_cast<std::int64_t>(s.size())), wide_(true) {}
  TokenSpan(const std::vector<std::uint16_t>& v) : TokenSpan(std::span<const std::uint16_t>(v)) {}
  TokenSpan(const std::vector<std::uint32_t>& v) : TokenSpan(std::span<const std::uint32_t>(v)) {}

  std::int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int bytes_per_token() const { return wide_ ? 4 : 2; }
  std::uint32_t operator[](std::int64_t i) const {
    return wide_ ? static_cast<const std::uint32_t*>(data_)[i] : static_cast<const std::uint16_t*>(data_)[i];
  }

  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::uint32_t;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::uint32_t;
    iterator() = default;
    iterator(const TokenSpan* s, std::int64_t i) : span_(s), i_(i) {}
    std::uint32_t operator*() const { return (*span_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const TokenSpan* span_ = nullptr;
    std::int64_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size_}; }

 private:
  const void* data_ = nullptr;
  std::int64_t size_ = 0;
  bool wide_ = false;
};

}  // namespace zt::data
