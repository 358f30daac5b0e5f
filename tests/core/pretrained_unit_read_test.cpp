// read_pretrained_unit, the step between a checkpoint's tensors and a unit's flat buffer: each
// parameter's part of a rank's range comes from its tensor at the right Hugging Face index (a row
// part of wte counted from its own first row), the padded vocabulary rows are written zero, and
// nothing outside the range is touched. The loader reuses one buffer for every unit, so a padded
// row left unwritten would hold the previous unit's values (the rows only ever came out zero
// because the embeddings are the first unit read into a fresh allocation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "engine/app/io/pretrained.h"
#include "models/gpt/gpt_params.h"

namespace zt {
namespace {

// Element e of tensor `name` reads as tag(name) + e + 1: never zero, and which tensor and
// element a value came from can be told back (the tensors here hold under 10^4 elements each, and
// every value is an integer a float holds exactly).
class NumberingReader final : public PretrainedReader {
 public:
  explicit NumberingReader(const ParamTable& table) {
    for (const TensorParts& t : table.tensors()) tags_.emplace(t.name, 1e4 * static_cast<double>(tags_.size() + 1));
  }
  static float value(double tag, std::int64_t element) { return static_cast<float>(tag + element + 1); }
  double tag(const std::string& name) const { return tags_.at(name); }
  void read(const std::string& name, std::int64_t begin, std::int64_t end, float* out) override {
    EXPECT_LT(end, 10000) << name;
    for (std::int64_t e = begin; e < end; ++e) out[e - begin] = value(tags_.at(name), e);
    bytes_read_ += (end - begin) * 4;
  }

 private:
  std::map<std::string, double> tags_;
};

// Every unit read in `ranks` equal ranges (the last one short), each into a buffer holding NaN:
// in range, each parameter's live element at its Hugging Face index, padded rows zero; outside, NaN.
void expect_units_read_right(const ParamTable& table, int ranks) {
  NumberingReader reader(table);
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const std::int64_t numel = table.units()[u].numel;
    const std::int64_t share = (numel + ranks - 1) / ranks;
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t begin = std::min(numel, r * share), end = std::min(numel, begin + share);
      std::vector<float> data(static_cast<std::size_t>(numel), std::numeric_limits<float>::quiet_NaN());
      read_pretrained_unit(reader, table, static_cast<int>(u), begin, end, data.data());
      for (const int index : table.units()[u].params) {
        const ParamSpec& p = table.param(index);
        const std::int64_t cols = p.shape.size() > 1 ? p.numel / p.shape[0] : p.numel;
        const std::int64_t live = p.shape.size() > 1 ? p.hf_shape[0] * cols : p.numel;
        for (std::int64_t e = 0; e < p.numel; ++e) {
          const std::int64_t at = p.offset + e;
          const float got = data[static_cast<std::size_t>(at)];
          SCOPED_TRACE(::testing::Message() << p.name << " row part from " << p.row_offset << ", element " << e
                                            << ", range [" << begin << ", " << end << ")");
          if (at < begin || at >= end) {
            ASSERT_TRUE(std::isnan(got)) << "written outside the range";
          } else if (e < live) {
            ASSERT_EQ(got, NumberingReader::value(reader.tag(p.name), p.row_offset * cols + e));
          } else {
            ASSERT_EQ(got, 0.0f) << "a padded vocabulary row";
          }
        }
      }
    }
  }
}

gpt::GptConfig small_gpt(int vocab) {
  gpt::GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 8;
  c.vocab_size = vocab;
  return c;
}

TEST(PretrainedUnitRead, PaddedRowsZeroLiveRowsAtTheirIndexNothingOutsideTheRange) {
  for (const int ranks : {1, 2, 3, 7}) {
    SCOPED_TRACE(::testing::Message() << ranks << " ranks");
    expect_units_read_right(gpt::build_param_table(small_gpt(10)), ranks);  // 10 live rows of 64
  }
}

TEST(PretrainedUnitRead, WteRowPartsEachFromTheirOwnRowsPaddingOnlyInTheLast) {
  // 140 live rows padded to 192, in head chunks of whole 64-row groups: a first part of live rows
  // only, a last part of live and padded rows (and, at 3 chunks, a middle one of live rows).
  for (const int chunks : {2, 3}) {
    for (const int ranks : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << chunks << " head chunks, " << ranks << " ranks");
      const ParamTable table = gpt::build_param_table(small_gpt(140), UnitLayout{.head_chunks = chunks});
      int wte_parts = 0;
      for (const ParamSpec& p : table.params()) wte_parts += p.name == table.param(0).name ? 1 : 0;
      ASSERT_EQ(wte_parts, chunks) << "wte is not split into row parts as this test means";
      expect_units_read_right(table, ranks);
    }
  }
}

}  // namespace
}  // namespace zt
