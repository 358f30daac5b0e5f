// Shared set-up for GPT model tests: a model, its resident store initialised from a seed, and a
// random batch, so each test states only what it checks.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/cpu/cast.h"
#include "models/gpt/gpt_model.h"

namespace zt::gpt::testing {

struct GptFixture {
  MemoryTracker tracker;
  ExecContext ctx{Device::kCPU, 2, nullptr};
  std::unique_ptr<GptModel> model;
  LocalCommunicator comm{tracker, {}};
  std::unique_ptr<ZeroParamStore> store;  // one rank, stage 0: everything resident
  std::vector<std::int32_t> inputs, targets;

  GptFixture(const GptConfig& c, int B, int T, CheckpointPolicy policy, DType dtype, std::uint64_t seed,
             DType activations = DType::kF32, const UnitLayout& layout = {}, float dropout = 0.0f) {
    model = std::make_unique<GptModel>(c, B, T, policy, tracker, ctx, dropout, seed, activations, layout);
    store = std::make_unique<ZeroParamStore>(model->table(), dtype, ZeroOptions{}, comm, tracker, ctx);
    for (std::size_t u = 0; u < model->table().units().size(); ++u) {
      const std::int64_t n = model->table().units()[u].numel;
      std::vector<float> init(static_cast<std::size_t>(n));
      init_unit_params(model->table(), c, static_cast<int>(u), seed, init.data());
      cpu::cast(ctx, store->working_shard(static_cast<int>(u)),
                TensorView{init.data(), DType::kF32, Device::kCPU, Shape{n}});
    }
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    std::uniform_int_distribution<int> tok(0, c.vocab_size - 1);
    inputs.resize(static_cast<std::size_t>(B) * T);
    targets.resize(inputs.size());
    for (auto& t : inputs) t = tok(rng);
    for (auto& t : targets) t = tok(rng);
  }

  float step() {
    store->begin_step();
    const float loss = model->forward(*store, inputs.data(), targets.data());
    model->backward(*store);
    return loss;
  }

  // All gradients widened to fp32, tensor after tensor in name order (a tensor split across units,
  // part after part), so models whose units differ compare.
  std::vector<float> grads_f32() const {
    const ParamTable& t = model->table();
    std::vector<std::vector<float>> units;
    for (std::size_t u = 0; u < t.units().size(); ++u) {
      const TensorView g = store->grad_shard(static_cast<int>(u));
      units.emplace_back(static_cast<std::size_t>(g.numel()));
      cpu::cast(ctx, TensorView{units.back().data(), DType::kF32, Device::kCPU, Shape{g.numel()}}, g);
    }
    std::map<std::string, std::vector<float>> by_name;  // layouts order their tensors differently
    for (const TensorParts& tensor : t.tensors()) {
      for (int index : tensor.parts) {
        const ParamSpec& p = t.param(index);
        const auto& unit = units[static_cast<std::size_t>(p.unit)];
        by_name[tensor.name].insert(by_name[tensor.name].end(), unit.begin() + p.offset,
                                    unit.begin() + p.offset + p.numel);
      }
    }
    std::vector<float> out;
    for (const auto& [name, values] : by_name) out.insert(out.end(), values.begin(), values.end());
    return out;
  }

  // All gradients, unit after unit, as raw bytes (for bitwise comparison).
  std::vector<unsigned char> grad_bytes() const {
    std::vector<unsigned char> out;
    for (std::size_t u = 0; u < model->table().units().size(); ++u) {
      const TensorView g = store->grad_shard(static_cast<int>(u));
      const auto* p = static_cast<const unsigned char*>(g.data);
      out.insert(out.end(), p, p + g.size_bytes());
    }
    return out;
  }
};

// The (parameter dtype, activation dtype) pairs the model tests run, and their test names.
inline const auto kPrecisionPairs = ::testing::Values(
    std::pair{DType::kF32, DType::kF32}, std::pair{DType::kBF16, DType::kF32}, std::pair{DType::kBF16, DType::kBF16});
inline std::string precision_pair_name(const ::testing::TestParamInfo<std::pair<DType, DType>>& info) {
  return std::string(info.param.first == DType::kF32 ? "f32" : "bf16") + "_params_" +
         (info.param.second == DType::kF32 ? "f32" : "bf16") + "_activations";
}

}  // namespace zt::gpt::testing
