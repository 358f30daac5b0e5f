// ParamTable: building units parameter by parameter and viewing a parameter inside a unit buffer.
#include "engine/base/core/param_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "engine/base/core/check.h"

namespace zt {

int ParamTable::add_unit(std::string name) {
  units_.push_back(UnitSpec{std::move(name), 0, {}});
  return static_cast<int>(units_.size()) - 1;
}

int ParamTable::add_param(std::string name, std::vector<std::int64_t> shape, std::vector<std::int64_t> hf_shape,
                          bool decays, std::int64_t row_offset) {
  ZT_CHECK(!units_.empty(), "add_unit first");
  ZT_CHECK(shape.size() == hf_shape.size());
  if (row_offset > 0) {  // continues the rows of an earlier part of the same tensor
    // The rows its parts so far hold, and their row shape (the first part's), read in place: the
    // plan's search builds tables by the thousand, and a copy of every tensor here was most of it.
    const ParamSpec* first = nullptr;
    std::int64_t rows = 0;
    for (const ParamSpec& p : params_) {
      if (p.name != name) continue;
      if (first == nullptr) first = &p;
      rows += p.shape[0];
    }
    ZT_CHECK(first != nullptr && rows == row_offset && !shape.empty() &&
                 std::equal(shape.begin() + 1, shape.end(), first->shape.begin() + 1, first->shape.end()),
             "'{}': a part at row {} must continue the rows before it", name, row_offset);
  }
  UnitSpec& unit = units_.back();
  ParamSpec p;
  p.name = std::move(name);
  p.numel = 1;
  for (std::int64_t d : shape) p.numel *= d;
  p.shape = std::move(shape);
  p.hf_shape = std::move(hf_shape);
  p.unit = static_cast<int>(units_.size()) - 1;
  p.offset = unit.numel;
  p.decays = decays;
  p.row_offset = row_offset;
  unit.numel += p.numel;
  unit.params.push_back(static_cast<int>(params_.size()));
  params_.push_back(std::move(p));
  return static_cast<int>(params_.size()) - 1;
}

int ParamTable::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name == name) return static_cast<int>(i);
  }
  ZT_CHECK(false, "no parameter named '{}'", name);
  return -1;
}

std::vector<TensorParts> ParamTable::tensors() const {
  std::vector<TensorParts> out;
  std::unordered_map<std::string_view, std::size_t> index;  // name -> its place in `out`
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const ParamSpec& p = params_[i];
    const auto [it, added] = index.emplace(p.name, out.size());
    if (added) {
      out.push_back({p.name, p.hf_shape, p.shape, {static_cast<int>(i)}});
      continue;
    }
    TensorParts& t = out[it->second];
    t.hf_shape[0] += p.hf_shape[0];  // rows continue (add_param checked the order)
    t.shape[0] += p.shape[0];
    t.parts.push_back(static_cast<int>(i));
  }
  return out;
}

std::int64_t ParamTable::total_numel() const {
  std::int64_t n = 0;
  for (const UnitSpec& u : units_) n += u.numel;
  return n;
}

std::int64_t ParamTable::max_unit_numel() const {
  std::int64_t n = 0;
  for (const UnitSpec& u : units_) n = std::max(n, u.numel);
  return n;
}

std::string ParamTable::describe_element(int unit, std::int64_t offset) const {
  const UnitSpec& u = units_.at(static_cast<std::size_t>(unit));
  for (const int index : u.params) {
    const ParamSpec& p = param(index);
    if (offset >= p.offset && offset < p.offset + p.numel) {
      const std::int64_t row = p.shape.empty() || p.shape[0] == 0 ? 0 : p.numel / p.shape[0];
      return fmt::format("tensor {} (element {})", p.name, p.row_offset * row + offset - p.offset);
    }
  }
  return fmt::format("unit {} (element {})", u.name, offset);
}

TensorView ParamTable::view(int index, const TensorView& unit_base) const {
  const ParamSpec& p = param(index);
  ZT_CHECK(unit_base.numel() == units_[static_cast<std::size_t>(p.unit)].numel, "unit base of wrong length");
  TensorView v = unit_base.slice(p.offset, p.numel);
  switch (p.shape.size()) {
    case 1: v.shape = Shape{p.shape[0]}; break;
    case 2: v.shape = Shape{p.shape[0], p.shape[1]}; break;
    default: ZT_CHECK(false, "parameters are 1-D or 2-D");
  }
  return v;
}

}  // namespace zt
