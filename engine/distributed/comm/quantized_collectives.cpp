// Quantized all-gather and all-reduce over a communicator's plain collectives (see the header).
#include "engine/distributed/comm/quantized_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "engine/base/core/buffer.h"
#include "engine/base/core/check.h"
#include "kernels/contracts/int8_blocks.h"
#include "kernels/ops.h"

namespace zt {

namespace {

constexpr std::int64_t kF32 = 4;

// N slots of one encoded chunk of up to `c` values each: packed int8 words, or bf16 values. A
// shorter chunk (the last ones of a buffer that N does not divide) fills its slot's beginning.
struct Slots {
  WireDType wire;
  std::int64_t c;
  DType dtype() const { return wire == WireDType::kInt8 ? DType::kI32 : DType::kBF16; }
  std::int64_t slot() const { return wire == WireDType::kInt8 ? int8_blocks::packed_words(c) : c; }
  std::int64_t slot_bytes() const { return slot() * static_cast<std::int64_t>(dtype_size_bytes(dtype())); }
};

void encode(const ExecContext& ctx, WireDType wire, TensorView values, TensorView slot) {
  const std::int64_t m = values.numel();
  if (wire == WireDType::kInt8) {
    ops::quantize_int8_blocks(ctx, values, slot.slice(0, int8_blocks::packed_words(m)));
  } else {
    ops::cast(ctx, slot.slice(0, m), values);
  }
}

// dst (m values) = the slot's values, or += them; `widened` (F32, at least m) is bf16's scratch.
void decode(const ExecContext& ctx, WireDType wire, TensorView slot, TensorView dst, bool accumulate,
            TensorView widened) {
  const std::int64_t m = dst.numel();
  if (wire == WireDType::kInt8) {
    ops::dequantize_int8_blocks(ctx, slot.slice(0, int8_blocks::packed_words(m)), dst, accumulate);
  } else if (!accumulate) {
    ops::cast(ctx, dst, slot.slice(0, m));
  } else {
    ops::cast(ctx, widened.slice(0, m), slot.slice(0, m));
    ops::accumulate_into(ctx, dst, widened.slice(0, m));
  }
}

// Values of chunk j of n cut into chunks of c.
std::int64_t chunk_values(std::int64_t n, std::int64_t c, int j) { return std::clamp(n - j * c, std::int64_t{0}, c); }

Work compose(Communicator& comm, std::function<bool()> advance, std::string description) {
  return Work(std::move(advance), std::move(description), comm.options().timeout_s, comm.context_ptr(),
              [&comm](const std::string& message) { comm.abort_after_timeout(message); });
}

}  // namespace

const char* wire_dtype_name(WireDType wire) {
  switch (wire) {
    case WireDType::kExact: return "exact";
    case WireDType::kBF16: return "bf16";
    case WireDType::kInt8: return "int8";
  }
  return "?";
}

Work all_gather_int8(Communicator& comm, const ExecContext& ctx, MemoryTracker& tracker, TensorView send,
                     TensorView recv) {
  const int N = comm.world_size();
  const std::int64_t n = send.numel(), w = int8_blocks::packed_words(n);
  ZT_CHECK(recv.numel() == N * n, "all_gather_int8: recv has {} values, needs {} x {}", recv.numel(), N, n);
  struct State {
    Buffer own, all;
    Work exchange;
  };
  auto st = std::make_shared<State>();
  st->own = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, DType::kI32, w, false);  // every word written
  ops::quantize_int8_blocks(ctx, send, st->own.view());
  st->all = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, DType::kI32, N * w, false);
  st->exchange = comm.all_gather(st->own.view(), st->all.view());
  return compose(
      comm,
      [st, ctx, recv, n, w, N] {
        if (!st->exchange.test()) return false;
        for (int j = 0; j < N; ++j)
          ops::dequantize_int8_blocks(ctx, st->all.view().slice(j * w, w), recv.slice(j * n, n));
        st->own.reset();
        st->all.reset();
        return true;
      },
      fmt::format("int8 all_gather ({} x {} as {} packed words)", n, dtype_name(send.dtype), w));
}

std::int64_t all_gather_int8_staging_bytes(std::int64_t n, int world_size) {
  return kF32 * (world_size + 1) * int8_blocks::packed_words(n);
}

WireVolume all_gather_int8_volume(std::int64_t n, int world_size) {
  const std::int64_t elements = int8_blocks::packed_words(n) * (world_size - 1);  // count_volume of N slots
  return {elements, kF32 * elements};
}

Work all_reduce_encoded(Communicator& comm, const ExecContext& ctx, MemoryTracker& tracker, TensorView buf, ReduceOp op,
                        WireDType wire) {
  ZT_CHECK(wire != WireDType::kExact && (buf.dtype == DType::kF32 || buf.dtype == DType::kBF16),
           "all_reduce_encoded: an F32 or BF16 buffer, moved as bf16 or int8");
  const int N = comm.world_size(), me = comm.rank();
  const std::int64_t n = buf.numel();
  const Slots slots{wire, (n + N - 1) / N};
  const std::int64_t c = slots.c, s = slots.slot();
  struct State {
    Buffer send, recv, own, all;
    Work exchange;
    bool gathering = false;
  };
  auto st = std::make_shared<State>();
  // Phase 1: every chunk encoded into its slot, then the all-to-all.
  st->send = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, slots.dtype(), N * s);  // slot tails zero
  for (int j = 0; j < N; ++j) {
    encode(ctx, wire, buf.slice(j * c, chunk_values(n, c, j)), st->send.view().slice(j * s, s));
  }
  st->recv = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, slots.dtype(), N * s, false);
  st->exchange = comm.all_to_all(st->send.view(), st->recv.view());
  auto reduce_own_chunk = [st, ctx, &tracker, &comm, wire, op, slots, me, N, n] {
    // Phase 2: this rank's chunk from every rank, summed in rank order, encoded for the all-gather.
    const std::int64_t c = slots.c, s = slots.slot(), mine = chunk_values(n, c, me);
    st->send.reset();
    Buffer sum = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, DType::kF32, c, false);
    Buffer widened;
    if (wire == WireDType::kBF16)
      widened = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, DType::kF32, c, false);
    for (int j = 0; j < N; ++j) {
      decode(ctx, wire, st->recv.view().slice(j * s, s), sum.view().slice(0, mine), j > 0, widened.view());
    }
    if (op == ReduceOp::kAvg) ops::scale(ctx, sum.view().slice(0, mine), 1.0f / static_cast<float>(N));
    st->recv.reset();
    widened.reset();
    st->own = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, slots.dtype(), s);
    encode(ctx, wire, sum.view().slice(0, mine), st->own.view());
    sum.reset();
    st->all = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, slots.dtype(), N * s, false);
    st->exchange = comm.all_gather(st->own.view(), st->all.view());
    st->gathering = true;
  };
  return compose(
      comm,
      [st, ctx, buf, wire, slots, N, n, reduce_own_chunk] {
        if (!st->exchange.test()) return false;
        if (!st->gathering) {
          reduce_own_chunk();
          if (!st->exchange.test()) return false;
        }
        // Phase 3: every reduced chunk decoded into its place.
        const std::int64_t c = slots.c, s = slots.slot();
        for (int j = 0; j < N; ++j) {
          decode(ctx, wire, st->all.view().slice(j * s, s), buf.slice(j * c, chunk_values(n, c, j)), false, {});
        }
        st->own.reset();
        st->all.reset();
        return true;
      },
      fmt::format("{} all_reduce ({} x F32 in two exchanges)", wire_dtype_name(wire), n));
}

std::int64_t all_reduce_encoded_staging_bytes(std::int64_t n, int world_size, WireDType wire) {
  const Slots slots{wire, (n + world_size - 1) / world_size};
  const std::int64_t S = slots.slot_bytes(), N = world_size, sum = kF32 * slots.c;
  const std::int64_t widened = wire == WireDType::kBF16 ? kF32 * slots.c : 0;
  // The all-to-all's send and receive; then the receive beside the fp32 sum (and bf16's scratch);
  // then the sum beside the encoded own chunk; then the all-gather's send and receive.
  return std::max({2 * N * S, N * S + sum + widened, sum + S, (N + 1) * S});
}

WireVolume all_reduce_encoded_volume(std::int64_t n, int world_size, WireDType wire) {
  const Slots slots{wire, (n + world_size - 1) / world_size};
  const std::int64_t elements = 2 * slots.slot() * (world_size - 1);  // the all-to-all and the all-gather
  return {elements, elements * static_cast<std::int64_t>(dtype_size_bytes(slots.dtype()))};
}

}  // namespace zt
