// The CUDA embedding kernels (kernels/cuda/embedding_kernels.cuh) run on the CPU under the SIMT
// emulator ([Note: SIMT emulation] in simt_runtime.h) against the CPU kernels, bit for bit: the
// forward is one fp32 addition of two widened table values, rounded once for BF16 out, with F32
// tables and with BF16 working tables (BF16 activations only); the backward sums each gradient
// element in (b, t) order on both sides. embedding.cu sorts (token, position) pairs with CUB before
// the dwte kernel; here a stable sort on the host stands in for it. Both vector widths, grids
// smaller than the work so the grid-stride loops turn, and a run longer than one chunk of positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/embedding.h"
#include "kernels/cuda/embedding_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace emb = cuda::detail::embedding;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

struct Dims {
  std::int64_t B, T, C, V;
};

// `chunk` > 0: the device kernels take the token table in chunks of that many vocabulary rows (a
// table split across units), one launch per chunk, and must still give the CPU's whole-table bits.
template <typename Act, typename P, int kVec>
void run_shape(Rng& rng, Dims s, std::int64_t chunk = 0) {
  SCOPED_TRACE(::testing::Message() << (std::is_same_v<Act, float> ? "F32" : "BF16") << " activations, "
                                    << (std::is_same_v<P, float> ? "F32" : "BF16") << " tables, B=" << s.B << " T="
                                    << s.T << " C=" << s.C << " V=" << s.V << " kVec=" << kVec << " chunk=" << chunk);
  if (chunk <= 0) chunk = s.V;
  const std::int64_t BT = s.B * s.T, max_T = s.T + 2;
  const Shape btc{s.B, s.T, s.C}, bt{s.B, s.T}, vc{s.V, s.C}, pc{max_T, s.C};
  std::vector<std::int32_t> tokens = rng.ints(BT, 0, static_cast<std::int32_t>(s.V));  // small V: repeats
  std::vector<P> wte = device_values<P>(rng.normal(s.V * s.C)), wpe = device_values<P>(rng.normal(max_T * s.C));
  const DType act = dtype_of<Act>(), pt = dtype_of<P>();

  std::vector<Act> out_cpu = device_values<Act>(std::vector<float>(static_cast<std::size_t>(BT * s.C)));
  cpu::embedding_forward(reference_ctx(), TensorView{out_cpu.data(), act, Device::kCPU, btc}, view_of(tokens, bt),
                         TensorView{wte.data(), pt, Device::kCPU, vc}, TensorView{wpe.data(), pt, Device::kCPU, pc});
  std::vector<Act> out = device_values<Act>(std::vector<float>(static_cast<std::size_t>(BT * s.C), NAN));
  const auto groups = static_cast<unsigned>(BT * s.C / kVec);
  const unsigned grid = std::max(1u, std::min(3u, (groups + emb::kThreads - 1) / emb::kThreads));
  for (std::int64_t r0 = 0; r0 < s.V; r0 += chunk) {
    simt::launch(dim3(grid), emb::kThreads, 0, emb::embedding_forward_kernel<Act, P, kVec>, out.data(), tokens.data(),
                 wte.data() + r0 * s.C, wpe.data(), BT, static_cast<int>(s.T), static_cast<int>(s.C),
                 static_cast<int>(s.V), static_cast<int>(r0), static_cast<int>(std::min(chunk, s.V - r0)));
  }
  EXPECT_TRUE(bitwise_equal(host_values(out), host_values(out_cpu))) << "forward";

  if constexpr (std::is_same_v<P, float>) {  // the gradients are F32 whatever the tables' dtype
    const std::vector<Act> dout = device_values<Act>(rng.normal(BT * s.C));
    std::vector<float> dwte = rng.normal(s.V * s.C), dwpe = rng.normal(max_T * s.C);  // accumulated onto
    std::vector<float> g_dwte = dwte, g_dwpe = dwpe;
    std::vector<Act> dout_cpu = dout;
    cpu::embedding_backward(reference_ctx(), view_of(dwte, vc), view_of(dwpe, pc),
                            TensorView{dout_cpu.data(), act, Device::kCPU, btc}, view_of(tokens, bt));
    // CUB's stable radix sort of (token, position) pairs by token, on the host.
    std::vector<std::int32_t> positions(static_cast<std::size_t>(BT));
    std::iota(positions.begin(), positions.end(), 0);
    std::stable_sort(positions.begin(), positions.end(), [&](std::int32_t a, std::int32_t b) {
      return tokens[static_cast<std::size_t>(a)] < tokens[static_cast<std::size_t>(b)];
    });
    std::vector<std::int32_t> sorted_tokens(positions.size());
    for (std::size_t i = 0; i < positions.size(); ++i) {
      sorted_tokens[i] = tokens[static_cast<std::size_t>(positions[i])];
    }
    std::vector<std::int32_t> run_end(static_cast<std::size_t>(s.V), -7);  // absent tokens' entries: never read
    simt::launch(dim3(2), emb::kThreads, 0, emb::run_ends_kernel, run_end.data(), sorted_tokens.data(), BT,
                 static_cast<int>(s.V));
    for (std::int64_t r0 = 0; r0 < s.V; r0 += chunk) {
      simt::launch(dim3(static_cast<unsigned>(BT)), emb::kThreads, 0, emb::embedding_backward_wte<Act, kVec>,
                   g_dwte.data() + r0 * s.C, dout.data(), sorted_tokens.data(), positions.data(), run_end.data(),
                   static_cast<int>(s.C), static_cast<int>(s.V), static_cast<int>(r0),
                   static_cast<int>(std::min(chunk, s.V - r0)));
    }
    simt::launch(dim3(2), emb::kThreads, 0, emb::embedding_backward_wpe<Act, kVec>, g_dwpe.data(), dout.data(),
                 static_cast<int>(s.B), static_cast<int>(s.T), static_cast<int>(s.C));
    EXPECT_TRUE(bitwise_equal(g_dwte, dwte)) << "dwte";
    // dwpe rows t >= T are untouched on both sides.
    EXPECT_TRUE(bitwise_equal(g_dwpe, dwpe)) << "dwpe";
  }
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(EmbeddingEmulation, ForwardAndBackwardMatchCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  for (Dims s : {Dims{1, 1, 1, 1}, Dims{2, 7, 37, 5}, Dims{3, 5, 13, 300}}) {
    run_shape<float, float, 1>(rng, s);
    run_shape<bf16_dev, float, 1>(rng, s);
    run_shape<bf16_dev, bf16_dev, 1>(rng, s);
  }
  // The launcher's 16-byte groups: 4 columns of fp32 activations, 8 of bf16 (fp32 tables in two
  // float4). One token throughout 300 positions: a run longer than the kernel's 256-position chunks.
  for (Dims s : {Dims{3, 5, 12, 4}, Dims{2, 33, 64, 40}, Dims{1, 300, 8, 1}}) run_shape<float, float, 4>(rng, s);
  for (Dims s : {Dims{3, 5, 16, 4}, Dims{2, 33, 64, 40}, Dims{1, 300, 8, 1}}) {
    run_shape<bf16_dev, float, 8>(rng, s);
    run_shape<bf16_dev, bf16_dev, 8>(rng, s);
  }
}

// A token table split by vocabulary rows (chunk units): each chunk's launch writes and adds only its
// own rows' positions, and together they give the whole table's bits.
TEST(EmbeddingEmulation, ChunksOfVocabularyRowsMatchTheWholeTableBitForBit) {
  ZT_SEEDED_RNG(rng);
  run_shape<float, float, 1>(rng, Dims{3, 5, 13, 300}, 64);
  run_shape<bf16_dev, bf16_dev, 1>(rng, Dims{3, 5, 13, 300}, 128);
  run_shape<float, float, 4>(rng, Dims{2, 33, 64, 40}, 16);
  run_shape<bf16_dev, float, 8>(rng, Dims{2, 33, 64, 40}, 24);
}

// No position table (wpe null, a rotary model's embedding): the token rows alone, bitwise the CPU's.
TEST(EmbeddingEmulation, WithoutAPositionTableMatchesCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t B = 2, T = 7, C = 16, V = 30;
  std::vector<std::int32_t> tokens = rng.ints(B * T, 0, static_cast<std::int32_t>(V));
  std::vector<float> wte = rng.normal(V * C), out_cpu(B * T * C), out(B * T * C, NAN);
  cpu::embedding_forward(reference_ctx(), view_of(out_cpu, {B, T, C}), view_of(tokens, {B, T}), view_of(wte, {V, C}),
                         TensorView{});
  simt::launch(dim3(2), emb::kThreads, 0, emb::embedding_forward_kernel<float, float, 4>, out.data(), tokens.data(),
               wte.data(), static_cast<const float*>(nullptr), B * T, static_cast<int>(T), static_cast<int>(C),
               static_cast<int>(V), 0, static_cast<int>(V));
  EXPECT_TRUE(bitwise_equal(out, out_cpu));
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

}  // namespace
}  // namespace zt::test
