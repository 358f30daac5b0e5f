// The activation and parameter dtype checks (see the header).
#include "kernels/contracts/activation_dtype.h"

#include "engine/base/core/check.h"

namespace zt {

DType activation_dtype(const char* op, std::initializer_list<TensorView> operands) {
  bool any = false;
  DType dtype = DType::kF32;
  for (const TensorView& v : operands) {
    if (v.data == nullptr) continue;
    ZT_CHECK(v.dtype == DType::kF32 || v.dtype == DType::kBF16, "{}: activation operands must be F32 or BF16, not {}",
             op, dtype_name(v.dtype));
    ZT_CHECK(!any || v.dtype == dtype, "{}: activation operands mix {} and {} (they share one dtype)", op,
             dtype_name(dtype), dtype_name(v.dtype));
    any = true;
    dtype = v.dtype;
  }
  return dtype;
}

void check_param_dtype(const char* op, DType activations, std::initializer_list<TensorView> params) {
  for (const TensorView& v : params) {
    if (v.data == nullptr) continue;
    ZT_CHECK(v.dtype == DType::kF32 || (v.dtype == DType::kBF16 && activations == DType::kBF16),
             "{}: parameters must be F32, or BF16 with BF16 activations (parameter {}, activations {})", op,
             dtype_name(v.dtype), dtype_name(activations));
  }
}

}  // namespace zt
