// ParamTable: building units parameter by parameter and viewing a parameter inside a unit buffer.
#include "engine/core/param_table.h"

#include <algorithm>

#include "engine/core/check.h"

namespace zt {

int ParamTable::add_unit(std::string name) {
  units_.push_back(UnitSpec{std::move(name), 0, {}});
  return static_cast<int>(units_.size()) - 1;
}

int ParamTable::add_param(std::string name, std::vector<std::int64_t> shape, std::vector<std::int64_t> hf_shape,
                          bool decays) {
  ZT_CHECK(!units_.empty(), "add_unit first");
  ZT_CHECK(shape.size() == hf_shape.size());
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
