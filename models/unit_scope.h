// The store calls around a parameter unit used outside the blocks (the token table, the final norm
// and head, a vocabulary chunk), written once for every family as UnitRunner writes them for the
// blocks: a unit's parameters are held exactly while its math runs, and a gradient is handed to
// the store right after the math that filled it, marked ready on its unit's last round. A family
// says which unit, which fp32-copy slot and what math; it states no store call of its own.
#pragma once

#include <utility>

#include "engine/distributed/sharding/param_store.h"
#include "kernels/ops.h"
#include "models/kernel_params.h"

namespace zt {

// Whether a gradient round is its unit's last in the backward pass (the store may reduce it then)
// or one of several that add into it (a tied table: the head's round, then the embedding's).
enum class GradRound { kPartial, kLast };

// compute(params) with `unit`'s parameters acquired for `pass` (KernelParams::acquire's `slot`),
// released after it.
template <class Compute>
void with_params(ParamStore& store, KernelParams& params, int unit, Pass pass, int slot, Compute&& compute) {
  std::forward<Compute>(compute)(params.acquire(store, unit, pass, slot));
  store.release_params(unit, pass);
}

// Where `unit`'s next gradient contribution goes: the store's own storage where it lends it
// (ParamStore::in_place_grads) and this device's kernels add into its dtype under `act`
// activations (ops::adds_param_grads_into), else zeroed_scratch().
template <class Scratch>
TensorView destination_for_grads(ParamStore& store, int unit, const ExecContext& ctx, DType act,
                                 Scratch&& zeroed_scratch) {
  const TensorView own = store.in_place_grads(unit);
  if (own.data != nullptr && ops::adds_param_grads_into(ctx, own.dtype, act)) return own;
  return std::forward<Scratch>(zeroed_scratch)();
}

// compute(grad) adds `unit`'s gradient into `grad` (its destination: a zeroed scratch, or the
// store's own storage where it lends it), which then goes to the store.
template <class Compute>
void add_grads(ParamStore& store, int unit, TensorView grad, GradRound round, Compute&& compute) {
  std::forward<Compute>(compute)(grad);
  store.accumulate_grads(unit, grad);
  if (round == GradRound::kLast) store.grads_ready(unit);
}

}  // namespace zt
