// Internal to the CUDA kernels: which chunk kernel the LayerNorm and RMSNorm backwards run.
#pragma once

namespace zt::cuda {

// kBlock: a block a row where the rows are 16-byte aligned and of at most kBlockRowMaxGroups groups
// ([Note: a block a row] in block_row_backward.cuh; the default); kWarp: a warp a row and a column
// pass (the kernels before it, kept for zt_bench_kernels to time side by side and for the tests).
enum class NormBackwardRows { kBlock, kWarp };

}  // namespace zt::cuda
