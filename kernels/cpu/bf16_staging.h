// BF16 activation operands on the CPU (docs/precision.md, "the kernel contract"): each kernel's
// fp32 implementation runs on fp32 staging copies of the bf16 operands, a chunk of leading rows at
// a time, and the results are rounded back once. This makes the CPU kernels the exact reference of
// the contract (compute in fp32 from widened inputs, one round-to-nearest-even per result) without
// a second implementation of any kernel, at the cost of the conversions; the CUDA kernels load and
// store bf16 directly.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <vector>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/activation_dtype.h"
#include "kernels/exec_context.h"

namespace zt::cpu::detail {

// A parameter as the fp32 kernels read it: `v` itself when F32 (or without data), else its BF16
// values widened (exactly) into `storage`, which the result views. Parameters are small next to
// the activations, except the embedding tables, which embedding_forward reads row by row instead.
TensorView widened_f32(const ExecContext& ctx, const TensorView& v, std::vector<float>& storage);

// `v` seen as [numel / width, width] (width must divide numel).
TensorView as_rows(const TensorView& v, std::int64_t width);

// `v`'s leading rows [first, first + n): the same dims after the first.
TensorView row_slice(const TensorView& v, std::int64_t first, std::int64_t n);

enum class Access { kRead, kWrite, kReadWrite };

struct StagedOperand {
  TensorView view;  // BF16 [rows, ...], or empty (passed to the body as an empty view)
  Access access;
};

// Calls body(first, n, views) for consecutive chunks [first, first + n) of the operands' leading
// rows (every non-empty operand has the same dim 0), where views[i] is an fp32 [n, ...] copy of
// operand i's chunk: widened before the body for kRead/kReadWrite, rounded back to bf16 after it
// for kWrite/kReadWrite. Operands with the same data pointer share one copy (in-place kernels).
// Chunks hold up to `stage_bytes` of fp32 staging (at least one row); the staging is transient
// host memory outside the MemoryTracker, like BLAS's own buffers.
using StagedBody = std::function<void(std::int64_t first, std::int64_t n, std::span<const TensorView> views)>;
constexpr std::int64_t kDefaultStageBytes = std::int64_t{16} << 20;
void stage_rows(const ExecContext& ctx, std::initializer_list<StagedOperand> operands, const StagedBody& body,
                std::int64_t stage_bytes = kDefaultStageBytes);

}  // namespace zt::cpu::detail
