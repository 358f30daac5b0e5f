// ZT_NCCL_CHECK: an NCCL call's failure as a RuntimeError naming the call, file:line, NCCL's error
// string and the communicator's last error. Internal to the NCCL backend (engine/distributed/comm/nccl_*.cpp).
#pragma once

#include <nccl.h>

#include "engine/base/core/check.h"

namespace zt {

// ncclInProgress is not a failure: a non-blocking communicator's call settles later (polled).
inline void nccl_check(ncclResult_t r, ncclComm_t comm, const char* call, const char* file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  const char* last = comm != nullptr ? ncclGetLastError(comm) : "";
  throw_runtime_error("{} failed at {}:{}: {}{}{}", call, file, line, ncclGetErrorString(r),
                      last != nullptr && *last != '\0' ? ": " : "", last != nullptr ? last : "");
}

}  // namespace zt

#define ZT_NCCL_CHECK(call, comm) ::zt::nccl_check((call), (comm), #call, __FILE__, __LINE__)
