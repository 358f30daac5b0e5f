// NormBackwardRows::kFastest: the norm backward's chunk kernel chosen by timing, once per shape.
//
// [Note: the norm backward's kernel, timed]
// The LayerNorm and RMSNorm backwards have two chunk kernels: a warp a row with a column pass for
// the parameter gradients (measured on the H100 and H200), and a block a row that adds each row
// into the parameter-gradient columns as it passes ([Note: a block a row] in
// block_row_backward.cuh), which reads dout and inp once instead of two or three times but keeps
// fewer rows in flight per SM. Which is faster depends on the width, the row count and the card,
// and an earlier batched-loads change that looked better on paper measured slower (call 1 of
// docs/results/gpu_session_2026-11-28_h200), so runs that need not repeat bit for bit (those with
// the timed algorithm search) time both on each shape's first call and keep the faster for the run.
// Both give the parameter gradients bit for bit; dinp's row sums take different fixed orders, so a
// deterministic run keeps the block kernel. A timed run reads the real dout and inp and writes
// scratch: dinp's rows (zeroed first, so nothing uninitialised is read) and the partials; the
// parameter pass after them is the same for both and is not timed. Where dinp is larger than
// KernelResources::timed_scratch_limit_bytes (Llama 3.2 1B's [32768, 2048] bf16 is 134 MB), the
// first rows that fit are timed: both kernels' grids are one block per row chunk, so their times
// grow with the rows alike.
#include "kernels/cuda/norm_rows_choice.h"

#include <algorithm>
#include <array>

#include <cuda_runtime_api.h>

#include "engine/base/device/cuda_check.h"
#include "kernels/cuda/kernel_resources.h"
#include "kernels/cuda/timed_pair.h"

namespace zt::cuda::detail {

namespace {

// The first rows whose dinp fits the timing scratch, whole chunks, at least one.
std::int64_t timed_rows(const KernelResources& res, const NormRowsShape& s) {
  const std::int64_t row_bytes = std::int64_t{s.cols} * static_cast<std::int64_t>(dtype_size_bytes(s.act));
  const std::int64_t fit = res.timed_scratch_limit_bytes / row_bytes / s.rows_per_chunk * s.rows_per_chunk;
  return std::min(s.rows, std::max<std::int64_t>(fit, s.rows_per_chunk));
}

NormBackwardRows measure(const ExecContext& ctx, const NormRowsShape& s, const NormChunkLaunch& launch) {
  KernelResources& res = *ctx.cuda_resources;
  const auto stream = static_cast<cudaStream_t>(ctx.cuda_stream);
  const std::int64_t rows = timed_rows(res, s);
  const std::int64_t chunks = (rows + s.rows_per_chunk - 1) / s.rows_per_chunk;
  Buffer dinp = res.scratch(s.act, rows * s.cols);
  Buffer partials = res.scratch(DType::kF32, chunks * s.partial_floats_per_chunk);
  ZT_CUDA_CHECK(cudaMemsetAsync(dinp.data(), 0, static_cast<std::size_t>(dinp.size_bytes()), stream));
  auto run = [&](NormBackwardRows which) {
    return [&, which] { launch(which, dinp.data(), partials.as<float>(), rows); };
  };
  const auto block = run(NormBackwardRows::kBlock);
  const auto warp = run(NormBackwardRows::kWarp);
  block();  // warm-ups
  warp();
  const PairTimes t = time_alternated(stream, block, warp);
  ++res.norm_rows_timings;
  return t.second_ms < t.first_ms ? NormBackwardRows::kWarp : NormBackwardRows::kBlock;
}

}  // namespace

void launch_norm_backward_rows(const ExecContext& ctx, NormBackwardRows requested, bool block_applies,
                               const NormRowsShape& shape, const NormChunkLaunch& launch, void* dinp, float* partials) {
  NormBackwardRows which = requested;
  if (!block_applies || shape.cols <= 0) {
    which = NormBackwardRows::kWarp;
  } else if (requested == NormBackwardRows::kFastest) {
    ZT_CHECK(ctx.cuda_resources != nullptr, "CUDA kernels need ExecContext::cuda_resources");
    auto& choices = ctx.cuda_resources->norm_backward_choices();
    const KernelResources::NormRowsKey key{shape.norm, static_cast<std::int64_t>(shape.act),
                                           static_cast<std::int64_t>(shape.param), shape.rows, shape.cols};
    auto found = choices.find(key);
    if (found == choices.end()) found = choices.emplace(key, measure(ctx, shape, launch)).first;
    which = found->second;
  }
  launch(which, dinp, partials, shape.rows);
}

}  // namespace zt::cuda::detail
