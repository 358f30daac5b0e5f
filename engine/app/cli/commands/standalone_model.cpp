// A model loaded on its own from saved weights (see the header).
#include "engine/app/cli/commands/standalone_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/io/model_weights.h"
#include "engine/app/io/pretrained.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"
#include "kernels/ops.h"

namespace zt::cli {

namespace fs = std::filesystem;

namespace {

// The model's parameter table, its weights' headers checked against it before the store allocates
// it: a run's config.json or a Hugging Face config of another model (or a damaged width) would
// otherwise size the model's buffers first (48 TiB asked for, exit 1, no file named). A pretrained
// source is checked as pretrained_ opens it; a checkpoint's manifest was held to its table on
// reading (model_spec_of).
ParamTable checked_param_table(const WeightSource& source, const ModelSpec& spec) {
  ParamTable table = spec.family().param_table(spec);
  if (source.kind == WeightSource::Kind::kRun) {
    check_model_weights((fs::path(source.path) / "final.safetensors").string(), table);
  }
  return table;
}

}  // namespace

StandaloneModel::StandaloneModel(const WeightSource& source)
    : source_path_(source.path),
      spec_(source.spec),
      activations_(source.activations),
      table_(checked_param_table(source, spec_)),
      pretrained_(source.kind == WeightSource::Kind::kPretrained ? PretrainedReader::open(source.path, table_)
                                                                 : nullptr),
      // bf16 activations multiply in bf16, as a bf16 run's config derives.
      backend_(source.device, source.num_threads, tracker_, source.device_index,
               KernelChoices{source.activations == DType::kBF16 ? MatmulPrecision::kBf16 : MatmulPrecision::kFp32}),
      comm_(tracker_, {}),
      store_(table_, source.param_dtype, ZeroOptions{}, comm_, tracker_, backend_.context()),
      staging_(table_.units().size()) {
  if (source.device == Device::kCUDA) print_err("zerotrain: on {}\n", backend_.description());
  const int units = static_cast<int>(table_.units().size());
  // Readers that fill a unit at a time: each unit read, then moved into the store.
  auto unit_by_unit = [&](auto&& read) {
    for (int u = 0; u < units; ++u) {
      const TensorView out = host_target(u);
      read(u, out.numel(), out.as<float>());
      store_unit(u);
    }
  };
  switch (source.kind) {
    case WeightSource::Kind::kCheckpoint: {
      const ckpt::CheckpointReader& reader = *source.checkpoint;  // held since it was chosen
      unit_by_unit([&](int u, std::int64_t n, float* out) { reader.read(ckpt::StateKind::kMaster, u, 0, n, out); });
      break;
    }
    case WeightSource::Kind::kPretrained:
      unit_by_unit(
          [&](int u, std::int64_t n, float* out) { read_pretrained_unit(*pretrained_, table_, u, 0, n, out); });
      pretrained_.reset();  // not needed once the weights are in
      break;
    case WeightSource::Kind::kRun:
      // The file's tensors come in its own order: every unit's host target first, then the store.
      load_model_weights((fs::path(source.path) / "final.safetensors").string(), table_,
                         [&](int u) { return host_target(u); });
      for (int u = 0; u < units; ++u) store_unit(u);
      break;
  }
}

std::unique_ptr<LanguageModel> StandaloneModel::build(int rows, int seq_len) {
  return make_model(spec_, scoring_build(rows, seq_len, activations_), tracker_, backend_.context());
}

// Where unit `u`'s fp32 values are to be written in host memory: the store's shard itself when it
// is fp32 on the host, else a staging buffer of the unit's length that store_unit(u) moves in.
TensorView StandaloneModel::host_target(int u) {
  const TensorView shard = store_.working_shard(u);
  if (shard.device == Device::kCPU && shard.dtype == DType::kF32) return shard;
  std::vector<float>& staging = staging_[static_cast<std::size_t>(u)];
  staging.resize(static_cast<std::size_t>(shard.numel()));
  return TensorView{staging.data(), DType::kF32, Device::kCPU, Shape{shard.numel()}};
}

void StandaloneModel::store_unit(int u) {
  const ExecContext& ctx = backend_.context();
  const TensorView shard = store_.working_shard(u);
  std::vector<float>& staging = staging_[static_cast<std::size_t>(u)];
  const float* values = staging.empty() ? shard.as<float>() : staging.data();
  const std::int64_t n = shard.numel();
  const std::int64_t bad = std::find_if(values, values + n, [](float v) { return !std::isfinite(v); }) - values;
  if (bad < n) {
    const std::string tensor = table_.describe_element(u, bad);
    throw_input_error("{}: {} is {}: weights that hold NaN or infinity cannot sample or score (every logit NaN)",
                      source_path_, tensor, values[bad]);
  }
  if (staging.empty()) return;  // written in place
  const TensorView host{staging.data(), DType::kF32, Device::kCPU, Shape{shard.numel()}};
  if (shard.dtype == DType::kF32) {
    ops::copy(ctx, shard, host);
  } else if (shard.device == Device::kCPU) {
    ops::cast(ctx, shard, host);
  } else {  // bf16 on the GPU: the fp32 values copied over, then cast there
    Buffer f32 = ops::allocate(ctx, tracker_, MemCategory::kWorkspace, DType::kF32, shard.numel(), false);
    ops::copy(ctx, f32.view(), host);
    ops::cast(ctx, shard, f32.view());
    ops::synchronize(ctx);
  }
  staging = {};
}

}  // namespace zt::cli
