// What the CUDA runtime sees: device count and names. Lets the CLI and the gpu-labelled tests
// say plainly whether a GPU is present (and skip visibly when not). Kernels arrive with the CUDA
// backend issue, one op per .cu/.cuh pair beside this file.
#pragma once

#include <string>

namespace zt::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();
// Why device_count() is 0: the runtime's error ("cudaErrorNoDevice: no CUDA-capable device is
// detected", or a driver older than the toolkit); empty when the query succeeded.
std::string device_count_error();

// "NVIDIA H100 80GB HBM3 (sm_90)" for device `index`, or the runtime's error text.
std::string device_description(int index);

// Free memory on device `index` now (cudaMemGetInfo on it; creates its context and leaves it the
// calling thread's device); -1 when the query fails.
long long device_free_bytes(int index);

}  // namespace zt::cuda
