// A third model family, registered from tests/ alone: proof that the engine reaches every model
// through the family registry (models/model_family.h) and branches on no architecture. "toy" is a
// bigram model with learned positions: logits = (wte[token] + wpe[position]) @ head^T, two units
// (embeddings, head), fp32 only, one key of its own (model.init_std). This program registers it
// and then runs the zerotrain command line on it; toy_family_test.py trains it at
// ZeRO stage 3 on two MPI ranks against stage 0 and checks what the config, checkpoint and memory
// paths make of it.
#include <fmt/format.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/app/cli/commands/commands.h"
#include "engine/base/core/check.h"
#include "kernels/ops.h"
#include "models/kernel_params.h"
#include "models/model_family.h"

namespace {

using namespace zt;

constexpr int kEmbeddings = 0, kHead = 1;

// The family's own key, as read_keys resolved it.
double init_std(const ModelConfig& m) { return m.family_keys.at("init_std").get<double>(); }

ParamTable toy_table(const ModelConfig& m) {
  const std::int64_t V = m.vocab_size, Vp = m.padded_vocab_size(), C = m.n_embd;
  ParamTable t;
  t.add_unit("embeddings");
  t.add_param("wte.weight", {Vp, C}, {V, C}, true);
  t.add_param("wpe.weight", {m.block_size, C}, {m.block_size, C}, true);
  t.add_unit("head");
  t.add_param("head.weight", {Vp, C}, {V, C}, true);
  return t;
}

class ToyModel final : public LanguageModel {
 public:
  ToyModel(const ModelConfig& m, int batch, int seq_len, MemoryTracker& tracker, const ExecContext& ctx)
      : config_(m), table_(toy_table(m)), B_(batch), T_(seq_len), tracker_(tracker), ctx_(ctx) {
    ZT_CHECK(seq_len <= m.block_size);
    const std::int64_t BT = static_cast<std::int64_t>(batch) * seq_len;
    grad_ = ops::allocate(ctx_, tracker_, MemCategory::kWorkspace, DType::kF32, table_.max_unit_numel());
    dx_ = ops::allocate(ctx_, tracker_, MemCategory::kWorkspace, DType::kF32, BT * m.n_embd);
  }

  const ParamTable& table() const override { return table_; }
  int batch() const override { return B_; }
  int seq_len() const override { return T_; }
  int vocab_size() const override { return config_.vocab_size; }

  float forward(ParamStore& store, const std::int32_t* inputs, const std::int32_t* targets,
                const ForwardOptions& options) override {
    release_activations();
    const std::int64_t BT = static_cast<std::int64_t>(B_) * T_, C = config_.n_embd, Vp = config_.padded_vocab_size();
    tokens_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, DType::kI32, 2 * BT, false);
    x_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, DType::kF32, BT * C, false);
    logits_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, DType::kF32, BT * Vp, false);
    losses_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, DType::kF32, BT, false);
    ops::copy(ctx_, input_view(), {const_cast<std::int32_t*>(inputs), DType::kI32, Device::kCPU, Shape{B_, T_}});
    ops::copy(ctx_, target_view(), {const_cast<std::int32_t*>(targets), DType::kI32, Device::kCPU, Shape{BT}});
    loss_scale_ = options.backward_loss_scale;

    store.begin_pass(Pass::kForward, forward_, options.training ? &backward_ : nullptr);  // the store keeps a reference
    const TensorView emb = store.acquire_params(kEmbeddings, Pass::kForward);
    ZT_CHECK(emb.dtype == DType::kF32, "the toy family trains fp32 parameters only");
    ops::embedding_forward(ctx_, x_view(), input_view(), table_.view(0, emb), table_.view(1, emb));
    store.release_params(kEmbeddings, Pass::kForward);
    const TensorView head = store.acquire_params(kHead, Pass::kForward);
    ops::matmul_forward(ctx_, logits_view(), x_view(), table_.view(2, head), ops::WeightLayout::kOutIn, TensorView{});
    store.release_params(kHead, Pass::kForward);
    store.end_pass(Pass::kForward);

    if (options.logits_out != nullptr) copy_logits_out(ctx_, logits_view(), 0, config_.vocab_size, options.logits_out);
    const TensorView losses = losses_.view(Shape{BT});
    if (loss_scale_.has_value()) {  // dlogits in place of the logits
      ops::softmax_cross_entropy_fused(ctx_, losses, logits_view(), logits_view(), target_view(),
                                       *loss_scale_ / static_cast<float>(BT), config_.vocab_size);
    } else {
      ops::softmax_cross_entropy_forward(ctx_, losses, logits_view(), logits_view(), target_view(), config_.vocab_size);
    }
    return mean_loss(ctx_, losses);
  }

  void backward(ParamStore& store, float loss_scale) override {
    ZT_CHECK(x_.data() != nullptr, "backward without forward");
    const std::int64_t BT = static_cast<std::int64_t>(B_) * T_;
    if (loss_scale_.has_value()) {
      ZT_CHECK(*loss_scale_ == loss_scale, "backward: loss_scale {} is not the forward's {}", loss_scale, *loss_scale_);
    } else {
      ops::softmax_cross_entropy_backward(ctx_, logits_view(), logits_view(), target_view(),
                                          loss_scale / static_cast<float>(BT), config_.vocab_size);
    }
    store.begin_pass(Pass::kBackward, backward_, nullptr);
    const TensorView head = store.acquire_params(kHead, Pass::kBackward);
    const TensorView head_grad = zeroed_grad(kHead);
    const TensorView dx = dx_.view(Shape{B_, T_, config_.n_embd});
    ops::matmul_backward(ctx_, dx, table_.view(2, head_grad), TensorView{}, logits_view(), x_view(),
                         table_.view(2, head), ops::WeightLayout::kOutIn);
    store.accumulate_grads(kHead, head_grad);
    store.grads_ready(kHead);
    store.release_params(kHead, Pass::kBackward);
    const TensorView emb_grad = zeroed_grad(kEmbeddings);  // a scatter-add: no weights read
    ops::embedding_backward(ctx_, table_.view(0, emb_grad), table_.view(1, emb_grad), dx, input_view());
    store.accumulate_grads(kEmbeddings, emb_grad);
    store.grads_ready(kEmbeddings);
    store.end_pass(Pass::kBackward);
    release_activations();
  }

  void release_activations() override {
    losses_.reset();
    logits_.reset();
    x_.reset();
    tokens_.reset();
  }

  static PassSchedule forward_schedule() {
    return {{UnitOp::kAcquire, kEmbeddings},
            {UnitOp::kRelease, kEmbeddings},
            {UnitOp::kAcquire, kHead},
            {UnitOp::kRelease, kHead}};
  }
  static PassSchedule backward_schedule() {
    return {{UnitOp::kAcquire, kHead}, {UnitOp::kAccumulate, kHead},       {UnitOp::kGradsReady, kHead},
            {UnitOp::kRelease, kHead}, {UnitOp::kAccumulate, kEmbeddings}, {UnitOp::kGradsReady, kEmbeddings}};
  }

 private:
  TensorView input_view() const { return TensorView{tokens_.data(), DType::kI32, tokens_.device(), Shape{B_, T_}}; }
  TensorView target_view() const { return tokens_.view().slice(static_cast<std::int64_t>(B_) * T_, B_ * T_); }
  TensorView x_view() const { return x_.view(Shape{B_, T_, config_.n_embd}); }
  TensorView logits_view() const {
    return logits_.view(Shape{static_cast<std::int64_t>(B_) * T_, config_.padded_vocab_size()});
  }
  TensorView zeroed_grad(int unit) {
    const TensorView g = grad_.view().slice(0, table_.units()[static_cast<std::size_t>(unit)].numel);
    ops::fill_zero(ctx_, g);
    return g;
  }

  ModelConfig config_;
  ParamTable table_;
  int B_, T_;
  MemoryTracker& tracker_;
  ExecContext ctx_;
  Buffer grad_, dx_, tokens_, x_, logits_, losses_;
  std::optional<float> loss_scale_;
  const PassSchedule forward_ = forward_schedule(), backward_ = backward_schedule();
};

class ToyFamily final : public ModelFamily {
 public:
  std::string_view name() const override { return "toy"; }
  std::string_view display_name() const override { return "toy bigram"; }
  std::vector<std::string> own_keys() const override { return {"init_std"}; }
  bool has_dropout() const override { return false; }
  bool has_gelu_mlp() const override { return false; }
  int mlp_width(const ModelConfig& /*model*/) const override { return 0; }                    // no MLP
  double matmul_weights_per_token(const ModelConfig& /*model*/) const override { return 0; }  // a table lookup
  void read_keys(ConfigReader& r, ModelConfig& model, std::vector<std::string>& /*derived*/) const override {
    if (model.n_layer != 1) {
      throw_input_error("config error in {}: model.n_layer = {}: the toy family has no blocks (set it to 1)", r.file(),
                        model.n_layer);
    }
    model.family_keys = {{"init_std", r.get_double("init_std", 0.02, 1e-6, 1.0)}};
  }
  std::string config_error(const ModelConfig& model) const override {
    return init_std(model) > 0.0 && model.n_layer == 1 ? "" : "init_std must be positive and n_layer 1";
  }
  ParamTable param_table(const ModelSpec& spec) const override { return toy_table(spec.model); }
  // N(0, init_std) per unit from its own stream (seed, unit): the same values at any rank count;
  // the padded vocabulary rows stay zero.
  // A sequential stream: the whole unit is drawn and the range copied out.
  void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data,
                        std::int64_t begin, std::int64_t end) const override {
    std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(unit));
    std::normal_distribution<double> normal(0.0, init_std(spec.model));
    const UnitSpec& u = table.units()[static_cast<std::size_t>(unit)];
    std::vector<float> whole(static_cast<std::size_t>(u.numel));
    for (int index : u.params) {
      const ParamSpec& p = table.param(index);
      const std::int64_t live_rows = p.hf_shape[0], cols = p.shape[1];
      for (std::int64_t r = 0; r < p.shape[0]; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          whole[static_cast<std::size_t>(p.offset + r * cols + c)] =
              r < live_rows ? static_cast<float>(normal(rng)) : 0.0f;
        }
      }
    }
    std::copy(whole.begin() + begin, whole.begin() + end, unit_data + begin);
  }
  std::unique_ptr<LanguageModel> make_model(const ModelSpec& spec, const ModelBuild& build, MemoryTracker& tracker,
                                            const ExecContext& ctx) const override {
    ZT_CHECK(build.activations == DType::kF32, "the toy family runs fp32 activations only");
    return std::make_unique<ToyModel>(spec.model, build.batch, build.seq_len, tracker, ctx);
  }
  // Exactly what ToyModel allocates: tokens, x, logits and losses in a forward; the gradient
  // scratch of the larger unit and dx for the whole run.
  ModelFootprint footprint(const ModelSpec& spec, const ModelBuild& build, DType /*param_dtype*/,
                           Device /*device*/) const override {
    const ModelConfig& m = spec.model;
    const std::int64_t BT = static_cast<std::int64_t>(build.batch) * build.seq_len;
    return {4 * (2 * BT + BT * m.n_embd + BT * m.padded_vocab_size() + BT),
            4 * (toy_table(m).max_unit_numel() + BT * m.n_embd)};
  }
  StepSchedule step_schedule(const ModelSpec& /*spec*/, const CheckpointPolicy& /*checkpointing*/) const override {
    return {ToyModel::forward_schedule(), ToyModel::backward_schedule()};
  }
  std::int64_t kv_cache_row_width(const ModelSpec& /*spec*/) const override { return 0; }  // samples by windows
  std::string describe(const ModelSpec& spec, double params_millions) const override {
    return fmt::format("toy: bigram with positions, {} wide, context {}, vocab {}: {:.2f}M parameters",
                       spec.model.n_embd, spec.model.block_size, spec.model.vocab_size, params_millions);
  }
  std::string describe_attention(const ModelSpec&, const ModelBuild&, Device, AttentionKernels) const override {
    return "none (a bigram model)";
  }
  nlohmann::ordered_json hf_config(const ModelSpec& spec, double /*dropout*/, DType dtype) const override {
    return {{"model_type", "toy"},
            {"vocab_size", spec.model.vocab_size},
            {"torch_dtype", dtype == DType::kBF16 ? "bfloat16" : "float32"}};
  }
};

}  // namespace

int main(int argc, char** argv) {
  zt::register_model_family(std::make_unique<ToyFamily>());
  return zt::cli::run_command_line({argv + 1, argv + argc});
}
