// Embeddings on the GPU: operand checks and launches of the kernels in embedding_kernels.cuh.
// Backward without float atomics: positions are sorted by token with CUB's stable radix sort (equal
// tokens keep (b, t) order), then a block per run of equal tokens adds the run's dout rows in that
// order into the token's dwte row; dwpe sums over b in order. The activation (out, dout) is F32 or
// BF16 and the forward's tables F32, or BF16 working weights with BF16 activations
// (docs/precision.md): out is the fp32 sum rounded once, dout is widened and the parameter
// gradients stay fp32 sums.
#include "kernels/cuda/embedding.h"

#include <initializer_list>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/contracts/operand_checks.h"  // embedding_dims: the operand checks both backends share
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/embedding_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::embedding::embedding_backward_wpe;
using detail::embedding::embedding_backward_wte;
using detail::embedding::embedding_forward_kernel;
using detail::embedding::iota_kernel;
using detail::embedding::kThreads;
using detail::embedding::run_ends_kernel;

// 16-byte groups of the activation (kWideVec<Act> columns: 4 of float, 8 of bf16; the fp32 tables
// take the same count in two float4) need rows of whole groups and row starts aligned16, for the
// activation and the tables alike.
template <typename Act, typename P>
bool use_wide(std::int64_t C, const Act* activation, std::initializer_list<const P*> tables) {
  if (C % detail::kWideVec<Act> != 0 || !detail::wide_vec_aligned(activation)) return false;
  for (const P* p : tables) {
    if (!detail::wide_vec_aligned(p)) return false;
  }
  return true;
}

using zt::EmbeddingDims;

// The checked operands (embedding_dims), and (through activation_dtype, naming `op`) out_like's
// dtype: F32 or BF16.
// wte may hold rows [row_begin, row_begin + R) of a vocabulary of `vocab` (-1: its own rows),
// which d.vocab then is. A wpe without data stands in for an absent dwpe (shapes only).
EmbeddingDims check_dims(const char* op, const TensorView& out_like, const TensorView& tokens, const TensorView& wte,
                         const TensorView& wpe, EmbeddingTables tables, std::int64_t row_begin = 0,
                         std::int64_t vocab = -1) {
  for (const TensorView* v : {&out_like, &tokens, &wte}) detail::check_on_gpu(*v, "embedding operand");
  if (wpe.data != nullptr) detail::check_on_gpu(wpe, "embedding operand");
  detail::activation_dtype(op, {out_like});
  EmbeddingDims d = embedding_dims(out_like, tokens, wte, wpe, tables);
  if (vocab >= 0) {
    ZT_CHECK(row_begin >= 0 && row_begin + d.vocab <= vocab, "table rows [{}, {}) outside the vocabulary of {}",
             row_begin, row_begin + d.vocab, vocab);
    d.vocab = vocab;
  }
  ZT_CHECK(d.B * d.T < (std::int64_t{1} << 31) && d.vocab < (std::int64_t{1} << 31), "embedding sizes exceed int32");
  return d;
}

}  // namespace

void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe) {
  embedding_forward_rows(ctx, out, tokens, wte, wpe, 0, wte.shape.ndim() == 2 ? wte.shape[0] : -1);
}

void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe,
                            std::int64_t row_begin, std::int64_t vocab) {
  const cudaStream_t stream = detail::stream_of(ctx);
  // Without a position table (wpe without data) the checks take a stand-in of its shape.
  if (wpe.data == nullptr && tokens.shape.ndim() == 2 && wte.shape.ndim() == 2) {
    wpe = TensorView{nullptr, wte.dtype, wte.device, Shape{tokens.shape[1], wte.shape[1]}};
  }
  const EmbeddingDims d =
      check_dims("embedding_forward", out, tokens, wte, wpe, EmbeddingTables::kParameters, row_begin, vocab);
  if (out.numel() == 0) return;
  detail::dispatch_activation_params(out.dtype, wte.dtype, [&](auto type, auto ptype) {
    using Act = typename decltype(type)::type;
    using P = typename decltype(ptype)::type;
    Act* o = detail::act_data<Act>(out);
    const P* te = detail::act_data<P>(wte);
    const P* pe = detail::act_data<P>(wpe);
    constexpr int kWide = detail::kWideVec<Act>;
    const bool vec = use_wide(d.C, o, {te, pe});
    const auto kernel = vec ? embedding_forward_kernel<Act, P, kWide> : embedding_forward_kernel<Act, P, 1>;
    kernel<<<detail::grid_for(out.numel() / (vec ? kWide : 1), kThreads), kThreads, 0, stream>>>(
        o, tokens.as<std::int32_t>(), te, pe, d.B * d.T, static_cast<int>(d.T), static_cast<int>(d.C),
        static_cast<int>(d.vocab), static_cast<int>(row_begin), static_cast<int>(wte.shape[0]));
  });
  ZT_CUDA_CHECK_LAUNCH();
}

void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens) {
  embedding_backward_rows(ctx, dwte, dwpe, dout, tokens, 0, dwte.shape.ndim() == 2 ? dwte.shape[0] : -1);
}

void embedding_backward_rows(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout,
                             TensorView tokens, std::int64_t row_begin, std::int64_t vocab) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const bool with_wpe = dwpe.data != nullptr;
  const TensorView wpe_like =
      with_wpe ? dwpe : TensorView{nullptr, DType::kF32, dout.device, Shape{tokens.shape[1], dwte.shape[1]}};
  const EmbeddingDims d =
      check_dims("embedding_backward", dout, tokens, dwte, wpe_like, EmbeddingTables::kGradients, row_begin, vocab);
  const std::int64_t BT = d.B * d.T;
  if (BT == 0) return;
  KernelResources& res = detail::resources_of(ctx);
  const int n = static_cast<int>(BT);
  // All 32 key bits: sorting on fewer would let an out-of-range token interleave with a valid run
  // and split it into two runs written by two blocks (a race). 16k keys sort in microseconds anyway.
  const int end_bit = 32;
  // Sort (token, position) pairs by token; the radix sort is stable, so positions stay in order.
  // kernel_scratch::embedding_backward_bytes counts this scratch but CUB's temporaries.
  Buffer positions = res.scratch(DType::kI32, BT);
  Buffer sorted = res.scratch(DType::kI32, 2 * BT);  // sorted tokens, then their positions
  iota_kernel<<<detail::grid_for(BT, kThreads), kThreads, 0, stream>>>(positions.as<std::int32_t>(), BT);
  ZT_CUDA_CHECK_LAUNCH();
  std::int32_t* sorted_tokens = sorted.as<std::int32_t>();
  std::int32_t* sorted_positions = sorted_tokens + BT;
  std::size_t temp_bytes = 0;
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens.as<std::int32_t>(), sorted_tokens,
                                                positions.as<std::int32_t>(), sorted_positions, n, 0, end_bit, stream));
  Buffer temp = res.scratch(DType::kU16, static_cast<std::int64_t>((temp_bytes + 1) / 2));
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, tokens.as<std::int32_t>(), sorted_tokens,
                                                positions.as<std::int32_t>(), sorted_positions, n, 0, end_bit, stream));
  Buffer run_end = res.scratch(DType::kI32, d.vocab);  // read only for tokens present, which it sets
  run_ends_kernel<<<detail::grid_for(BT, kThreads), kThreads, 0, stream>>>(run_end.as<std::int32_t>(), sorted_tokens,
                                                                           BT, static_cast<int>(d.vocab));
  ZT_CUDA_CHECK_LAUNCH();
  detail::dispatch_activation(dout.dtype, [&](auto type) {
    using Act = typename decltype(type)::type;
    const Act* g = detail::act_data<Act>(dout);
    constexpr int kWide = detail::kWideVec<Act>;
    const bool vec = use_wide(d.C, g, {dwte.as<float>(), with_wpe ? dwpe.as<float>() : dwte.as<float>()});
    const auto wte_kernel = vec ? embedding_backward_wte<Act, kWide> : embedding_backward_wte<Act, 1>;
    wte_kernel<<<static_cast<unsigned>(BT), kThreads, 0, stream>>>(
        dwte.as<float>(), g, sorted_tokens, sorted_positions, run_end.as<std::int32_t>(), static_cast<int>(d.C),
        static_cast<int>(d.vocab), static_cast<int>(row_begin), static_cast<int>(dwte.shape[0]));
    ZT_CUDA_CHECK_LAUNCH();
    if (!with_wpe) return;
    const auto wpe_kernel = vec ? embedding_backward_wpe<Act, kWide> : embedding_backward_wpe<Act, 1>;
    wpe_kernel<<<detail::grid_for(d.T * d.C / (vec ? kWide : 1), kThreads), kThreads, 0, stream>>>(
        dwpe.as<float>(), g, static_cast<int>(d.B), static_cast<int>(d.T), static_cast<int>(d.C));
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
