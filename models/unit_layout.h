// How a model's parameters are cut into units, the granule ZeRO gathers, frees and reduces, for
// every model family: the head's table in `head_chunks` vocabulary chunks (train.head_chunks;
// models/head_chunks.h), each block (GPT-2) or layer (Llama) whole or in its attention and MLP
// halves (train.block_units = 2). Initial values, names and files are the same for every layout;
// only the units (and so checkpoints' shards) differ.
#pragma once

namespace zt {

struct UnitLayout {
  int head_chunks = 1;
  int block_units = 1;
};

}  // namespace zt
