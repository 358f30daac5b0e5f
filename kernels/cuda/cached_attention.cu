// Cached attention on the GPU: operand checks, how many splits the cache's positions take
// ([Note: split positions] in cached_attention_kernels.cuh), and the launches.
#include "kernels/cuda/cached_attention.h"

#include <cmath>
#include <tuple>

#include "kernels/contracts/operand_checks.h"
#include "kernels/cuda/cached_attention_kernels.cuh"
#include "kernels/cuda/common.cuh"

namespace zt::cuda {

void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head, int n_kv_head) {
  namespace ca = detail::cached_attention;
  detail::check_on_gpu(out, "cached attention out");
  detail::check_on_gpu(cache, "key/value cache");
  const CachedAttentionDims d = cached_attention_dims(out, cache, n_head, n_kv_head);
  static_assert(ca::kMaxHeadSize == kCachedAttentionMaxHeadSize);
  ZT_CHECK(d.hs <= ca::kMaxHeadSize, "cached attention on CUDA: head size {} exceeds {}", d.hs, ca::kMaxHeadSize);
  ZT_CHECK(d.Tq * d.NH < (std::int64_t{1} << 31) && d.B <= 65535 && d.T * d.W < (std::int64_t{1} << 31),
           "cached attention on CUDA: {} new positions of {} heads, {} samples of {} x {} exceed the grid", d.Tq, d.NH,
           d.B, d.T, d.W);
  if (d.B == 0) return;  // an empty batch: nothing to attend (a grid of 0 would not launch)
  ca::Geometry g{static_cast<int>(d.T),          static_cast<int>(d.Tq),
                 static_cast<int>(d.W),          static_cast<int>(d.C),
                 static_cast<int>(d.hs),         static_cast<int>(d.NH),
                 static_cast<int>(d.NH / d.NKV), static_cast<int>(d.k_off),
                 static_cast<int>(d.v_off),      1.0f / std::sqrt(static_cast<float>(d.hs))};
  std::tie(g.splits, g.span) = ca::split_positions(d.Tq * d.NH * d.B, d.T);
  // The splits' partial results (fp32), merged by the combine kernel; none with one split.
  Buffer partials =
      g.splits > 1 ? detail::resources_of(ctx).scratch(DType::kF32, d.B * d.Tq * d.NH * g.splits * ca::kPartialFloats)
                   : Buffer{};
  const cudaStream_t stream = detail::stream_of(ctx);
  const dim3 rows(static_cast<unsigned>(d.Tq * d.NH), static_cast<unsigned>(d.B));
  detail::dispatch_activation(out.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    ca::cached_attention_kernel<T><<<dim3(rows.x, rows.y, static_cast<unsigned>(g.splits)), ca::kThreads, 0, stream>>>(
        detail::act_data<T>(out), g.splits > 1 ? partials.as<float>() : nullptr, detail::act_data<T>(cache), g);
    ZT_CUDA_CHECK_LAUNCH();
    if (g.splits > 1) {
      ca::cached_attention_combine<T>
          <<<rows, detail::kWarpSize, 0, stream>>>(detail::act_data<T>(out), partials.as<float>(), g);
      ZT_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace zt::cuda
