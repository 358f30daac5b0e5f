// The optional entries of OpsBackend as a backend without them answers: no fused kernels, and a
// call that reaches one anyway (a caller that did not ask first) is an InternalError naming it.
#include "kernels/contracts/ops_backend.h"

#include <fmt/format.h>

#include "engine/base/core/check.h"

namespace zt {

namespace {

[[noreturn]] void missing(const OpsBackend& backend, const char* op) {
  throw InternalError(fmt::format("{}: the {} backend has no such kernel", op, backend.name()));
}

}  // namespace

void OpsBackend::check_context(const ExecContext&) const {}

bool OpsBackend::fuses_gelu_into_matmul(const ExecContext&, TensorView) const { return false; }

void OpsBackend::matmul_gelu_forward(const ExecContext&, TensorView, TensorView, TensorView, TensorView, WeightLayout,
                                     TensorView) const {
  missing(*this, "matmul_gelu_forward");
}

void OpsBackend::matmul_backward_through_gelu(const ExecContext&, TensorView, TensorView, TensorView, TensorView,
                                              TensorView, TensorView, WeightLayout, TensorView) const {
  missing(*this, "matmul_backward_through_gelu");
}

bool OpsBackend::fuses_residual_into_matmul(const ExecContext&, TensorView, TensorView) const { return false; }

void OpsBackend::matmul_residual_forward(const ExecContext&, TensorView, TensorView, TensorView, WeightLayout,
                                         TensorView, TensorView) const {
  missing(*this, "matmul_residual_forward");
}

bool OpsBackend::flash_attention_supports(std::int64_t, std::int64_t, std::int64_t) const { return false; }
bool OpsBackend::cached_attention_supports(std::int64_t) const { return true; }

bool OpsBackend::flash_attention_on_tensor_cores(DType, std::int64_t) const { return false; }

FusedAttentionPath OpsBackend::fused_attention_path(const ExecContext&, const TensorView&, int, int, const DropoutSpec&,
                                                    std::initializer_list<const void*>) const {
  return FusedAttentionPath::kNone;
}

void OpsBackend::flash_attention_forward(const ExecContext&, TensorView, TensorView, TensorView, int,
                                         const DropoutSpec&, int) const {
  missing(*this, "flash_attention_forward");
}

void OpsBackend::flash_attention_backward(const ExecContext&, TensorView, TensorView, TensorView, TensorView,
                                          TensorView, int, const DropoutSpec&, int) const {
  missing(*this, "flash_attention_backward");
}

void OpsBackend::cudnn_attention_forward(const ExecContext&, TensorView, TensorView, TensorView, int, int) const {
  missing(*this, "cudnn_attention_forward");
}

void OpsBackend::cudnn_attention_backward(const ExecContext&, TensorView, TensorView, TensorView, TensorView,
                                          TensorView, int, int) const {
  missing(*this, "cudnn_attention_backward");
}

}  // namespace zt
