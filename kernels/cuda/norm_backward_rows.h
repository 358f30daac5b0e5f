// Internal to the CUDA kernels: which chunk kernel the LayerNorm and RMSNorm backwards run.
#pragma once

namespace zt::cuda {

// kBlock: a block a row where the rows are 16-byte aligned and of at most kBlockRowMaxGroups groups
// ([Note: a block a row] in block_row_backward.cuh; the default, and train.deterministic's); kWarp:
// a warp a row and a column pass (the kernels before it, kept for zt_bench_kernels to time side by
// side and for the tests); kFastest: the faster of the two where both apply, timed once per shape
// ([Note: the norm backward's kernel, timed] in norm_rows_choice.cpp; runs with the timed
// algorithm search). Both give the parameter gradients bit for bit; dinp's row sums take
// different fixed orders.
enum class NormBackwardRows { kBlock, kWarp, kFastest };

}  // namespace zt::cuda
