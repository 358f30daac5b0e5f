// The linear layer's bias gradient on the GPU (see bias_grad.h).
//
// [Note: the bias gradient in the weight product]
// The two-stage kernels read all of dout once more after the weight-gradient product has read it:
// about 1.1 ms of a GPT-2 124M step on the H200 (B 16, T 1024; zt_bench_kernels' [N, C] and
// [N, 4C] rows scaled to 16384 rows, an estimate). cuBLASLt's BGRADA / BGRADB epilogues sum the
// operand over the product's k (the rows) while the product streams it, so the extra read goes,
// at the cost of whatever the epilogue adds to the product: reported both faster and much slower
// by shape (NVIDIA/CUDALibrarySamples#90), so the choice is measured, never assumed.
// KernelResources::bias_grad_route: kKernels (train.deterministic, and the default) keeps the
// kernels, whose fixed order repeats bit for bit; kFastest (runs with the timed algorithm search)
// times both ways once per product configuration, out of place into scratch (the product adds
// into the gradient, so a timed run must not touch it), and keeps the faster; kEpilogue takes
// the epilogue wherever cuBLASLt offers it (the GPU tests, which must check its arithmetic). The
// epilogue writes the sums, in the product's output type, into scratch (it overwrites; dbias
// adds), and residual_forward adds them into dbias: with bf16 gradients that rounds the sum
// before the add, which changes nothing where dbias holds zero -- as it does, since gradients
// are added in place only into zeroed storage (ParamStore::in_place_grads) and otherwise into
// zeroed fp32 scratch. The epilogue route needs bf16 operands, dw reading dout itself (not a bf16
// copy of fp32 activations) and dbias in the product's output type, and is skipped otherwise;
// where cuBLASLt refuses it (no algorithm, or none that writes out of place for the timing) the
// kernels run.
#include "kernels/cuda/bias_grad.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/matmul_kernels.cuh"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/timed_pair.h"

namespace zt::cuda::detail {

namespace {

using matmul::bias_grad_accumulate;
using matmul::bias_grad_partials;
using matmul::kBiasColGroups;
using matmul::kBiasRowsPerChunk;
using matmul::kBiasThreads;

// dw with the bias-gradient epilogue writing the sums into `sums` (dw's output type).
LtGemm with_bias_epilogue(const LtGemm& dw, bool dout_is_a, void* sums) {
  LtGemm e = dw;
  e.epilogue = dout_is_a ? CUBLASLT_EPILOGUE_BGRADA : CUBLASLT_EPILOGUE_BGRADB;
  e.bias = sums;
  return e;
}

// The epilogue route: dw's product with the sums into `sums`, then dbias += sums. `out`: where
// the product's D goes (nullptr: dw.D). False, dw.D and dbias untouched, where cuBLASLt refuses
// the epilogue.
bool epilogue_route(const ExecContext& ctx, const LtGemm& dw, bool dout_is_a, TensorView dbias, Buffer& sums,
                    void* out) {
  if (!run_gemm_if_supported(ctx, with_bias_epilogue(dw, dout_is_a, sums.data()), out)) return false;
  const TensorView s = sums.view(dbias.shape);
  residual_forward(ctx, dbias, dbias, s);
  return true;
}

// Whether the epilogue route measured faster than the kernels for dw's configuration, timed on
// scratch outputs (contents irrelevant to the timing); false where it is not offered or D is
// too large to copy for timing.
bool epilogue_measures_faster(const ExecContext& ctx, const LtGemm& dw, bool dout_is_a, TensorView dbias,
                              TensorView dout, std::int64_t rows, int OC) {
  KernelResources& res = resources_of(ctx);
  if (!output_fits_scratch(ctx, dw)) return false;
  Buffer d_out = output_scratch(ctx, dw, dw.n), db = res.scratch(dbias.dtype, OC), sums = res.scratch(dbias.dtype, OC);
  const TensorView db_view = db.view(dbias.shape);
  // Both routes add into db: zeroed first, so that nothing uninitialised is read (compute-sanitizer's
  // initcheck would say so; the sums are thrown away either way).
  ZT_CUDA_CHECK(cudaMemsetAsync(db.data(), 0, static_cast<std::size_t>(db.size_bytes()), stream_of(ctx)));
  // Warm-ups, which also run each product's own timed algorithm search (into d_out). Either way
  // may be refused out of place (no candidate writes D apart from C): then the kernels stay.
  if (!epilogue_route(ctx, dw, dout_is_a, db_view, sums, d_out.data())) return false;
  auto kernels_route = [&] {
    if (!run_gemm_if_supported(ctx, dw, d_out.data())) return false;
    bias_grad_kernels(ctx, db_view, dout, rows, OC);
    return true;
  };
  if (!kernels_route()) return false;
  const PairTimes t = time_alternated(stream_of(ctx), kernels_route,
                                      [&] { epilogue_route(ctx, dw, dout_is_a, db_view, sums, d_out.data()); });
  return t.second_ms < t.first_ms;
}

}  // namespace

void bias_grad_kernels(const ExecContext& ctx, TensorView dbias, TensorView dout, std::int64_t rows, int OC) {
  const cudaStream_t stream = stream_of(ctx);
  const std::int64_t chunks = kernel_scratch::chunks_of(rows, kBiasRowsPerChunk);
  ZT_CHECK(chunks < 65536, "too many rows ({}) for the bias-gradient grid", rows);
  Buffer partials = resources_of(ctx).scratch(DType::kF32, kernel_scratch::bias_grad_partial_floats(rows, OC));
  dispatch_activation(dout.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    const T* g = act_data<T>(dout);
    // One 16-byte group of columns a thread (kWideVec<T>) where every row starts aligned16, one
    // column otherwise.
    constexpr int kWide = kWideVec<T>;
    const bool vec = OC % kWide == 0 && wide_vec_aligned(g);
    const int width = vec ? kWide : 1;
    const auto groups = static_cast<unsigned>((OC + width - 1) / width);
    const dim3 grid((groups + kBiasColGroups - 1) / kBiasColGroups, static_cast<unsigned>(chunks));
    const auto kernel = vec ? bias_grad_partials<T, kWide> : bias_grad_partials<T, 1>;
    kernel<<<grid, kBiasThreads, 0, stream>>>(partials.as<float>(), g, rows, OC);
  });
  ZT_CUDA_CHECK_LAUNCH();
  dispatch_activation(dbias.dtype, [&](auto type) {
    using D = typename decltype(type)::type;
    bias_grad_accumulate<D><<<partial_blocks(OC), kPartialThreads, 0, stream>>>(
        act_data<D>(dbias), partials.as<float>(), static_cast<int>(chunks), OC);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

void weight_and_bias_grad(const ExecContext& ctx, const LtGemm& dw, bool dout_is_a, bool dout_operand_is_dout,
                          TensorView dbias, TensorView dout, std::int64_t rows, int OC) {
  KernelResources& res = resources_of(ctx);
  // bf16 operands only: fp32 ones may run as TF32 (precision.matmul), and whether the epilogue
  // then sums the TF32-rounded operand is not documented.
  const bool epilogue_possible = dbias.data != nullptr && res.bias_grad_route != BiasGradRoute::kKernels &&
                                 dout_operand_is_dout && dw.ab_type == CUDA_R_16BF &&
                                 dw.d_type == (dbias.dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF);
  if (epilogue_possible) {
    bool use_epilogue = true;
    if (res.bias_grad_route == BiasGradRoute::kFastest) {
      // The epilogue's kind in the key: with in == out, the two layouts' products share the rest.
      const KernelResources::GemmKey key = gemm_key(ctx, with_bias_epilogue(dw, dout_is_a, nullptr));
      auto decided = res.bias_grad_in_epilogue().find(key);
      if (decided == res.bias_grad_in_epilogue().end()) {
        decided = res.bias_grad_in_epilogue()
                      .emplace(key, epilogue_measures_faster(ctx, dw, dout_is_a, dbias, dout, rows, OC))
                      .first;
      }
      use_epilogue = decided->second;
    }
    Buffer sums = use_epilogue ? res.scratch(dbias.dtype, OC) : Buffer{};
    if (use_epilogue && epilogue_route(ctx, dw, dout_is_a, dbias, sums, nullptr)) {
      ++res.bias_grad_epilogue_calls;
      return;
    }
  }
  run_gemm(ctx, dw);
  if (dbias.data != nullptr) bias_grad_kernels(ctx, dbias, dout, rows, OC);
}

}  // namespace zt::cuda::detail
