// OpenBLAS loader: picks the core type from the CPU's features, then dlopens the library.
#include "kernels/cpu/blas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "engine/base/core/check.h"

namespace zt::cpu {

// [Note: OpenBLAS core type]
// OpenBLAS (DYNAMIC_ARCH) picks its kernels once, in a constructor that runs when the library is
// loaded, from CPUID. Under some hypervisors that detection fails and falls back to Prescott
// (SSE3) kernels: 2048^3 sgemm measured ~32 GFLOP/s per core instead of ~160 with SkylakeX.
// The only knob is the environment variable OPENBLAS_CORETYPE, read in that constructor. So
// the engine does not link OpenBLAS: it sets OPENBLAS_CORETYPE from the features the compiler's
// CPU detection reports (unless the user set it), then loads the library with dlopen. The
// OpenMP build of OpenBLAS is preferred so BLAS and our OpenMP kernels share one thread pool.

namespace {

using SgemmFn = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                         const float* b, int ldb, float beta, float* c, int ldc);
using SetThreadsFn = void (*)(int);
using GetStringFn = char* (*)();

constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;

struct Blas {
  BlasInfo info;
  SgemmFn sgemm = nullptr;
  SetThreadsFn set_threads = nullptr;
  int threads = -1;
  std::mutex mu;  // guards `threads` (OpenBLAS's thread count is process-wide)
};

const char* detect_core_type() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

Blas& load_blas() {
  static Blas blas;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* user = std::getenv("OPENBLAS_CORETYPE");
    if (user != nullptr && *user != '\0') {
      blas.info.core_type_source = "user";
    } else if (const char* core = detect_core_type()) {
      setenv("OPENBLAS_CORETYPE", core, 0);
      blas.info.core_type_source = "detected";
    } else {
      blas.info.core_type_source = "library default";
    }
    const char* candidates[] = {std::getenv("ZT_OPENBLAS_LIB"),
                                "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0", "libopenblas.so.0",
                                "libopenblas.so"};
    void* handle = nullptr;
    for (const char* path : candidates) {
      if (path == nullptr || *path == '\0') continue;
      handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) {
        blas.info.library_path = path;
        break;
      }
    }
    if (handle == nullptr) {
      throw_runtime_error("cannot load OpenBLAS (libopenblas.so.0): run tools/setup.sh to install libopenblas-dev");
    }
    blas.sgemm = reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm"));
    blas.set_threads = reinterpret_cast<SetThreadsFn>(dlsym(handle, "openblas_set_num_threads"));
    auto corename = reinterpret_cast<GetStringFn>(dlsym(handle, "openblas_get_corename"));
    auto config = reinterpret_cast<GetStringFn>(dlsym(handle, "openblas_get_config"));
    if (blas.sgemm == nullptr || blas.set_threads == nullptr) {
      throw_runtime_error("{} lacks cblas_sgemm/openblas_set_num_threads", blas.info.library_path);
    }
    blas.info.core_name = corename != nullptr ? corename() : "unknown";
    blas.info.config = config != nullptr ? config() : "unknown";
  });
  return blas;
}

}  // namespace

const BlasInfo& blas_info() { return load_blas().info; }

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc, int threads) {
  Blas& blas = load_blas();
  {
    std::lock_guard<std::mutex> lock(blas.mu);
    if (blas.threads != threads) {
      blas.set_threads(threads);
      blas.threads = threads;
    }
  }
  blas.sgemm(kCblasRowMajor, trans_a ? kCblasTrans : kCblasNoTrans, trans_b ? kCblasTrans : kCblasNoTrans, M, N, K,
             alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace zt::cpu
