// The CPU's OpsBackend: every op on the host, through the kernels of this folder. kernels/ops
// chooses it for a context whose device is the CPU.
#pragma once

#include "kernels/contracts/ops_backend.h"

namespace zt::cpu {

// The CPU backend (stateless: the thread count comes with each call's context).
const OpsBackend& ops_backend();

// For tests: the CPU backend saying that it fuses the residual into every product, as CUDA's does
// (its matmul_residual_forward is the product then the add: the same bits as ops' composition), so
// the models' branches that only a fusing device takes run on the CPU (ops::ScopedCpuBackend).
const OpsBackend& residual_fusing_ops_backend();

}  // namespace zt::cpu
