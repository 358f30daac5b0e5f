// The process-wide communicators the collective tests share (one MPI initialisation per process).
#pragma once

#include "engine/distributed/comm/communicator.h"

namespace zt {

Communicator& test_comm();                // default options
Communicator& deterministic_test_comm();  // CommOptions::deterministic
MemoryTracker& test_tracker();

}  // namespace zt
