// cuDNN's fused attention: libcudnn.so.9 loaded at run time (the frontend's dynamic loading, so the
// binary has no link-time dependency on cuDNN), graphs built per shape and cached, operands
// handed to cuDNN as strided views into qkv, out and lse exactly as the flash kernels lay them out.
#include "kernels/cuda/cudnn_attention.h"

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "engine/base/core/check.h"
#include "kernels/contracts/operand_checks.h"  // fused_attention_dims
#include "kernels/cuda/kernel_resources.h"

#ifdef ZT_HAVE_CUDNN
#include <dlfcn.h>

#include <cudnn_frontend.h>

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // the frontend's dynamic loading reads every cuDNN symbol from here
}
#endif

namespace zt::cuda {

#ifdef ZT_HAVE_CUDNN
namespace fe = cudnn_frontend;

// [Note: cuDNN plans]
// A cuDNN graph (operation graph, heuristics' plan, workspace size) takes milliseconds to build,
// so each shape's forward and backward graphs are built once, on the first call that asks
// whether cuDNN serves the shape, and kept with the handle in KernelResources (one per device
// context). Both passes are built together so that the model takes cuDNN for a shape's forward
// only where its backward also has a plan: a shape cuDNN refuses (a build error, or no
// deterministic backward on this cuDNN where train.deterministic asks for one) runs both passes on
// the flash kernels, and the reason is
// kept to be reported. The pointers are bound at execution (the variant pack), so one graph
// serves every layer and step.
struct CudnnAttentionPlans {
  struct Plan {
    std::shared_ptr<fe::graph::Graph> graph;  // null when the shape has no plan
    std::int64_t workspace_bytes = 0;
    std::string error;
  };
  cudnnHandle_t handle = nullptr;
  std::map<std::array<std::int64_t, 7>, Plan> plans;  // {B, T, n_head, n_kv_head, hs, backward, deterministic}
  ~CudnnAttentionPlans() {
    if (handle != nullptr) (void)fe::detail::destroy_handle(handle);
  }
};

namespace {

// Tensor uids in the variant pack.
enum : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

struct Loaded {
  std::string why_not;
  std::int64_t version = 0;
};

const Loaded& library() {
  static const Loaded loaded = [] {
    Loaded l;
    void* handle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      l.why_not = fmt::format("libcudnn.so.9 does not load ({})", err != nullptr ? err : "no reason given");
      return l;
    }
    fe::cudnn_dlhandle = handle;
    try {
      l.version = static_cast<std::int64_t>(fe::detail::get_backend_version());
    } catch (const std::exception& e) {
      l.why_not = fmt::format("libcudnn.so.9 loaded but its version cannot be read ({})", e.what());
    }
    return l;
  }();
  return loaded;
}

void check_fe(fe::error_t status, const char* step) {
  if (status.is_bad()) throw RuntimeError(fmt::format("cuDNN attention: {}: {}", step, status.get_message()));
}

// The graph of one pass over [B, heads, T, hs] views: q (and dq) of n_head heads, k and v (and dk,
// dv) of n_kv_head heads (grouped-query attention when fewer: cuDNN's SDPA reads key/value head
// h / (n_head / n_kv_head) for query head h, as transformers' repeat_kv), all with the row stride W
// = (n_head + 2 n_kv_head) hs of qkv; out and dout with row stride C; the statistics
// [B, n_head, T, 1] fp32.
CudnnAttentionPlans::Plan build_plan(cudnnHandle_t handle, const std::array<std::int64_t, 7>& key) {
  const auto [B, T, NH, NKV, hs, backward, deterministic] = key;
  const std::int64_t C = NH * hs, W = (NH + 2 * NKV) * hs;
  const std::vector<std::int64_t> dims{B, NH, T, hs}, kv_dims{B, NKV, T, hs}, qkv_strides{T * W, hs, W, 1},
      out_strides{T * C, hs, C, 1}, stat_dims{B, NH, T, 1}, stat_strides{NH * T, T, 1, 1};
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto input = [&](const char* name, std::int64_t uid, const std::vector<std::int64_t>& shape,
                   const std::vector<std::int64_t>& strides) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(shape).set_stride(strides));
  };
  auto q = input("q", kQ, dims, qkv_strides), k = input("k", kK, kv_dims, qkv_strides),
       v = input("v", kV, kv_dims, qkv_strides);
  if (backward == 0) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention_forward")
                       .set_generate_stats(true)
                       .set_causal_mask(true)
                       .set_attn_scale(scale);
    auto [o, stats] = g->sdpa(q, k, v, options);
    o->set_output(true).set_dim(dims).set_stride(out_strides).set_uid(kO);
    stats->set_output(true)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stat_dims)
        .set_stride(stat_strides)
        .set_uid(kStats);
  } else {
    auto o = input("o", kO, dims, out_strides), d_o = input("dO", kDO, dims, out_strides);
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("stats")
                               .set_uid(kStats)
                               .set_dim(stat_dims)
                               .set_stride(stat_strides)
                               .set_data_type(fe::DataType_t::FLOAT));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("attention_backward")
                       .set_causal_mask(true)
                       .set_attn_scale(scale)
                       .set_deterministic_algorithm(deterministic != 0);  // KernelResources::deterministic_attention
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, options);
    dq->set_output(true).set_dim(dims).set_stride(qkv_strides).set_uid(kDQ);
    dk->set_output(true).set_dim(kv_dims).set_stride(qkv_strides).set_uid(kDK);
    dv->set_output(true).set_dim(kv_dims).set_stride(qkv_strides).set_uid(kDV);
  }
  CudnnAttentionPlans::Plan plan;
  try {
    check_fe(g->validate(), "validate");
    check_fe(g->build_operation_graph(handle), "build_operation_graph");
    check_fe(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
    check_fe(g->check_support(handle), "check_support");
    check_fe(g->build_plans(handle), "build_plans");
    check_fe(g->get_workspace_size(plan.workspace_bytes), "get_workspace_size");
    plan.graph = std::move(g);
  } catch (const std::exception& e) {  // the frontend also throws (e.g. a symbol this cuDNN lacks)
    plan.error = fmt::format("no {} plan for B {} T {} n_head {} n_kv_head {} head size {} ({})",
                             backward ? "backward" : "forward", B, T, NH, NKV, hs, e.what());
  }
  return plan;
}

CudnnAttentionPlans& plans_of(const ExecContext& ctx) {
  ZT_CHECK(ctx.device == Device::kCUDA && ctx.cuda_resources != nullptr, "cuDNN attention needs a CUDA context");
  auto& slot = ctx.cuda_resources->cudnn_attention_plans;
  if (!slot) {
    auto made = std::make_shared<CudnnAttentionPlans>();
    const auto status = fe::detail::create_handle(&made->handle);
    if (status != CUDNN_STATUS_SUCCESS) {
      throw RuntimeError(fmt::format("cuDNN attention: cudnnCreate failed ({})", fe::detail::get_error_string(status)));
    }
    slot = std::move(made);
  }
  return *slot;
}

const CudnnAttentionPlans::Plan& plan_for(const ExecContext& ctx, std::int64_t B, std::int64_t T, std::int64_t NH,
                                          std::int64_t NKV, std::int64_t hs, bool backward) {
  CudnnAttentionPlans& p = plans_of(ctx);
  // Only the backward has the choice; the forward's key keeps 1 so one graph serves either run.
  const bool deterministic = !backward || ctx.cuda_resources->deterministic_attention;
  const std::array<std::int64_t, 7> key{B, T, NH, NKV, hs, backward ? 1 : 0, deterministic ? 1 : 0};
  auto it = p.plans.find(key);
  if (it == p.plans.end()) it = p.plans.emplace(key, build_plan(p.handle, key)).first;
  return it->second;
}

void execute(const ExecContext& ctx, const CudnnAttentionPlans::Plan& plan,
             std::unordered_map<std::int64_t, void*>& pack) {
  CudnnAttentionPlans& p = plans_of(ctx);
  const auto status = fe::detail::set_stream(p.handle, static_cast<cudaStream_t>(ctx.cuda_stream));
  if (status != CUDNN_STATUS_SUCCESS) {
    throw RuntimeError(
        fmt::format("cuDNN attention: cudnnSetStream failed ({})", fe::detail::get_error_string(status)));
  }
  // Scratch is stream-ordered: freed after this call, reused only by work queued after cuDNN's.
  const std::int64_t words = (plan.workspace_bytes + 3) / 4;
  Buffer workspace = words > 0 ? ctx.cuda_resources->scratch(DType::kF32, words) : Buffer();
  check_fe(plan.graph->execute(p.handle, pack, words > 0 ? workspace.data() : nullptr), "execute");
}

}  // namespace
#endif  // ZT_HAVE_CUDNN

namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The shapes as every attention backend checks them (qkv rows of n_head query and n_kv_head
// key/value heads), plus cuDNN's own: BF16 activations, F32 lse, device memory.
AttentionDims check_operands(const char* op, const TensorView& out, const TensorView& lse, const TensorView& qkv,
                             int n_head, int n_kv_head) {
  ZT_CHECK(qkv.dtype == DType::kBF16 && out.dtype == DType::kBF16, "{}: cuDNN attention takes BF16 activations", op);
  ZT_CHECK(lse.dtype == DType::kF32, "{}: lse is F32", op);
  ZT_CHECK(qkv.device == Device::kCUDA && out.device == Device::kCUDA && lse.device == Device::kCUDA,
           "{}: operands must be in device memory", op);
  const AttentionDims d = fused_attention_dims(out, qkv, n_head, n_kv_head);
  ZT_CHECK(lse.numel() == d.B * d.NH * d.T, "{}: lse must be [B, n_head, T]", op);
  return d;
}

}  // namespace

std::string cudnn_attention_unavailable() {
#ifdef ZT_HAVE_CUDNN
  return library().why_not;
#else
  return "this build has no cuDNN (its headers or the cuDNN frontend's were not found at configure time)";
#endif
}

std::string cudnn_library_version() {
#ifdef ZT_HAVE_CUDNN
  if (library().why_not.empty()) return fmt::format("cuDNN {}", library().version);
#endif
  return "no cuDNN";
}

std::string cudnn_attention_refuses(DType activations, std::int64_t head_size, bool dropout) {
  return cudnn_attention_shape_refuses(activations, head_size, dropout);  // the contract's rule
}

bool cudnn_attention_serves(const ExecContext& ctx, DType activations, std::int64_t batch, std::int64_t seq_len,
                            int n_head, std::int64_t head_size, bool dropout,
                            std::initializer_list<const void*> operands, std::string* why, int n_kv_head) {
  if (n_kv_head == 0) n_kv_head = n_head;
  std::string reason = cudnn_attention_unavailable();
  if (reason.empty()) reason = cudnn_attention_refuses(activations, head_size, dropout);
  for (const void* p : operands) {
    if (reason.empty() && !aligned16(p)) reason = "an operand is not 16-byte aligned";
  }
#ifdef ZT_HAVE_CUDNN
  if (reason.empty() && batch * seq_len > 0) {
    for (bool backward : {false, true}) {
      const auto& plan = plan_for(ctx, batch, seq_len, n_head, n_kv_head, head_size, backward);
      if (reason.empty() && !plan.error.empty()) reason = plan.error;
    }
  }
#else
  (void)ctx, (void)batch, (void)seq_len, (void)n_head, (void)n_kv_head;
#endif
  if (why != nullptr) *why = reason;
  return reason.empty();
}

void cudnn_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                             int n_kv_head) {
  const AttentionDims d = check_operands("cudnn_attention_forward", out, lse, qkv, n_head, n_kv_head);
  std::string why;
  ZT_CHECK(cudnn_attention_serves(ctx, DType::kBF16, d.B, d.T, n_head, d.hs, false, {out.data, qkv.data, lse.data},
                                  &why, static_cast<int>(d.NKV)),
           "cudnn_attention_forward: {}", why);
  if (d.B * d.T == 0) return;
#ifdef ZT_HAVE_CUDNN
  char* base = static_cast<char*>(qkv.data);  // bf16: 2 bytes a column; k and v at their column offsets
  std::unordered_map<std::int64_t, void*> pack{
      {kQ, base}, {kK, base + 2 * d.k_off}, {kV, base + 2 * d.v_off}, {kO, out.data}, {kStats, lse.data}};
  execute(ctx, plan_for(ctx, d.B, d.T, d.NH, d.NKV, d.hs, false), pack);
#endif
}

void cudnn_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out, TensorView qkv,
                              TensorView lse, int n_head, int n_kv_head) {
  const AttentionDims d = check_operands("cudnn_attention_backward", out, lse, qkv, n_head, n_kv_head);
  ZT_CHECK(dqkv.dtype == DType::kBF16 && dout.dtype == DType::kBF16 && dqkv.device == Device::kCUDA &&
               dout.device == Device::kCUDA,
           "cudnn_attention_backward: dqkv and dout are BF16 in device memory");
  ZT_CHECK(dqkv.numel() == qkv.numel() && dout.numel() == out.numel(),
           "cudnn_attention_backward: dqkv must be shaped as qkv, dout as out");
  std::string why;
  ZT_CHECK(cudnn_attention_serves(ctx, DType::kBF16, d.B, d.T, n_head, d.hs, false,
                                  {dqkv.data, dout.data, out.data, qkv.data, lse.data}, &why, static_cast<int>(d.NKV)),
           "cudnn_attention_backward: {}", why);
  if (d.B * d.T == 0) return;
#ifdef ZT_HAVE_CUDNN
  char* base = static_cast<char*>(qkv.data);
  char* dbase = static_cast<char*>(dqkv.data);
  const std::int64_t k = 2 * d.k_off, v = 2 * d.v_off;  // bytes from q to k and to v in a row
  std::unordered_map<std::int64_t, void*> pack{{kQ, base},     {kK, base + k},     {kV, base + v},
                                               {kO, out.data}, {kStats, lse.data}, {kDO, dout.data},
                                               {kDQ, dbase},   {kDK, dbase + k},   {kDV, dbase + v}};
  execute(ctx, plan_for(ctx, d.B, d.T, d.NH, d.NKV, d.hs, true), pack);
#endif
}

}  // namespace zt::cuda
