// A SIMT emulator for running CUDA device code on the CPU in tests: every thread of a block is a
// fiber (a ucontext with its own stack) that a scheduler on the launching thread runs until it
// reaches a barrier or returns, __syncthreads and __syncwarp are barriers (simt::Barrier) over the
// block and the warp, and blocks run one after another, each with the dynamic shared memory given
// to launch. The headers under simt/ stand in for the CUDA ones (cuda_runtime.h, cuda_bf16.h,
// mma.h) so that a kernel header compiles as C++.
//
// [Note: SIMT emulation]
// What it checks: the kernel's own arithmetic and indexing, its use of dynamic shared memory (which
// starts each block filled with 0xFF bytes, NaN as fp32 and bf16, so a read of a location nobody
// wrote shows up; static __shared__ arrays are function statics, not refilled), and its barrier
// discipline: the ThreadSanitizer build sees each fiber as a thread (its fiber API) and only the
// barriers' edges between them, so a missing barrier is reported as a data race; a barrier that
// some threads never reach is reported and aborts instead of hanging. What it does not: timing,
// occupancy, bank conflicts, register limits, or how the hardware spreads a WMMA tile over lanes.
// Why fibers and not a std::thread per emulated thread (as until 2026-12): with 256-1024 threads
// a block on two cores, the OS's context switches and, under ThreadSanitizer, a vector-clock merge
// over every thread at every barrier poll took most of the emulation tests' time.
// WMMA operations (mma.h) are done by the warp's lane 0 on whole 16 x 16 tiles (the other lanes'
// fragments stay empty, which device code cannot observe because fragments are opaque), after
// checking the pointer and leading-dimension rules the CUDA documentation gives.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// constinit: GCC 12 otherwise reaches them through a TLS wrapper whose null check UBSan's null
// sanitizer reads as a null member access in every kernel (a code-generation bug; found by an
// ASan+UBSan run of the emulation tests).
extern thread_local constinit dim3 threadIdx, blockIdx, gridDim, blockDim;

namespace simt {

constexpr int kWarpSize = 32;

// A barrier over a block's or a warp's emulated threads, with std::barrier's arrive_and_wait
// and arrive_and_drop. The threads are fibers that the launch's scheduler runs one at a time
// ([Note: SIMT emulation]): a waiter yields to the scheduler until the last arrival completes the
// phase. Its fields are relaxed atomics only so that ThreadSanitizer, which sees each fiber as a
// thread, does not report the barrier's own bookkeeping; the barrier's happens-before edges are
// stated to it explicitly (every arrival releases, every departure acquires; per phase, below).
class Barrier {
 public:
  explicit Barrier(int count) : expected_(count) {}
  Barrier(const Barrier&) = delete;
  Barrier& operator=(const Barrier&) = delete;

  void arrive_and_wait();
  // Arrives at this phase and leaves the barrier: later phases expect one thread fewer.
  void arrive_and_drop();

 private:
  void arrive(std::uint32_t phase);
  void complete_phase();  // every expected thread arrived: the waiters may go
  std::atomic<int> expected_, arrived_{0};
  std::atomic<std::uint32_t> phase_{0};
  // The addresses a phase's edges are stated on, by the phase's parity: a waiter of phase p must
  // not acquire what threads released arriving at phase p + 1 after the phase let them go (their
  // writes after the barrier would then look ordered before the waiter's reads). No thread can
  // reach phase p + 2 before every waiter of phase p has left it.
  char edges_[2] = {};
};

// One warp's barrier and the slots its shuffles exchange values through (8 bytes each: float,
// int or double).
struct WarpState {
  WarpState() : barrier(kWarpSize) {}
  Barrier barrier;
  std::uint64_t slots[kWarpSize] = {};
};

void sync_block();
WarpState& current_warp();
// The running block's dynamic shared memory (kernels reach it through dynamic_shared_memory()).
unsigned char* dynamic_smem();
void sync_warp();
// The value `v` of lane (this lane ^ lane_mask); every lane of the warp must call it.
template <typename T>
T shuffle_xor(T v, int lane_mask);

// A broken WMMA rule (alignment, leading dimension): recorded, the test fails on violations().
void report_violation(const std::string& what);
std::vector<std::string> violations();

// Runs kernel(args...) on `grid` blocks of `threads` threads (a multiple of 32), block after
// block (a thread that returns drops out of its block's and warp's barriers, as an exited CUDA
// thread stops counting), with `smem_bytes` of dynamic shared memory (at most kMaxDynamicSmem, sm_90's per-block
// limit), filled with 0xFF before each block.
constexpr std::size_t kMaxDynamicSmem = 227 * 1024;
void run_blocks(dim3 grid, int threads, std::size_t smem_bytes, const std::function<void()>& thread_body);

template <typename Kernel, typename... Args>
void launch(dim3 grid, int threads, std::size_t smem_bytes, Kernel kernel, Args... args) {
  run_blocks(grid, threads, smem_bytes, [&] { kernel(args...); });
}

template <typename T>
T shuffle_xor(T v, int lane_mask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(std::uint64_t), "a register-sized value");
  WarpState& w = current_warp();
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  std::memcpy(&w.slots[lane], &v, sizeof(T));
  w.barrier.arrive_and_wait();
  T other;
  std::memcpy(&other, &w.slots[lane ^ lane_mask], sizeof(T));
  w.barrier.arrive_and_wait();  // every lane has read before the slots are reused
  return other;
}

}  // namespace simt
