// AdamW on the GPU as one fused multi-tensor kernel: a launch takes up to kMaxSlices flat ranges
// (a shard's parameters, merged into runs of equal decay by the optimizer) in a table passed as a
// kernel parameter, and each block updates one kChunk-element chunk of one range (read g, p, m, v;
// write p, m, v and the working copy; 16-byte groups where every operand of the range is aligned).
// The per-step scalars are formed on the host exactly as the CPU kernel forms them, and every
// operation is written with an explicit rounding intrinsic (__fmul_rn, ...) so nvcc cannot contract
// it into an FMA: the CPU (ISO C++, no contraction) and GPU updates are then bitwise equal.
#include "kernels/cuda/adamw.h"


#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 256;

using cpu::AdamWCoeffs;

struct NoWorkingCopy {};

// One element's update; update_one and update_four call it, so both paths give the same bits.
__device__ __forceinline__ void update(float& p, float g_raw, float& m, float& v, const AdamWCoeffs& k,
                                       float grad_scale) {
  const float g = __fmul_rn(g_raw, grad_scale);
  const float decayed = __fmul_rn(p, k.decay);
  const float mi = __fadd_rn(m, __fmul_rn(k.one_minus_beta1, __fsub_rn(g, m)));
  const float vi = __fadd_rn(__fmul_rn(v, k.beta2), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
  p = __fsub_rn(decayed, __fdiv_rn(__fmul_rn(k.step_size, mi), denom));
  m = mi;
  v = vi;
}

__device__ __forceinline__ float load(const float* g, std::int64_t i) { return g[i]; }
__device__ __forceinline__ float load(const std::uint16_t* g, std::int64_t i) { return detail::bf16_to_f32(g[i]); }
__device__ __forceinline__ void store(NoWorkingCopy*, std::int64_t, float) {}
__device__ __forceinline__ void store(float* w, std::int64_t i, float p) { w[i] = p; }
__device__ __forceinline__ void store(std::uint16_t* w, std::int64_t i, float p) { w[i] = detail::f32_to_bf16(p); }

// Four consecutive elements from index 4 * q: one 16-byte access for fp32, 8 bytes for bf16.
__device__ __forceinline__ float4 load4(const float* g, std::int64_t q) { return reinterpret_cast<const float4*>(g)[q]; }
__device__ __forceinline__ float4 load4(const std::uint16_t* g, std::int64_t q) {
  const uint2 u = reinterpret_cast<const uint2*>(g)[q];  // little-endian: element 0 in the low half
  return make_float4(detail::bf16_to_f32(static_cast<std::uint16_t>(u.x & 0xffffu)),
                     detail::bf16_to_f32(static_cast<std::uint16_t>(u.x >> 16)),
                     detail::bf16_to_f32(static_cast<std::uint16_t>(u.y & 0xffffu)),
                     detail::bf16_to_f32(static_cast<std::uint16_t>(u.y >> 16)));
}
__device__ __forceinline__ void store4(NoWorkingCopy*, std::int64_t, float4) {}
__device__ __forceinline__ void store4(float* w, std::int64_t q, float4 p) { reinterpret_cast<float4*>(w)[q] = p; }
__device__ __forceinline__ void store4(std::uint16_t* w, std::int64_t q, float4 p) {
  const unsigned lo = detail::f32_to_bf16(p.x) | (static_cast<unsigned>(detail::f32_to_bf16(p.y)) << 16);
  const unsigned hi = detail::f32_to_bf16(p.z) | (static_cast<unsigned>(detail::f32_to_bf16(p.w)) << 16);
  reinterpret_cast<uint2*>(w)[q] = make_uint2(lo, hi);
}

// Per-element and per-group updates; the kernel below calls them, so both give the same bits.
template <typename G, typename W>
__device__ __forceinline__ void update_one(float* param, const G* grad, float* m, float* v, W* working, std::int64_t i,
                                           const AdamWCoeffs& k, float grad_scale) {
  float p = param[i], mi = m[i], vi = v[i];
  update(p, load(grad, i), mi, vi, k, grad_scale);
  m[i] = mi;
  v[i] = vi;
  param[i] = p;
  store(working, i, p);
}

template <typename G, typename W>
__device__ __forceinline__ void update_four(float* param, const G* grad, float* m, float* v, W* working,
                                            std::int64_t q, const AdamWCoeffs& k, float grad_scale) {
  float4 p = reinterpret_cast<float4*>(param)[q], mq = reinterpret_cast<float4*>(m)[q],
         vq = reinterpret_cast<float4*>(v)[q];
  const float4 g = load4(grad, q);
  update(p.x, g.x, mq.x, vq.x, k, grad_scale);
  update(p.y, g.y, mq.y, vq.y, k, grad_scale);
  update(p.z, g.z, mq.z, vq.z, k, grad_scale);
  update(p.w, g.w, mq.w, vq.w, k, grad_scale);
  reinterpret_cast<float4*>(m)[q] = mq;
  reinterpret_cast<float4*>(v)[q] = vq;
  reinterpret_cast<float4*>(param)[q] = p;
  store4(working, q, p);
}

constexpr std::int64_t kChunk = 4096;  // elements per block: four 4-element groups per thread
constexpr int kMaxSlices = 48;         // keeps the table under the classic 4 KB parameter limit

struct SliceDesc {
  float* param;
  const void* grad;
  float* m;
  float* v;
  void* working;
  std::int64_t n;
  int decays;
  int vec;  // every operand aligned for 4-element groups
};

struct SliceTable {
  SliceDesc slice[kMaxSlices];
  std::int64_t first_block[kMaxSlices];  // slice s owns blocks [first_block[s], first_block[s + 1])
  int count;
};
static_assert(sizeof(SliceTable) <= 4000, "the slice table must fit the kernel parameter space");

template <typename G, typename W>
__global__ void __launch_bounds__(kThreads)
    adamw_slices_kernel(const __grid_constant__ SliceTable table, AdamWCoeffs decayed, AdamWCoeffs plain,
                        float grad_scale) {
  // The slice owning this block: the last one whose first block is <= blockIdx.x (slices are never
  // empty, so first_block is strictly increasing).
  const std::int64_t block = blockIdx.x;
  int lo = 0, hi = table.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.first_block[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const SliceDesc& s = table.slice[lo];
  const std::int64_t begin = (block - table.first_block[lo]) * kChunk;  // a multiple of 4
  const std::int64_t end = begin + kChunk < s.n ? begin + kChunk : s.n;
  const AdamWCoeffs& k = s.decays ? decayed : plain;
  const G* grad = static_cast<const G*>(s.grad);
  W* working = static_cast<W*>(s.working);
  std::int64_t tail = begin;
  if (s.vec) {
    const std::int64_t q_end = end / 4;
    for (std::int64_t q = begin / 4 + threadIdx.x; q < q_end; q += kThreads) {
      update_four(s.param, grad, s.m, s.v, working, q, k, grad_scale);
    }
    tail = 4 * q_end;
  }
  for (std::int64_t i = tail + threadIdx.x; i < end; i += kThreads) {
    update_one(s.param, grad, s.m, s.v, working, i, k, grad_scale);
  }
}

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
  adamw_slices_kernel<G, W><<<static_cast<unsigned>(blocks), kThreads, 0, a.stream>>>(table, a.decayed, a.plain,
                                                                                        a.grad_scale);
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

void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper, int step,
                         float grad_scale) {
  ZT_CHECK(step >= 1, "AdamW step is 1-based, got {}", step);
  LaunchArgs args{detail::stream_of(ctx), cpu::adamw_coeffs(hyper, step), {}, grad_scale};
  AdamWHyper plain = hyper;
  plain.weight_decay = 0.0f;
  args.plain = cpu::adamw_coeffs(plain, step);  // the CPU's scalars, bit for bit

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
    cpu::check_adamw_operands(s.param, s.grad, s.m, s.v, s.working);
    ZT_CHECK(s.grad.dtype == grad_dtype && working_kind(s.working) == working,
             "adamw_update_slices: every slice needs the same gradient and working-copy types");
    const std::int64_t n = s.param.numel();
    if (n == 0) continue;
    const std::size_t grad_bytes = dtype_size_bytes(grad_dtype), working_bytes = s.working.data ? dtype_size_bytes(s.working.dtype) : 0;
    const bool vec = detail::aligned16(s.param.data) && detail::aligned16(s.m.data) && detail::aligned16(s.v.data) &&
                     detail::aligned(s.grad.data, 4 * grad_bytes) &&
                     (working_bytes == 0 || detail::aligned(s.working.data, 4 * working_bytes));
    table.slice[table.count] = SliceDesc{s.param.as<float>(), s.grad.data, s.m.as<float>(), s.v.as<float>(),
                                         s.working.data, n, s.decays ? 1 : 0, vec ? 1 : 0};
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
