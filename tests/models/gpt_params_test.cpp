// The GPT-2 parameter table matches Hugging Face's GPT2LMHeadModel state dict (names, shapes,
// order), units are contiguous, decay flags follow nanoGPT, and initialisation follows GPT-2.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "engine/app/io/model_weights.h"
#include "engine/app/io/safetensors.h"
#include "models/gpt/gpt_params.h"

namespace zt::gpt {
namespace {

const GptConfig kParamsConfig{/*n_layer=*/2, /*n_head=*/4, /*n_embd=*/32, /*block_size=*/20, /*vocab_size=*/70};

TEST(GptParamTable, NamesShapesAndOrderFollowHuggingFace) {
  const ParamTable t = build_param_table(kParamsConfig);
  ASSERT_EQ(t.units().size(), 4u);
  EXPECT_EQ(t.units()[0].name, "embeddings");
  EXPECT_EQ(t.units()[3].name, "final");
  const ParamSpec& wte = t.param(t.index_of("transformer.wte.weight"));
  EXPECT_EQ(wte.shape, (std::vector<std::int64_t>{128, 32}));  // 70 padded to a multiple of 64
  EXPECT_EQ(wte.hf_shape, (std::vector<std::int64_t>{70, 32}));
  const ParamSpec& c_attn = t.param(t.index_of("transformer.h.1.attn.c_attn.weight"));
  EXPECT_EQ(c_attn.shape, (std::vector<std::int64_t>{32, 96}));  // Conv1D: [in, out]
  EXPECT_EQ(t.param(t.index_of("transformer.h.0.mlp.c_proj.weight")).shape, (std::vector<std::int64_t>{128, 32}));
  const char* block_order[] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                               "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  for (int l = 0; l < 2; ++l) {
    const UnitSpec& u = t.units()[static_cast<std::size_t>(block_unit(l))];
    ASSERT_EQ(u.params.size(), 12u);
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(t.param(u.params[i]).name, fmt::format("transformer.h.{}.{}", l, block_order[i]));
  }
}

TEST(GptParamTable, UnitsAreContiguousAndDecayOnlyOnMatrices) {
  const ParamTable t = build_param_table(kParamsConfig);
  std::int64_t total = 0;
  for (const UnitSpec& u : t.units()) {
    std::int64_t offset = 0;
    for (int i : u.params) {
      EXPECT_EQ(t.param(i).offset, offset) << t.param(i).name;
      offset += t.param(i).numel;
      EXPECT_EQ(t.param(i).decays, t.param(i).shape.size() == 2) << t.param(i).name;
    }
    EXPECT_EQ(offset, u.numel);
    total += u.numel;
  }
  const std::int64_t C = 32, L = 2;
  EXPECT_EQ(total, 128 * C + 20 * C + L * (12 * C * C + 13 * C) + 2 * C);
}

TEST(GptInit, FollowsGpt2Initialisation) {
  const ParamTable t = build_param_table(kParamsConfig);
  const std::uint64_t seed = 1234;
  std::vector<float> emb(static_cast<std::size_t>(t.units()[0].numel));
  init_unit_params(t, kParamsConfig, embedding_unit(), seed, emb.data());
  const ParamSpec& wte = t.param(t.index_of("transformer.wte.weight"));
  double sum2 = 0;
  for (std::int64_t i = 0; i < 70 * 32; ++i) sum2 += double(emb[i]) * emb[i];
  EXPECT_NEAR(std::sqrt(sum2 / (70 * 32)), 0.02, 0.002);  // 2240 samples: std error ~1.5%
  for (std::int64_t i = 70 * 32; i < wte.numel; ++i) ASSERT_EQ(emb[i], 0.0f) << "padded vocabulary rows are zero";

  std::vector<float> blk(static_cast<std::size_t>(t.units()[1].numel));
  init_unit_params(t, kParamsConfig, block_unit(0), seed, blk.data());
  const BlockParams p = block_views(t, 0, TensorView{blk.data(), DType::kF32, Device::kCPU, Shape{t.units()[1].numel}});
  for (std::int64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(p.ln_1_w.as<float>()[i], 1.0f);
    EXPECT_EQ(p.ln_1_b.as<float>()[i], 0.0f);
    EXPECT_EQ(p.mlp_proj_b.as<float>()[i], 0.0f);
  }
  double proj2 = 0;
  for (std::int64_t i = 0; i < p.mlp_proj_w.numel(); ++i)
    proj2 += double(p.mlp_proj_w.as<float>()[i]) * p.mlp_proj_w.as<float>()[i];
  EXPECT_NEAR(std::sqrt(proj2 / p.mlp_proj_w.numel()), 0.02 / std::sqrt(2.0 * 2), 0.001);  // 1/sqrt(2 n_layer) scaling

  std::vector<float> again(blk.size());
  init_unit_params(t, kParamsConfig, block_unit(0), seed, again.data());
  EXPECT_EQ(again, blk) << "initialisation is a pure function of the seed";
  init_unit_params(t, kParamsConfig, block_unit(0), seed + 1, again.data());
  EXPECT_NE(again, blk);
}

// A rank draws only its optimizer shard of each unit (engine/app/trainer/model_setup.cpp): ranges
// that cut parameters anywhere give the whole unit's values there, on any number of threads, and
// leave the rest of the buffer untouched.
TEST(GptInit, ARangeDrawsTheWholeUnitsValuesThereAndNothingElse) {
  const ParamTable t = build_param_table(kParamsConfig);
  for (const int unit : {embedding_unit(), block_unit(1)}) {
    const std::int64_t n = t.units()[static_cast<std::size_t>(unit)].numel;
    std::vector<float> whole(static_cast<std::size_t>(n));
    init_unit_params(t, kParamsConfig, unit, 77, whole.data());
    for (const auto& [begin, end] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {0, n}, {0, 1}, {n / 3, n / 3 + 1000}, {n / 2 + 7, n}, {n - 1, n}, {5, 5}}) {
      std::vector<float> part(static_cast<std::size_t>(n), -7.0f);
      init_unit_params(t, kParamsConfig, unit, 77, part.data(), begin, end);
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(part[static_cast<std::size_t>(i)], i >= begin && i < end ? whole[static_cast<std::size_t>(i)] : -7.0f)
            << "unit " << unit << " range [" << begin << ", " << end << ") element " << i;
      }
    }
  }
}

// A row part continues the rows its tensor's earlier parts hold, with their row shape: a gap, an
// overlap, another row width or a first part at a row past 0 is an internal error.
TEST(ParamTableRowParts, APartMustContinueTheRowsBeforeIt) {
  ParamTable t;
  t.add_unit("a");
  t.add_param("w", {4, 3}, {4, 3}, true);
  t.add_param("b", {3}, {3}, false);
  t.add_unit("b");
  t.add_param("w", {2, 3}, {2, 3}, true, 4);
  t.add_unit("c");
  EXPECT_THROW(t.add_param("w", {2, 3}, {2, 3}, true, 5), InternalError);  // rows 6 onwards come next
  EXPECT_THROW(t.add_param("w", {2, 3}, {2, 3}, true, 4), InternalError);  // rows 4-5 again
  EXPECT_THROW(t.add_param("w", {2, 4}, {2, 4}, true, 6), InternalError);  // another row width
  EXPECT_THROW(t.add_param("v", {2, 3}, {2, 3}, true, 2), InternalError);  // no earlier part
  t.add_param("w", {1, 3}, {1, 3}, true, 6);
  const std::vector<TensorParts> tensors = t.tensors();
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].name, "w");
  EXPECT_EQ(tensors[0].shape, (std::vector<std::int64_t>{7, 3}));
  EXPECT_EQ(tensors[0].parts, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(tensors[1].name, "b");
}

// With the head in vocabulary chunks wte is split by rows across units: chunk 0 stays in the
// embeddings unit, the others follow the final LayerNorm; the parts make up Hugging Face's one
// tensor (tensors()), and each unit initialises to the very values of the unchunked table.
TEST(GptParamTable, HeadChunksSplitTheTokenTableAcrossUnitsWithTheSameValues) {
  const GptConfig config{/*n_layer=*/2, /*n_head=*/4, /*n_embd=*/32, /*block_size=*/20, /*vocab_size=*/300};
  const ParamTable whole = build_param_table(config), t = build_param_table(config, {3});  // Vp 320: 128, 128, 64
  ASSERT_EQ(t.units().size(), 6u);
  EXPECT_EQ(t.units()[4].name, "wte.1");
  EXPECT_EQ(t.units()[5].name, "wte.2");
  EXPECT_EQ(wte_unit(config, 0), 0);
  EXPECT_EQ(wte_unit(config, 2), 5);
  const ParamSpec& first = t.param(t.units()[0].params[0]);
  EXPECT_EQ(first.shape, (std::vector<std::int64_t>{128, 32}));
  const ParamSpec& last = t.param(t.units()[5].params[0]);
  EXPECT_EQ(last.row_offset, 256);
  EXPECT_EQ(last.shape, (std::vector<std::int64_t>{64, 32}));
  EXPECT_EQ(last.hf_shape, (std::vector<std::int64_t>{44, 32}));  // rows 256..299 are real
  EXPECT_EQ(t.total_numel(), whole.total_numel());
  const std::vector<TensorParts> tensors = t.tensors();
  ASSERT_EQ(tensors.size(), whole.params().size());
  EXPECT_EQ(tensors[0].name, "transformer.wte.weight");
  EXPECT_EQ(tensors[0].hf_shape, (std::vector<std::int64_t>{300, 32}));
  EXPECT_EQ(tensors[0].parts.size(), 3u);
  // Values: every tensor's elements, part after part, equal the unchunked table's.
  auto values = [&](const ParamTable& table) {
    std::vector<std::vector<float>> units;
    for (std::size_t u = 0; u < table.units().size(); ++u) {
      units.emplace_back(static_cast<std::size_t>(table.units()[u].numel));
      init_unit_params(table, config, static_cast<int>(u), 42, units.back().data());
    }
    std::map<std::string, std::vector<float>> out;  // by name: the layouts order tensors differently
    for (const TensorParts& tensor : table.tensors()) {
      for (int index : tensor.parts) {
        const ParamSpec& p = table.param(index);
        const auto& unit = units[static_cast<std::size_t>(p.unit)];
        out[tensor.name].insert(out[tensor.name].end(), unit.begin() + p.offset, unit.begin() + p.offset + p.numel);
      }
    }
    return out;
  };
  EXPECT_EQ(values(t), values(whole));
  // Blocks in two units as well: attention halves in place, MLP halves after the chunks.
  const ParamTable split = build_param_table(config, {3, 2});
  ASSERT_EQ(split.units().size(), 8u);
  EXPECT_EQ(split.units()[1].name, "h.0.attn");
  EXPECT_EQ(split.units()[6].name, "h.0.mlp");
  EXPECT_EQ(mlp_unit(config, {3, 2}, 1), 7);
  EXPECT_EQ(split.param(split.units()[6].params[0]).name, "transformer.h.0.ln_2.weight");
  EXPECT_EQ(split.units()[1].numel + split.units()[6].numel, whole.units()[1].numel);
  EXPECT_EQ(values(split), values(whole));
  // A part must continue its tensor's rows.
  ParamTable bad;
  bad.add_unit("a");
  bad.add_param("w", {4, 2}, {4, 2}, true);
  bad.add_unit("b");
  EXPECT_THROW(bad.add_param("w", {4, 2}, {4, 2}, true, 3), std::exception);
}

// Model weights files hold Hugging Face's tensors whatever the units: a chunked table writes wte as
// one [V, C] tensor, and files load across layouts (the padded rows of each part zero).
TEST(GptParamTable, WeightsFilesHoldWholeTensorsAcrossChunkLayouts) {
  const GptConfig config{/*n_layer=*/1, /*n_head=*/2, /*n_embd=*/16, /*block_size=*/8, /*vocab_size=*/200};
  const ParamTable whole = build_param_table(config), chunked = build_param_table(config, {2, 2});  // Vp 256: 128 + 128
  auto init = [&](const ParamTable& t) {
    std::vector<std::vector<float>> units;
    for (std::size_t u = 0; u < t.units().size(); ++u) {
      units.emplace_back(static_cast<std::size_t>(t.units()[u].numel));
      init_unit_params(t, config, static_cast<int>(u), 9, units.back().data());
    }
    return units;
  };
  auto view = [](std::vector<float>& v) {
    return TensorView{v.data(), DType::kF32, Device::kCPU, Shape{static_cast<std::int64_t>(v.size())}};
  };
  std::vector<std::vector<float>> from_chunked = init(chunked), from_whole = init(whole);
  const std::string dir = ::testing::TempDir();
  save_model_weights(dir + "/chunked.safetensors", chunked, [&](int u) { return view(from_chunked[u]); }, {});
  save_model_weights(dir + "/whole.safetensors", whole, [&](int u) { return view(from_whole[u]); }, {});
  const SafetensorsFile file = read_safetensors(dir + "/chunked.safetensors");
  EXPECT_EQ(file.tensors.at("transformer.wte.weight").shape, (std::vector<std::int64_t>{200, 16}));
  EXPECT_EQ(file.tensors.size(), whole.params().size());
  // Loaded into the other layout, each gives the other's values (padded rows zero, as init leaves them).
  std::vector<std::vector<float>> into_whole = init(whole), into_chunked = init(chunked);
  for (auto& u : into_whole) std::fill(u.begin(), u.end(), -1.0f);
  for (auto& u : into_chunked) std::fill(u.begin(), u.end(), -1.0f);
  load_model_weights(dir + "/chunked.safetensors", whole, [&](int u) { return view(into_whole[u]); });
  load_model_weights(dir + "/whole.safetensors", chunked, [&](int u) { return view(into_chunked[u]); });
  EXPECT_EQ(into_whole, from_whole);
  EXPECT_EQ(into_chunked, from_chunked);
}

}  // namespace
}  // namespace zt::gpt
