// The OpenBLAS loader picks fast kernels by itself: on a CPU with AVX-512 the core type is
// SkylakeX unless the user chose one, and sgemm computes the right product on either layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/blas.h"

namespace zt::cpu {
namespace {

TEST(BlasLoader, ChoosesTheCoreTypeFromCpuFeatures) {
  const BlasInfo& info = blas_info();
  RecordProperty("blas_core", info.core_name);
  EXPECT_FALSE(info.library_path.empty());
  if (info.core_type_source == "user") GTEST_SKIP() << "OPENBLAS_CORETYPE set by the user: " << info.core_name;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    EXPECT_EQ(info.core_type_source, "detected");
    EXPECT_EQ(info.core_name, "SkylakeX") << "the misdetected Prescott kernels are ~5x slower";
  } else if (__builtin_cpu_supports("avx2")) {
    EXPECT_EQ(info.core_name, "Haswell");
  }
  EXPECT_NE(info.core_name, "Prescott");
}

TEST(BlasLoader, SgemmMatchesNaiveProductWithTransposes) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int M = 7, N = 5, K = 9;
  std::vector<float> A(M * K), B(K * N), C(M * N, 0.0f);
  for (float& x : A) x = u(rng);
  for (float& x : B) x = u(rng);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // Store A as [M,K] or its transpose [K,M] (same for B), and ask sgemm to undo it.
      std::vector<float> a(A.size()), b(B.size());
      for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k) (ta ? a[k * M + i] : a[i * K + k]) = A[i * K + k];
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < N; ++j) (tb ? b[j * K + k] : b[k * N + j]) = B[k * N + j];
      sgemm(ta, tb, M, N, K, 1.0f, a.data(), ta ? M : K, b.data(), tb ? K : N, 0.0f, C.data(), N, 2);
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          double ref = 0;
          for (int k = 0; k < K; ++k) ref += double(A[i * K + k]) * B[k * N + j];
          EXPECT_NEAR(C[i * N + j], ref, 1e-5) << "ta=" << ta << " tb=" << tb;  // K=9 terms of |x|<1
        }
      }
    }
  }
}

// Deterministic runs' products ([Note: products the same at any thread count]): bit for bit the
// same at every thread count, on a shape of partial blocks at both edges, every layout, beta 0 and
// 1; and the product (fp64 reference, K = 300 terms of |x| < 1).
TEST(BlasLoader, FixedBlocksGiveTheSameBitsAtAnyThreadCount) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int M = 300, N = 520, K = 300;
  std::vector<float> a(M * K), b(K * N), c0(M * N);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  for (float& x : c0) x = u(rng);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        std::vector<float> first;
        for (int threads : {1, 2, 3, 5}) {
          std::vector<float> c = c0;
          sgemm(ta, tb, M, N, K, 1.0f, a.data(), ta ? M : K, b.data(), tb ? K : N, beta, c.data(), N, threads,
                SgemmSplit::kFixedBlocks);
          if (first.empty()) {
            first = c;
            double worst = 0;
            for (int i = 0; i < M; ++i) {
              for (int j = 0; j < N; ++j) {
                double ref = beta * c0[i * N + j];
                for (int k = 0; k < K; ++k)
                  ref += double(ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
                worst = std::max(worst, std::abs(ref - c[i * N + j]));
              }
            }
            EXPECT_LT(worst, 1e-3) << "ta=" << ta << " tb=" << tb << " beta=" << beta;
          } else {
            EXPECT_EQ(std::memcmp(first.data(), c.data(), c.size() * sizeof(float)), 0)
                << threads << " threads against 1: ta=" << ta << " tb=" << tb << " beta=" << beta;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace zt::cpu
