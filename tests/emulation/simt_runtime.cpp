// The SIMT emulator's threads, barriers and shuffles ([Note: SIMT emulation] in simt_runtime.h).
#include "tests/emulation/simt_runtime.h"

#include <cstring>
#include <deque>
#include <mutex>

thread_local dim3 threadIdx, blockIdx, gridDim, blockDim;

namespace simt {

namespace {

alignas(128) unsigned char block_smem[kMaxDynamicSmem];
thread_local std::barrier<>* block_barrier = nullptr;
thread_local WarpState* warp_state = nullptr;

std::mutex violations_mutex;
std::vector<std::string> recorded;

}  // namespace

void sync_block() { block_barrier->arrive_and_wait(); }
unsigned char* dynamic_smem() { return block_smem; }
void sync_warp() { warp_state->barrier.arrive_and_wait(); }

float shuffle_xor(float v, int lane_mask) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  warp_state->slots[lane] = v;
  warp_state->barrier.arrive_and_wait();
  const float other = warp_state->slots[lane ^ lane_mask];
  warp_state->barrier.arrive_and_wait();  // every lane has read before the slots are reused
  return other;
}

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
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        std::memset(block_smem, 0xFF, smem_bytes);
        std::barrier<> block(threads);
        std::deque<WarpState> warps(static_cast<std::size_t>((threads + kWarpSize - 1) / kWarpSize));
        std::vector<std::thread> pool;
        pool.reserve(static_cast<std::size_t>(threads));
        for (int t = 0; t < threads; ++t) {
          pool.emplace_back([&, t] {
            threadIdx = dim3(static_cast<unsigned>(t));
            blockIdx = dim3(x, y, z);
            gridDim = grid;
            blockDim = dim3(static_cast<unsigned>(threads));
            block_barrier = &block;
            warp_state = &warps[static_cast<std::size_t>(t / kWarpSize)];
            thread_body();
          });
        }
        for (std::thread& th : pool) th.join();
      }
    }
  }
}

}  // namespace simt
