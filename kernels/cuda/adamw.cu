// AdamW on the GPU: the slice table and launches of the multi-tensor kernel in adamw_kernels.cuh
// (whose header says how it works and why it equals the CPU's update bit for bit).
#include "kernels/cuda/adamw.h"

#include "kernels/cuda/adamw_kernels.cuh"
#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

using detail::adamw::adamw_slices_kernel;
using detail::adamw::kChunk;
using detail::adamw::kMaxSlices;
using detail::adamw::kThreads;
using detail::adamw::NoWorkingCopy;
using detail::adamw::SliceDesc;
using detail::adamw::SliceTable;
using zt::AdamWCoeffs;

enum class WorkingKind { kNone, kF32, kBF16 };

WorkingKind working_kind(const TensorView& w) {
  if (w.data == nullptr) return WorkingKind::kNone;
  return w.dtype == DType::kF32 ? WorkingKind::kF32 : WorkingKind::kBF16;
}

struct LaunchArgs {
  cudaStream_t stream;
  AdamWCoeffs decayed, plain;
  float grad_scale;
};

template <typename G, typename W>
void launch_typed(const SliceTable& table, std::int64_t blocks, const LaunchArgs& a) {
  adamw_slices_kernel<G, W>
      <<<static_cast<unsigned>(blocks), kThreads, 0, a.stream>>>(table, a.decayed, a.plain, a.grad_scale);
  ZT_CUDA_CHECK_LAUNCH();
}

template <typename G>
void launch_working(const SliceTable& table, std::int64_t blocks, WorkingKind working, const LaunchArgs& a) {
  switch (working) {
    case WorkingKind::kNone: return launch_typed<G, NoWorkingCopy>(table, blocks, a);
    case WorkingKind::kF32: return launch_typed<G, float>(table, blocks, a);
    case WorkingKind::kBF16: return launch_typed<G, std::uint16_t>(table, blocks, a);
  }
}

}  // namespace

void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale) {
  ZT_CHECK(step >= 1, "AdamW step is 1-based, got {}", step);
  LaunchArgs args{detail::stream_of(ctx), adamw_coeffs(hyper, step), {}, grad_scale};
  AdamWHyper plain = hyper;
  plain.weight_decay = 0.0f;
  args.plain = adamw_coeffs(plain, step);  // the CPU's scalars, bit for bit

  // One launch covers every slice, the gradient and working types being the same for all of them.
  const DType grad_dtype = slices.empty() ? DType::kF32 : slices.front().grad.dtype;
  const WorkingKind working = slices.empty() ? WorkingKind::kNone : working_kind(slices.front().working);
  SliceTable table{};
  std::int64_t blocks = 0;
  const auto flush = [&] {
    if (table.count == 0) return;
    if (grad_dtype == DType::kF32) {
      launch_working<float>(table, blocks, working, args);
    } else {
      launch_working<std::uint16_t>(table, blocks, working, args);
    }
    table.count = 0;
    blocks = 0;
  };
  for (const AdamWSlice& s : slices) {
    for (const TensorView* t : {&s.param, &s.grad, &s.m, &s.v, &s.working}) detail::check_on_gpu(*t, "adamw operand");
    check_adamw_operands(s.param, s.grad, s.m, s.v, s.working);
    ZT_CHECK(s.grad.dtype == grad_dtype && working_kind(s.working) == working,
             "adamw_update_slices: every slice needs the same gradient and working-copy types");
    const std::int64_t n = s.param.numel();
    if (n == 0) continue;
    // aligned16(nullptr) holds: a slice without a working copy.
    const bool vec = detail::aligned16(s.param.data) && detail::aligned16(s.m.data) && detail::aligned16(s.v.data) &&
                     detail::aligned16(s.grad.data) && detail::aligned16(s.working.data);
    table.slice[table.count] = SliceDesc{s.param.as<float>(), s.grad.data, s.m.as<float>(),  s.v.as<float>(),
                                         s.working.data,      n,           s.decays ? 1 : 0, vec ? 1 : 0};
    table.first_block[table.count] = blocks;
    blocks += (n + kChunk - 1) / kChunk;
    ZT_CHECK(blocks < (std::int64_t{1} << 31), "adamw: too many elements for one launch");
    if (++table.count == kMaxSlices) flush();
  }
  flush();
}

void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale) {
  cuda::adamw_update_slices(ctx, {AdamWSlice{param, grad, m, v, working_out, true}}, hyper, step, grad_scale);
}

}  // namespace zt::cuda
