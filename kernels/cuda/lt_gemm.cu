// cuBLASLt products for the CUDA kernels (see lt_gemm.h). Descriptors are built per call (a few
// microseconds of host time, hidden behind the queued GPU work); the algorithm comes from
// cuBLASLt's heuristic, which is deterministic for a given shape, GPU and library version, or from
// a timed search among its candidates ([Note: timed algorithm search]), once per configuration,
// kept in KernelResources::gemm_algorithms.
//
// [Note: timed algorithm search]
// cuBLASLt's heuristic ranks algorithms by a model, not by measurement; on an H100 the products
// with GELU epilogues ran at 482-502 TFLOP/s against 681 for plain ones (c17e257). With
// KernelResources::timed_gemm_search (runs that need not repeat bit for bit), the first call of a
// configuration asks for up to kCandidates algorithms, runs each on the call's own operands (a
// warm-up, then the best of kTimedRounds rounds of kRunsPerRound runs back to back, timed by
// events on the stream: a lone run after the stream went idle would count the host's launch of
// it, a few microseconds that can outweigh two candidates' difference on a small product) and
// keeps the fastest; the call itself then runs it, so its result is the kept algorithm's. A call
// whose output is pure output (beta 0, or beta 1 with C apart from D: a residual added in the
// epilogue) times its candidates in place: a rerun writes the same D and aux. A call that adds
// into D (beta 1: the weight gradients, half of a step's backward products) would add once per run,
// so its candidates write into scratch instead (out of place: C the real D, read only, D the
// scratch, the same bytes moved as in place). An output over KernelResources::
// timed_scratch_limit_bytes (64 MiB; the tied head's gradient: 77 MB in bf16 for GPT-2, 525 MB for
// Llama 3.2 1B) is not copied: its candidates are timed on its first columns, as many as the limit
// holds (a multiple of 128, at least 256: the same tiles, fewer of them), and the fastest is kept
// after a check against the whole product's descriptors (cublasLtMatmulAlgoCheck), else the
// heuristic's first. The search synchronises the stream a few times per configuration: a first
// step's cost, never a later one's.
#include "kernels/cuda/lt_gemm.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/base/device/cublaslt_library.h"
#include "engine/base/device/cuda_stream.h"
#include "kernels/cuda/common.cuh"

namespace zt::cuda::detail {

namespace {

// Largest power of two <= 256 dividing the address and the batch stride in bytes (0: no batch).
std::uint32_t alignment_bytes(const void* p, std::int64_t stride_bytes) {
  std::uint64_t bits = reinterpret_cast<std::uintptr_t>(p) | static_cast<std::uint64_t>(stride_bytes) | 256u;
  return static_cast<std::uint32_t>(bits & (~bits + 1));  // lowest set bit
}

// RAII for the cuBLASLt descriptors of one call.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescriptors() {
    if (pref) cublaslt().matmul_preference_destroy(pref);
    if (d) cublaslt().matrix_layout_destroy(d);
    if (b) cublaslt().matrix_layout_destroy(b);
    if (a) cublaslt().matrix_layout_destroy(a);
    if (op) cublaslt().matmul_desc_destroy(op);
  }
};

// How many candidates a search asks the heuristic for (it may offer fewer). 16: the profile's
// gemm_searches say whether any beyond the 8 of the first searches wins.
constexpr int kCandidates = 16;
constexpr int kTimedRounds = 2;
constexpr int kRunsPerRound = 2;

// The matrix g adds where beta is not 0: g.C, else D itself.
const void* added(const LtGemm& g) { return g.C != nullptr ? g.C : g.D; }

// The product g with `algo`, queued on ctx's stream: D = alpha op(A) op(B) + beta C into `out`
// (g.D itself, or scratch of its layout for a timed run of a product that adds into g.D).
cublasStatus_t matmul(const ExecContext& ctx, const LtGemm& g, const LtDescriptors& desc,
                      const cublasLtMatmulAlgo_t& algo, std::size_t ws_bytes, void* out) {
  KernelResources& res = detail::resources_of(ctx);
  return cublaslt().matmul(res.cublaslt(), desc.op, &g.alpha, g.A, desc.a, g.B, desc.b, &g.beta, added(g), desc.d, out,
                           desc.d, &algo, res.cublas_workspace(), ws_bytes, detail::stream_of(ctx));
}

// Whether g's C is apart from its D (a residual added in the epilogue).
bool c_apart(const LtGemm& g) { return g.C != nullptr && g.C != g.D; }

// Whether `algo` can write D apart from C (not every kernel can: CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT).
bool writes_apart_from_c(const cublasLtMatmulAlgo_t& algo) {
  std::int32_t support = 0;
  std::size_t written = 0;
  return cublaslt().matmul_algo_cap_get_attribute(&algo, CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT, &support,
                                                  sizeof support, &written) == CUBLAS_STATUS_SUCCESS &&
         support != 0;
}

// What timing the candidates found: the fastest's index and best time, the first's best time
// (-1 where it refused the operands) and how many ran.
struct Timed {
  int best = 0;
  float best_ms = -1.0f, first_ms = -1.0f;
  int ran = 0;
};

// The fastest of `found` candidate algorithms for this call, timed on its operands, each run
// writing into `out` ([Note: timed algorithm search]).
Timed fastest_algorithm(const ExecContext& ctx, const LtGemm& g, const LtDescriptors& desc,
                        const cublasLtMatmulHeuristicResult_t* candidates, int found, std::size_t ws_bytes, void* out) {
  const cudaStream_t stream = detail::stream_of(ctx);
  cuda::CudaEvent start(/*timing=*/true), stop(/*timing=*/true);
  Timed t;
  // A run that adds a matrix other than its output is out of place: a candidate that cannot write
  // apart from C is not run. cuBLASLt should refuse it, but one that summed split-K partials into
  // C would add the real gradient in once more for every timed run.
  const bool out_of_place = g.beta != 0.0f && out != added(g);
  // Where none runs, the first that could is kept (the real product may be out of place too).
  for (int i = 0; out_of_place && i < found; ++i) {
    if (writes_apart_from_c(candidates[i].algo)) {
      t.best = i;
      break;
    }
  }
  for (int i = 0; i < found; ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
    if (out_of_place && !writes_apart_from_c(candidates[i].algo)) continue;
    auto run = [&] { return matmul(ctx, g, desc, candidates[i].algo, ws_bytes, out); };
    if (run() != CUBLAS_STATUS_SUCCESS) continue;  // a candidate that refuses these operands
    float ms = -1.0f;                              // per run, the best round's
    for (int r = 0; r < kTimedRounds; ++r) {
      start.record(stream);
      for (int k = 0; k < kRunsPerRound; ++k) ZT_CUDA_CHECK(run());
      stop.record(stream);
      stop.synchronize();
      const float elapsed = cuda::CudaEvent::elapsed_ms(start, stop) / kRunsPerRound;
      ms = ms < 0.0f ? elapsed : std::min(ms, elapsed);
    }
    ++t.ran;
    if (i == 0) t.first_ms = ms;
    if (t.best_ms < 0.0f || ms < t.best_ms) {
      t.best_ms = ms;
      t.best = i;
    }
  }
  return t;
}

cublasComputeType_t compute_type(const KernelResources& res, const LtGemm& g) {
  const bool fp32 = g.ab_type == CUDA_R_32F;
  return fp32 && res.fp32_matmuls == MatmulPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                            : CUBLAS_COMPUTE_32F;  // bf16 inputs: fp32 accumulate
}

std::size_t element_bytes(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

// cuBLASLt assumes 256-byte aligned operands unless told otherwise; head slices of qkv and odd
// test shapes are less aligned, so each operand's real alignment is stated (batch strides included).
// C's is stated as D's: the lesser of the two where C is apart from D.
struct Alignments {
  std::uint32_t a, b, d;
};
Alignments alignments_of(const LtGemm& g) {
  const bool batched = g.batch_count > 1;
  const std::int64_t d_stride = batched ? g.stride_d * static_cast<std::int64_t>(element_bytes(g.d_type)) : 0;
  return {alignment_bytes(g.A, batched ? g.stride_a * static_cast<std::int64_t>(element_bytes(g.ab_type)) : 0),
          alignment_bytes(g.B, batched ? g.stride_b * static_cast<std::int64_t>(element_bytes(g.ab_type)) : 0),
          std::min(alignment_bytes(g.D, d_stride), alignment_bytes(added(g), d_stride))};
}

void build_descriptors(const KernelResources& res, const LtGemm& g, LtDescriptors& desc) {
  ZT_CUDA_CHECK(cublaslt().matmul_desc_create(&desc.op, compute_type(res, g), CUDA_R_32F));
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZT_CUDA_CHECK(cublaslt().matmul_desc_set_attribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  ZT_CUDA_CHECK(cublaslt().matmul_desc_set_attribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  ZT_CUDA_CHECK(
      cublaslt().matmul_desc_set_attribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof g.epilogue));
  if (g.bias != nullptr) {
    ZT_CUDA_CHECK(
        cublaslt().matmul_desc_set_attribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias));
  }
  if (g.aux != nullptr) {
    const std::int64_t aux_ld = g.m;
    ZT_CUDA_CHECK(
        cublaslt().matmul_desc_set_attribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof g.aux));
    ZT_CUDA_CHECK(
        cublaslt().matmul_desc_set_attribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
  }
  // Layouts describe the stored matrices (before op()): rows x cols of A are (trans ? k x m : m x k).
  ZT_CUDA_CHECK(
      cublaslt().matrix_layout_create(&desc.a, g.ab_type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda));
  ZT_CUDA_CHECK(
      cublaslt().matrix_layout_create(&desc.b, g.ab_type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb));
  ZT_CUDA_CHECK(cublaslt().matrix_layout_create(&desc.d, g.d_type, g.m, g.n, g.ldd));
  if (g.batch_count > 1) {
    const std::pair<cublasLtMatrixLayout_t, std::int64_t> layouts[] = {
        {desc.a, g.stride_a}, {desc.b, g.stride_b}, {desc.d, g.stride_d}};
    for (const auto& [layout, stride] : layouts) {
      ZT_CUDA_CHECK(cublaslt().matrix_layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &g.batch_count,
                                                           sizeof g.batch_count));
      ZT_CUDA_CHECK(cublaslt().matrix_layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                           sizeof stride));
    }
  }
  ZT_CUDA_CHECK(cublaslt().matmul_preference_create(&desc.pref));
  const std::size_t ws_bytes = res.cublas_workspace_bytes();
  ZT_CUDA_CHECK(cublaslt().matmul_preference_set_attribute(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &ws_bytes, sizeof ws_bytes));
  // A bf16 result is rounded once (docs/precision.md): split-K partials may be summed only in the
  // fp32 compute type (in workspace), not in place or in the output type, which would round each
  // partial sum to bf16 (long-K products such as the head's dinp, K = 50304, invite split-K).
  // Algorithms without split-K pass any mask. An fp32 result takes every scheme (all deterministic).
  if (g.d_type == CUDA_R_16BF) {
    const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    ZT_CUDA_CHECK(cublaslt().matmul_preference_set_attribute(desc.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                             &schemes, sizeof schemes));
  }
  const Alignments align = alignments_of(g);
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align.d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align.d}};
  for (const auto& [attr, bytes] : aligns) {
    ZT_CUDA_CHECK(cublaslt().matmul_preference_set_attribute(desc.pref, attr, &bytes, sizeof bytes));
  }
}

// Columns of a timing slice of g: as many of D's columns as the scratch limit holds, a multiple of
// 128; 0 where that is under 256 or the whole product (or g has an epilogue, whose bias and aux
// the slice would touch too, or a batch).
std::int64_t slice_columns(const KernelResources& res, const LtGemm& g) {
  if (g.batch_count != 1 || g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) return 0;
  const std::int64_t column_bytes = g.ldd * static_cast<std::int64_t>(element_bytes(g.d_type));
  const std::int64_t cols = res.timed_scratch_limit_bytes / column_bytes / 128 * 128;
  return cols >= 256 && cols < g.n ? cols : 0;
}

// The candidate to keep for g, timed on its first `cols` columns (C the real D's, D scratch):
// op(B)'s and D's first columns start where theirs do, with the same leading dimensions. Every
// candidate came from the heuristic for the whole product; a candidate the slice refuses is
// skipped, and the fastest is also checked against the whole product's descriptors and
// workspace (else candidate 0).
Timed fastest_on_slice(const ExecContext& ctx, const LtGemm& g, const LtDescriptors& whole,
                       const cublasLtMatmulHeuristicResult_t* candidates, int found, std::size_t ws_bytes,
                       std::int64_t cols) {
  KernelResources& res = detail::resources_of(ctx);
  LtGemm slice = g;
  slice.n = cols;
  LtDescriptors desc;
  build_descriptors(res, slice, desc);
  Buffer out = output_scratch(ctx, g, cols);
  Timed t = fastest_algorithm(ctx, slice, desc, candidates, found, ws_bytes, out.data());
  ++res.timed_slice_searches;
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t status = cublaslt().matmul_algo_check(res.cublaslt(), whole.op, whole.a, whole.b, whole.d,
                                                             whole.d, &candidates[t.best].algo, &check);
  if (status != CUBLAS_STATUS_SUCCESS || check.workspaceSize > ws_bytes) {
    t.best = 0;
    t.best_ms = t.first_ms;
  }
  return t;
}

// Queues g (into `out`, nullptr: g.D); false where `required` is false and cuBLASLt refuses g's
// configuration (no algorithm, or the kept one refuses these operands, e.g. out of place): then
// nothing was written but scratch and `out` (a search's timed runs).
bool queue_gemm(const ExecContext& ctx, const LtGemm& g, void* out, bool required) {
  KernelResources& res = detail::resources_of(ctx);
  const KernelResources::GemmKey key = gemm_key(ctx, g);
  if (!required && res.refused_gemms().count(key) != 0) return false;  // refused before: the fallback
  LtDescriptors desc;
  build_descriptors(res, g, desc);
  const std::size_t ws_bytes = res.cublas_workspace_bytes();
  auto cached = res.gemm_algorithms().find(key);
  if (cached == res.gemm_algorithms().end()) {
    // [Note: timed algorithm search]: into `out` where given (scratch by contract), in place where
    // a rerun leaves the same result (beta 0, or C apart from D), else into scratch of D's layout
    // if small enough.
    ZT_CHECK(out == nullptr || g.C == nullptr, "a product adding a separate C is not run out of place");
    const bool in_place = out == nullptr && (g.beta == 0.0f || c_apart(g));
    const bool whole = in_place || out != nullptr || output_fits_scratch(ctx, g);
    const std::int64_t slice = res.timed_gemm_search && !whole ? slice_columns(res, g) : 0;
    const bool search = res.timed_gemm_search && (whole || slice > 0);
    // The heuristic is not told that C is apart from D: with a separate C, its candidates that
    // cannot write D apart are dropped (the heuristic's first among the rest, or the search's).
    std::vector<cublasLtMatmulHeuristicResult_t> candidates(search || c_apart(g) ? kCandidates : 1);
    int found = 0;
    const cublasStatus_t status =
        cublaslt().matmul_algo_get_heuristic(res.cublaslt(), desc.op, desc.a, desc.b, desc.d, desc.d, desc.pref,
                                             static_cast<int>(candidates.size()), candidates.data(), &found);
    if (status == CUBLAS_STATUS_SUCCESS && c_apart(g)) {
      const auto kept = std::stable_partition(candidates.begin(), candidates.begin() + found,
                                              [](const auto& c) { return writes_apart_from_c(c.algo); });
      found = static_cast<int>(kept - candidates.begin());
      if (!search) found = std::min(found, 1);
    }
    if (!required && (status != CUBLAS_STATUS_SUCCESS || found == 0)) {  // not offered
      res.refused_gemms().insert(key);
      return false;
    }
    ZT_CUDA_CHECK(status);
    ZT_CHECK(found > 0, "cuBLASLt has no algorithm for m={} n={} k={} (transa {}, transb {}, epilogue {})", g.m, g.n,
             g.k, g.trans_a, g.trans_b, static_cast<int>(g.epilogue));
    Timed timed;
    if (found > 1 && slice > 0) {
      timed = fastest_on_slice(ctx, g, desc, candidates.data(), found, ws_bytes, slice);
    } else if (found > 1) {
      // The allocator's blocks are 256-byte aligned, at least as aligned as the D the candidates
      // were asked for, so each runs on the scratch as it will on D. Out of place, a candidate
      // that cannot write D apart from C (CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT) is not
      // run (fastest_algorithm).
      const bool own_scratch = !in_place && out == nullptr;
      Buffer timed_out = own_scratch ? output_scratch(ctx, g, g.n) : Buffer{};
      void* target = in_place ? g.D : (own_scratch ? timed_out.data() : out);
      timed = fastest_algorithm(ctx, g, desc, candidates.data(), found, ws_bytes, target);
    }
    if (found > 1) {
      res.gemm_searches.push_back({g.m, g.n, g.k, g.trans_a, g.trans_b, slice > 0, static_cast<int>(g.epilogue), found,
                                   timed.ran, timed.best, timed.first_ms, timed.best_ms});
    }
    cached = res.gemm_algorithms().emplace(key, candidates[static_cast<std::size_t>(timed.best)].algo).first;
  }
  // Into a caller's scratch while adding C = D (a measurement of the bias-gradient route), the
  // kept algorithm may be one that cannot write D apart from C: the heuristic offered only it, or
  // no candidate could (fastest_algorithm then keeps the first). cuBLASLt should refuse it, but one
  // that summed split-K partials into C would add into the real gradient; it is not run, and the
  // product in place under the same key stays available.
  if (out != nullptr && g.beta != 0.0f && out != added(g) && !writes_apart_from_c(cached->second)) {
    ZT_CHECK(!required, "cuBLASLt kept no algorithm that writes D apart from C for m={} n={} k={}", g.m, g.n, g.k);
    return false;
  }
  const cublasStatus_t status = matmul(ctx, g, desc, cached->second, ws_bytes, out != nullptr ? out : g.D);
  if (!required && status != CUBLAS_STATUS_SUCCESS) {  // refused: this product queued nothing
    // Only in place: a refusal into a caller's scratch (out of place) says nothing of the product
    // in place under the same key.
    if (out == nullptr) res.refused_gemms().insert(key);
    return false;
  }
  ZT_CUDA_CHECK(status);
  return true;
}

}  // namespace

Buffer output_scratch(const ExecContext& ctx, const LtGemm& g, std::int64_t columns) {
  return detail::resources_of(ctx).scratch(g.d_type == CUDA_R_32F ? DType::kF32 : DType::kBF16, g.ldd * columns);
}

bool output_fits_scratch(const ExecContext& ctx, const LtGemm& g) {
  return g.batch_count == 1 && g.ldd * g.n * static_cast<std::int64_t>(element_bytes(g.d_type)) <=
                                   detail::resources_of(ctx).timed_scratch_limit_bytes;
}

KernelResources::GemmKey gemm_key(const ExecContext& ctx, const LtGemm& g) {
  const KernelResources& res = detail::resources_of(ctx);
  const Alignments align = alignments_of(g);
  // Everything the descriptors and preferences are made of (pointers only through their
  // alignments), so equal keys ask the heuristic the same question. The bias and aux pointers
  // count through their alignments too: the heuristic reads the pointers set on the descriptor to
  // judge their alignment (cublasLt.h), so an algorithm chosen for a 256-byte aligned bias need not
  // serve a 16-byte aligned one. A C apart from D counts too: its algorithm must write apart.
  const std::int64_t align_bias = g.bias != nullptr ? alignment_bytes(g.bias, 0) : 0;
  const std::int64_t align_aux = g.aux != nullptr ? alignment_bytes(g.aux, 0) : 0;
  return {compute_type(res, g),
          g.trans_a,
          g.trans_b,
          g.m,
          g.n,
          g.k,
          g.lda,
          g.ldb,
          g.ldd,
          g.ab_type,
          g.d_type,
          g.epilogue,
          align_bias,
          align_aux,
          g.batch_count,
          g.stride_a,
          g.stride_b,
          g.stride_d,
          align.a,
          align.b,
          align.d,
          static_cast<std::int64_t>(res.cublas_workspace_bytes()),
          (res.timed_gemm_search ? 1 : 0) | (c_apart(g) ? 2 : 0)};
}

void run_gemm(const ExecContext& ctx, const LtGemm& g) { queue_gemm(ctx, g, nullptr, /*required=*/true); }

bool run_gemm_if_supported(const ExecContext& ctx, const LtGemm& g, void* out) {
  return queue_gemm(ctx, g, out, /*required=*/false);
}

}  // namespace zt::cuda::detail
