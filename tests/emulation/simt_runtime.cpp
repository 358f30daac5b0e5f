// The SIMT emulator's threads, barriers and shuffles ([Note: SIMT emulation] in simt_runtime.h).
#include "tests/emulation/simt_runtime.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

thread_local dim3 threadIdx, blockIdx, gridDim, blockDim;

namespace simt {

namespace {

alignas(128) unsigned char block_smem[kMaxDynamicSmem];
thread_local Barrier* block_barrier = nullptr;
thread_local WarpState* warp_state = nullptr;

std::mutex violations_mutex;
std::vector<std::string> recorded;

}  // namespace

constexpr int kYieldPolls = 64;

void Barrier::arrive_and_wait() {
  const std::uint32_t phase = phase_.load(std::memory_order_acquire);
  const std::uint64_t now = state_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if ((now & 0xFFFFFFFFu) == now >> 32) {
    complete_phase(now >> 32);
    return;
  }
  // Yield while the other threads arrive (cheaper than sleeping when they outnumber the cores),
  // then sleep; relaxed loads meanwhile (no clock to acquire), one acquire at the end.
  for (int polls = 0; phase_.load(std::memory_order_relaxed) == phase; ++polls) {
    if (polls < kYieldPolls) {
      sched_yield();
    } else {
      syscall(SYS_futex, &phase_, FUTEX_WAIT_PRIVATE, phase, nullptr, nullptr, 0);  // at once if moved on
    }
  }
  (void)phase_.load(std::memory_order_acquire);
}

void Barrier::arrive_and_drop() {
  const std::uint64_t now = state_.fetch_sub(pack(1, 0), std::memory_order_acq_rel) - pack(1, 0);
  if ((now & 0xFFFFFFFFu) == now >> 32) complete_phase(now >> 32);
}

// Every thread of the phase has arrived (and waits, or dropped): nobody touches the state until
// the phase moves on.
void Barrier::complete_phase(std::uint64_t expected) {
  if (on_completion_) on_completion_();
  state_.store(pack(expected, 0), std::memory_order_relaxed);
  phase_.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &phase_, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void sync_block() { block_barrier->arrive_and_wait(); }
unsigned char* dynamic_smem() { return block_smem; }
void sync_warp() { warp_state->barrier.arrive_and_wait(); }

WarpState& current_warp() { return *warp_state; }

void report_violation(const std::string& what) {
  std::lock_guard<std::mutex> lock(violations_mutex);
  if (recorded.size() < 16) recorded.push_back(what);
}

std::vector<std::string> violations() {
  std::lock_guard<std::mutex> lock(violations_mutex);
  return recorded;
}

void run_blocks(dim3 grid, int threads, std::size_t smem_bytes, const std::function<void()>& thread_body) {
  if (smem_bytes > kMaxDynamicSmem || threads % kWarpSize != 0) {
    report_violation("launch: " + std::to_string(smem_bytes) + " bytes of dynamic shared memory, " +
                     std::to_string(threads) + " threads");
    return;
  }
  // One pool of threads for the whole grid: thread t plays thread t of every block in turn. Each
  // block gets fresh barriers (a thread that returned has dropped out of its block's), and a
  // barrier that nobody drops orders the blocks and the refill of shared memory between them.
  const std::size_t num_blocks = std::size_t{grid.x} * grid.y * grid.z;
  const std::size_t warps_per_block = static_cast<std::size_t>(threads / kWarpSize);
  std::deque<Barrier> block_barriers;
  std::deque<WarpState> warps(num_blocks * warps_per_block);
  for (std::size_t i = 0; i < num_blocks; ++i) block_barriers.emplace_back(threads);
  Barrier between_blocks(threads, [smem_bytes] { std::memset(block_smem, 0xFF, smem_bytes); });
  std::memset(block_smem, 0xFF, smem_bytes);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      threadIdx = dim3(static_cast<unsigned>(t));
      gridDim = grid;
      blockDim = dim3(static_cast<unsigned>(threads));
      for (std::size_t i = 0; i < num_blocks; ++i) {
        blockIdx = dim3(static_cast<unsigned>(i % grid.x), static_cast<unsigned>(i / grid.x % grid.y),
                        static_cast<unsigned>(i / (std::size_t{grid.x} * grid.y)));
        block_barrier = &block_barriers[i];
        warp_state = &warps[i * warps_per_block + static_cast<std::size_t>(t / kWarpSize)];
        thread_body();
        block_barrier->arrive_and_drop();
        warp_state->barrier.arrive_and_drop();
        between_blocks.arrive_and_wait();  // the last arrival refills shared memory
      }
    });
  }
  for (std::thread& th : pool) th.join();
}

}  // namespace simt
