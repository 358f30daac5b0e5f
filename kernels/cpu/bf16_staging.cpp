// Chunked fp32 staging of bf16 activation operands (see the header).
#include "kernels/cpu/bf16_staging.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/cast.h"

namespace zt::cpu::detail {

namespace {

bool is_empty(const TensorView& v) { return v.data == nullptr || v.numel() == 0; }

Shape with_leading(const Shape& s, std::int64_t n) {
  std::int64_t dims[Shape::kMaxDims] = {};
  for (int i = 0; i < s.ndim(); ++i) dims[i] = s[i];
  dims[0] = n;
  switch (s.ndim()) {
    case 1: return Shape{dims[0]};
    case 2: return Shape{dims[0], dims[1]};
    case 3: return Shape{dims[0], dims[1], dims[2]};
    default: return Shape{dims[0], dims[1], dims[2], dims[3]};
  }
}

std::int64_t row_width(const TensorView& v) { return v.shape[0] == 0 ? 0 : v.numel() / v.shape[0]; }

}  // namespace

TensorView widened_f32(const ExecContext& ctx, const TensorView& v, std::vector<float>& storage) {
  if (v.data == nullptr || v.dtype == DType::kF32) return v;
  ZT_CHECK(v.dtype == DType::kBF16, "only BF16 parameters are widened, not {}", dtype_name(v.dtype));
  storage.resize(static_cast<std::size_t>(v.numel()));
  const TensorView widened{storage.data(), DType::kF32, Device::kCPU, v.shape};
  cast(ctx, widened, v);
  return widened;
}

TensorView as_rows(const TensorView& v, std::int64_t width) {
  ZT_CHECK(width > 0 && v.numel() % width == 0, "{} elements are not rows of {}", v.numel(), width);
  return TensorView{v.data, v.dtype, v.device, Shape{v.numel() / width, width}};
}

TensorView row_slice(const TensorView& v, std::int64_t first, std::int64_t n) {
  ZT_CHECK(v.shape.ndim() >= 1 && first >= 0 && n >= 0 && first + n <= v.shape[0], "rows [{}, {}) of {}", first,
           first + n, v.shape.ndim() >= 1 ? v.shape[0] : 0);
  const std::int64_t offset = first * row_width(v) * static_cast<std::int64_t>(dtype_size_bytes(v.dtype));
  return TensorView{static_cast<char*>(v.data) + offset, v.dtype, v.device, with_leading(v.shape, n)};
}

void stage_rows(const ExecContext& ctx, std::initializer_list<StagedOperand> operands, const StagedBody& body,
                std::int64_t stage_bytes) {
  struct Slot {
    TensorView view;
    bool read = false, write = false;
    std::vector<float> copy;
  };
  std::vector<Slot> slots;
  std::vector<int> slot_of;  // operand -> slot, -1 for empty operands
  std::int64_t rows = -1, bytes_per_row = 0;
  for (const StagedOperand& op : operands) {
    if (is_empty(op.view)) {
      slot_of.push_back(-1);
      continue;
    }
    ZT_CHECK(op.view.dtype == DType::kBF16 && op.view.device == Device::kCPU, "staging takes host BF16 operands");
    ZT_CHECK(rows < 0 || op.view.shape[0] == rows, "staged operands have {} and {} rows", rows, op.view.shape[0]);
    rows = op.view.shape[0];
    const bool read = op.access != Access::kWrite, write = op.access != Access::kRead;
    auto same = std::find_if(slots.begin(), slots.end(), [&](const Slot& s) { return s.view.data == op.view.data; });
    if (same != slots.end()) {
      ZT_CHECK(same->view.shape == op.view.shape, "aliased staged operands must have one shape");
      same->read |= read, same->write |= write;
      slot_of.push_back(static_cast<int>(same - slots.begin()));
      continue;
    }
    slots.push_back(Slot{op.view, read, write, {}});
    slot_of.push_back(static_cast<int>(slots.size()) - 1);
    bytes_per_row += row_width(op.view) * static_cast<std::int64_t>(sizeof(float));
  }
  if (rows <= 0) return;
  const std::int64_t chunk = std::clamp<std::int64_t>(bytes_per_row > 0 ? stage_bytes / bytes_per_row : rows, 1, rows);
  for (Slot& s : slots) s.copy.resize(static_cast<std::size_t>(chunk * row_width(s.view)));

  std::vector<TensorView> views(slot_of.size());
  for (std::int64_t first = 0; first < rows; first += chunk) {
    const std::int64_t n = std::min(chunk, rows - first);
    std::vector<TensorView> staged(slots.size());
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const TensorView src = row_slice(slots[i].view, first, n);
      staged[i] = TensorView{slots[i].copy.data(), DType::kF32, Device::kCPU, src.shape};
      if (slots[i].read) cast(ctx, staged[i], src);
    }
    for (std::size_t k = 0; k < slot_of.size(); ++k) views[k] = slot_of[k] < 0 ? TensorView{} : staged[slot_of[k]];
    body(first, n, views);
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].write) cast(ctx, row_slice(slots[i].view, first, n), staged[i]);
    }
  }
}

}  // namespace zt::cpu::detail
