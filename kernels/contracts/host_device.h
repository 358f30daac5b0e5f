// ZT_HOST_DEVICE: a contract's inline function compiled for the host and, under nvcc, the device
// too, so the CPU's kernels and CUDA's share one statement of a rule.
#pragma once

#if defined(__CUDACC__)
#define ZT_HOST_DEVICE __host__ __device__
#else
#define ZT_HOST_DEVICE
#endif
