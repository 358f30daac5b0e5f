// The CPU's OpsBackend: every op on the host, through the kernels of this folder. kernels/ops
// chooses it for a context whose device is the CPU.
#pragma once

#include "kernels/contracts/ops_backend.h"

namespace zt::cpu {

// The one CPU backend (stateless: the thread count comes with each call's context).
const OpsBackend& ops_backend();

}  // namespace zt::cpu
