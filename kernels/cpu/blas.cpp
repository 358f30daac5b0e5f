// OpenBLAS loader: picks the core type from the CPU's features, then dlopens the library.
#include "kernels/cpu/blas.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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

// [Note: OpenBLAS's start-up under an address-space limit]
// OpenBLAS's start-up runs inside dlopen (a library constructor) and maps a buffer per thread; under
// a low `ulimit -v` it retries the failed mmap forever, at full CPU, ignoring a stop request (which
// waits for a step boundary that never comes). A watchdog ends the process after kStartUpSeconds
// with one line naming the limit instead.
class StartUpWatchdog {
 public:
  static constexpr int kStartUpSeconds = 30;
  StartUpWatchdog()
      : thread_([this] {
          std::unique_lock lock(mu_);
          // ZT_TEST_BLAS_STARTUP_S (docs/config.md, "Testing hooks"): a shorter wait, for a test.
          const char* hook = std::getenv("ZT_TEST_BLAS_STARTUP_S");
          const int seconds = hook != nullptr && std::atoi(hook) > 0 ? std::atoi(hook) : kStartUpSeconds;
          if (cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) return;
          rlimit limit{};
          const bool limited = getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
          const std::string text = fmt::format(
              "zerotrain: error: OpenBLAS's start-up has not returned after {} s{}\n", seconds,
              limited ? fmt::format(": under an address-space limit of {} MiB (ulimit -v), which its per-thread "
                                    "buffers do not fit, it retries without end; raise the limit",
                                    limit.rlim_cur >> 20)
                      : " (a hang inside the library)");
          std::fputs(text.c_str(), stderr);
          std::fflush(stderr);
          std::_Exit(1);
        }) {}
  ~StartUpWatchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  StartUpWatchdog(const StartUpWatchdog&) = delete;
  StartUpWatchdog& operator=(const StartUpWatchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members it reads exist
};

bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
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
    // ZT_OPENBLAS_LIB names another build (a pthread one, a vendor's): that one or none (a bad path
    // fell back to the default library in silence).
    const char* chosen = std::getenv("ZT_OPENBLAS_LIB");
    if (chosen != nullptr && *chosen == '\0') chosen = nullptr;
    const std::vector<const char*> candidates =
        chosen != nullptr ? std::vector<const char*>{chosen}
                          : std::vector<const char*>{"/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
                                                     "libopenblas.so.0", "libopenblas.so"};
    void* handle = nullptr;
    std::string first_error;
    {
      const StartUpWatchdog watchdog;
      for (const char* path : candidates) {
        if (path == nullptr || *path == '\0') continue;
        handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (handle != nullptr) {
          blas.info.library_path = path;
          break;
        }
        if (first_error.empty()) first_error = dlerror();
      }
    }
    if (handle == nullptr && chosen != nullptr) {
      throw_runtime_error("cannot load OpenBLAS from ZT_OPENBLAS_LIB={} ({})", chosen, first_error);
    }
    if (handle == nullptr) {  // not installed, or a limit (ulimit -v, -n) that its load met
      throw_runtime_error("cannot load OpenBLAS ({}): tools/setup.sh installs libopenblas-dev", first_error);
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
    // OpenBLAS ignores a name it does not know and detects the core itself: not the user's choice.
    if (user != nullptr && *user != '\0' && corename != nullptr && !same_name(user, blas.info.core_name)) {
      blas.info.core_type_source = fmt::format("OPENBLAS_CORETYPE={} not taken by OpenBLAS", user);
    }
  });
  return blas;
}

}  // namespace

const BlasInfo& blas_info() { return load_blas().info; }

// [Note: products the same at any thread count]
// OpenBLAS's threaded sgemm gives last bits that depend on the thread count (measured on its
// Haswell kernels: every product above its threading threshold differs between 1, 2, 3 and 4
// threads, even at K = 64): the tiles its kernels take at the edges of each thread's share of C,
// and the K blocks its threaded driver cuts apart from its serial one, move with the split. So
// deterministic runs (train.deterministic, which promises the same bits at any rank count, where
// each rank's thread count is the node's cores over its ranks) cut C into blocks whose size does
// not depend on the thread count, and run each as one single-threaded sgemm inside our OpenMP
// team (OpenBLAS's OpenMP build runs single-threaded inside a parallel region). Each element then
// sees the same kernels whichever thread computes its block. It costs packing the operands once
// per block instead of once per thread's share: 5-20% of a product's time on the 2-core machine.
namespace {

constexpr int kFixedBlockRows = 256;
constexpr int kFixedBlockCols = 256;

void set_library_threads(Blas& blas, int threads) {
  std::lock_guard<std::mutex> lock(blas.mu);
  if (blas.threads != threads) {
    blas.set_threads(threads);
    blas.threads = threads;
  }
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc, int threads, SgemmSplit split) {
  Blas& blas = load_blas();
  const int op_a = trans_a ? kCblasTrans : kCblasNoTrans, op_b = trans_b ? kCblasTrans : kCblasNoTrans;
  if (split == SgemmSplit::kLibrary) {
    set_library_threads(blas, threads);
    blas.sgemm(kCblasRowMajor, op_a, op_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  set_library_threads(blas, 1);  // a team of one runs no parallel region: OpenBLAS's own count decides
  const std::int64_t block_rows = (M + kFixedBlockRows - 1) / kFixedBlockRows;
  const std::int64_t block_cols = (N + kFixedBlockCols - 1) / kFixedBlockCols;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t b = 0; b < block_rows * block_cols; ++b) {
    const std::int64_t i0 = b / block_cols * kFixedBlockRows, j0 = b % block_cols * kFixedBlockCols;
    const int m = static_cast<int>(std::min<std::int64_t>(kFixedBlockRows, M - i0));
    const int n = static_cast<int>(std::min<std::int64_t>(kFixedBlockCols, N - j0));
    // op(A)'s rows i0.. and op(B)'s columns j0..: columns of a stored transpose, rows otherwise.
    const float* a = trans_a ? A + i0 : A + i0 * lda;
    const float* b_cols = trans_b ? B + j0 * ldb : B + j0;
    blas.sgemm(kCblasRowMajor, op_a, op_b, m, n, K, alpha, a, lda, b_cols, ldb, beta, C + i0 * ldc + j0, ldc);
  }
}

}  // namespace zt::cpu
