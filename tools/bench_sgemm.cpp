// zt_bench_sgemm: the sgemm throughput the engine can reach on this machine, as one JSON line.
// Times zt::cpu::sgemm (row-major, no transposes, square size^3) through the engine's own OpenBLAS
// loader, so the core type is the one training uses; bench_cpu.py divides by this peak.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/blas.h"

namespace {

int usage_error(const std::string& what) {
  fmt::print(stderr, "zt_bench_sgemm: {}\nusage: zt_bench_sgemm [--size N] [--threads T] [--reps R]\n", what);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int size = 2048;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int reps = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage_error(fmt::format("flag {} needs a value", flag));
    char* end = nullptr;
    const long value = std::strtol(argv[++i], &end, 10);
    if (*end != '\0' || value < 1 || value > 65536) return usage_error(fmt::format("bad value for {}", flag));
    if (flag == "--size")
      size = static_cast<int>(value);
    else if (flag == "--threads")
      threads = static_cast<int>(value);
    else if (flag == "--reps")
      reps = static_cast<int>(value);
    else
      return usage_error(fmt::format("unknown flag {}", flag));
  }
  try {
    const size_t n = static_cast<size_t>(size) * size;
    std::vector<float> a(n), b(n), c(n, 0.0f);
    for (size_t i = 0; i < n; ++i) {  // small, varied values: no denormals, no overflow
      a[i] = static_cast<float>(static_cast<int>(i % 17) - 8) * 0.01f;
      b[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * 0.01f;
    }
    auto run_ms = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      zt::cpu::sgemm(false, false, size, size, size, 1.0f, a.data(), size, b.data(), size, 0.0f, c.data(), size,
                     threads);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    run_ms();  // warm-up: loads OpenBLAS, starts its threads, faults in the pages
    run_ms();
    std::vector<double> times_ms;
    for (int r = 0; r < reps; ++r) times_ms.push_back(run_ms());
    std::sort(times_ms.begin(), times_ms.end());
    const double median_ms = times_ms[times_ms.size() / 2];
    const double gflops = 2.0 * size * size * static_cast<double>(size) / (median_ms * 1e6);
    fmt::print(
        "{{\"size\": {}, \"threads\": {}, \"reps\": {}, \"median_ms\": {:.3f}, \"gflops\": {:.2f}, "
        "\"core\": \"{}\", \"core_source\": \"{}\"}}\n",
        size, threads, reps, median_ms, gflops, zt::cpu::blas_info().core_name, zt::cpu::blas_info().core_type_source);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "zt_bench_sgemm: {}\n", e.what());
    return 1;
  }
}
