// The parameter table: every parameter's name, shape, place in its unit's flat buffer and whether
// it decays. A *unit* is a group of parameters stored contiguously (one transformer block, the
// embeddings, the final LayerNorm): the granule that ZeRO shards, gathers and frees. Models build
// this table; the sharding engine, optimizer and checkpoint code only ever read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/core/tensor.h"

namespace zt {

struct ParamSpec {
  std::string name;                    // Hugging Face state-dict name (shared by the row parts of one tensor)
  std::vector<std::int64_t> shape;     // as stored (vocabulary rows padded)
  std::vector<std::int64_t> hf_shape;  // as Hugging Face stores it (true vocabulary); a row part: its own rows
  int unit = 0;                        // index into ParamTable::units()
  std::int64_t offset = 0;             // first element inside the unit's flat buffer
  std::int64_t numel = 0;              // stored elements (product of shape)
  bool decays = false;                 // AdamW weight decay applies
  // A tensor split by rows across units (a token table in vocabulary chunks) is several entries of
  // one name, each holding stored rows [row_offset, row_offset + shape[0]) of it; 0 for a whole one.
  std::int64_t row_offset = 0;
};

// The part of [begin, end) of a unit's elements that falls on parameter `p`, as p's own indices
// [first, last) (empty where they miss it); end -1: to the unit's end.
inline std::pair<std::int64_t, std::int64_t> elements_in_range(const ParamSpec& p, std::int64_t begin,
                                                               std::int64_t end) {
  const std::int64_t first = std::clamp<std::int64_t>(begin - p.offset, 0, p.numel);
  const std::int64_t last = end < 0 ? p.numel : std::clamp<std::int64_t>(end - p.offset, 0, p.numel);
  return {first, std::max(first, last)};
}

// A tensor as external formats hold it (a Hugging Face state-dict entry): one parameter, or the
// row parts of one split across units, listed in row order. hf_shape is the whole tensor's.
struct TensorParts {
  std::string name;
  std::vector<std::int64_t> hf_shape, shape;  // as Hugging Face stores it / as stored (padded rows)
  std::vector<int> parts;                     // indices into ParamTable::params()
};

struct UnitSpec {
  std::string name;         // "embeddings", "h.0", ..., "final"
  std::int64_t numel = 0;   // total elements of the flat buffer
  std::vector<int> params;  // indices into ParamTable::params(), in offset order
};

class ParamTable {
 public:
  // Appends a unit; parameters are then added to the last unit, each right after the previous.
  int add_unit(std::string name);
  // `row_offset`: this entry is the part of tensor `name` that starts at that stored row (its
  // earlier rows were added before it, in an earlier unit).
  int add_param(std::string name, std::vector<std::int64_t> shape, std::vector<std::int64_t> hf_shape, bool decays,
                std::int64_t row_offset = 0);

  const std::vector<UnitSpec>& units() const { return units_; }
  const std::vector<ParamSpec>& params() const { return params_; }
  const ParamSpec& param(int index) const { return params_.at(static_cast<std::size_t>(index)); }
  // The index of a unit's first parameter (a model's views count its others from it).
  int first_param(int unit) const { return units_.at(static_cast<std::size_t>(unit)).params.at(0); }
  // Index of the parameter with this name (a split tensor's first part); throws InternalError if
  // absent.
  int index_of(const std::string& name) const;
  // The tensors external formats see, in the order of their first parts.
  std::vector<TensorParts> tensors() const;
  std::int64_t total_numel() const;
  std::int64_t max_unit_numel() const;
  // Element `offset` of unit `unit`'s flat buffer as a reader would name it: "tensor NAME (element
  // E)", E its index in the whole tensor (a row part's counted from the tensor's first row), or
  // "unit NAME (element E)" past the unit's parameters.
  std::string describe_element(int unit, std::int64_t offset) const;

  // A view of parameter `index` inside a unit buffer that starts at `unit_base` (same dtype).
  TensorView view(int index, const TensorView& unit_base) const;

 private:
  std::vector<UnitSpec> units_;
  std::vector<ParamSpec> params_;
};

}  // namespace zt
