// Quantized collectives, ZeRO++'s qwZ and qgZ: the same results as an all-gather or an all-reduce,
// moved in fewer bytes, composed of a communicator's plain collectives (any backend with an
// all-gather; the all-reduce also needs its all-to-all) and the ops backend's encoders
// (kernels/contracts/int8_blocks.h; casts), so they run wherever the buffers live. Every rank ends
// with the same bits, the same every run: each value is encoded by one rank and decoded alike by
// all, its own rank included. What they stage is comm buffers of `tracker`, from the call until
// the Work completes, and the *_staging_bytes functions state its peak for the memory prediction.
#pragma once

#include <cstdint>

#include "engine/distributed/comm/communicator.h"
#include "kernels/exec_context.h"

namespace zt {

// How values cross the wire: as they are, as bf16 (rounded to nearest even), or as int8 blocks.
enum class WireDType { kExact, kBF16, kInt8 };
const char* wire_dtype_name(WireDType wire);

// What one call sends from this rank, as Communicator::elements_sent and bytes_sent count it.
struct WireVolume {
  std::int64_t elements = 0, bytes = 0;
};

// qwZ: recv [N n] = every rank's send [n] (F32 or BF16; recv of either), sent as int8 blocks:
// this rank's send is packed, the packed slots are all-gathered, and the wait that finds them
// landed decodes each slot into its n values of recv, this rank's own too.
Work all_gather_int8(Communicator& comm, const ExecContext& ctx, MemoryTracker& tracker, TensorView send,
                     TensorView recv);
std::int64_t all_gather_int8_staging_bytes(std::int64_t n, int world_size);
WireVolume all_gather_int8_volume(std::int64_t n, int world_size);

// qgZ: buf (F32 or BF16 [n]) = its sum (or average) over the ranks, moved as `wire` (kBF16 or kInt8) in the
// two exchanges of a ring all-reduce: buf is cut into N chunks of ceil(n / N) values; chunk j of
// every rank goes to rank j (an all-to-all of encoded chunks), which decodes them and sums them in
// fp32 in rank order (times 1/N for an average), encodes its reduced chunk, and an all-gather
// hands every rank every reduced chunk, decoded into buf. Each value is encoded twice, as in qgZ.
Work all_reduce_encoded(Communicator& comm, const ExecContext& ctx, MemoryTracker& tracker, TensorView buf, ReduceOp op,
                        WireDType wire);
std::int64_t all_reduce_encoded_staging_bytes(std::int64_t n, int world_size, WireDType wire);
WireVolume all_reduce_encoded_volume(std::int64_t n, int world_size, WireDType wire);

}  // namespace zt
