// The SIMT emulator's fibers, barriers and shuffles ([Note: SIMT emulation] in simt_runtime.h).
#include "tests/emulation/simt_runtime.h"

#include <ucontext.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>

#if defined(__SANITIZE_ADDRESS__)  // GCC under -fsanitize=address
#include <sanitizer/asan_interface.h>
#define ZT_SIMT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define ZT_SIMT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define ZT_SIMT_POISON(p, n) ((void)(p), (void)(n))
#define ZT_SIMT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#if defined(__SANITIZE_THREAD__)  // GCC under -fsanitize=thread
#include <sanitizer/tsan_interface.h>
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

constinit thread_local dim3 threadIdx, blockIdx, gridDim, blockDim;

namespace simt {

namespace {

// What ThreadSanitizer is told: which fiber runs (switches carry no happens-before edge of their
// own), the barriers' edges, and writes it must not count (the scheduler's per-fiber registers).
#if defined(__SANITIZE_THREAD__)  // GCC under -fsanitize=thread
void* tsan_current_fiber() { return __tsan_get_current_fiber(); }
void* tsan_new_fiber() { return __tsan_create_fiber(0); }
void tsan_switch_to(void* fiber) { __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync); }
void tsan_release(void* addr) { __tsan_release(addr); }
void tsan_acquire(void* addr) { __tsan_acquire(addr); }
void tsan_ignore_writes_begin() { AnnotateIgnoreWritesBegin(__FILE__, __LINE__); }
void tsan_ignore_writes_end() { AnnotateIgnoreWritesEnd(__FILE__, __LINE__); }
#else
void* tsan_current_fiber() { return nullptr; }
void* tsan_new_fiber() { return nullptr; }
void tsan_switch_to(void*) {}
void tsan_release(void*) {}
void tsan_acquire(void*) {}
void tsan_ignore_writes_begin() {}
void tsan_ignore_writes_end() {}
#endif

constexpr std::size_t kStackBytes = std::size_t{256} << 10;  // not zeroed: touched pages only are committed

struct Fiber {
  ucontext_t context{};
  std::unique_ptr<char[]> stack;
  void* tsan = nullptr;
  std::atomic<bool> done{false};
};

// The launch in progress. One launch at a time, from one thread (the tests launch from their own).
struct Launch {
  dim3 grid, block_index;
  int threads = 0;
  const std::function<void()>* body = nullptr;
  Barrier* block_barrier = nullptr;
  std::deque<WarpState>* warps = nullptr;
  // The scheduler's bookkeeping that the fibers touch too: relaxed atomics, not data, for
  // ThreadSanitizer (the fibers run one at a time).
  std::atomic<int> current{-1};         // the fiber running
  std::atomic<bool> progressed{false};  // an arrival, a completed phase or a return since the last check
  ucontext_t scheduler{};
  void* scheduler_tsan = nullptr;
  char launch_edge = 0, block_edge = 0;  // addresses for the scheduler <-> fibers edges
};

alignas(128) unsigned char block_smem[kMaxDynamicSmem];
thread_local Barrier* block_barrier = nullptr;
thread_local WarpState* warp_state = nullptr;
std::deque<Fiber> fibers;  // kept across launches, grown to the widest block
Launch launch_state;

std::mutex violations_mutex;
std::vector<std::string> recorded;

// The running fiber's registers: its thread and block indices and its barriers (thread-locals of
// the one OS thread, so set again each time a fiber resumes; not counted as writes, which every
// fiber making to the same addresses would otherwise be reported as races between fibers).
void install(int t) {
  tsan_ignore_writes_begin();
  threadIdx = dim3(static_cast<unsigned>(t));
  blockIdx = launch_state.block_index;
  gridDim = launch_state.grid;
  blockDim = dim3(static_cast<unsigned>(launch_state.threads));
  block_barrier = launch_state.block_barrier;
  warp_state = &(*launch_state.warps)[static_cast<std::size_t>(t / kWarpSize)];
  tsan_ignore_writes_end();
}

void note_progress() { launch_state.progressed.store(true, std::memory_order_relaxed); }

void switch_to_scheduler() {
  const int me = launch_state.current.load(std::memory_order_relaxed);
  tsan_switch_to(launch_state.scheduler_tsan);
  swapcontext(&fibers[static_cast<std::size_t>(me)].context, &launch_state.scheduler);
  install(me);  // resumed
}

void fiber_main(int t) {
  tsan_acquire(&launch_state.launch_edge);
  install(t);
  Fiber& self = fibers[static_cast<std::size_t>(t)];
  void* const scheduler_tsan = launch_state.scheduler_tsan;
  (*launch_state.body)();
  block_barrier->arrive_and_drop();  // a returned thread stops counting, as an exited CUDA thread
  warp_state->barrier.arrive_and_drop();
  self.done.store(true, std::memory_order_relaxed);
  note_progress();
  // Everything this fiber did happens before what the scheduler does after the block; from here
  // on it reads nothing the scheduler may write.
  tsan_release(&launch_state.block_edge);
  tsan_switch_to(scheduler_tsan);
  swapcontext(&self.context, &launch_state.scheduler);  // never resumed
}

}  // namespace

void Barrier::arrive(std::uint32_t phase) {
  tsan_release(&edges_[phase & 1]);
  note_progress();
  if (arrived_.fetch_add(1, std::memory_order_relaxed) + 1 == expected_.load(std::memory_order_relaxed)) {
    complete_phase();
  }
}

void Barrier::complete_phase() {
  arrived_.store(0, std::memory_order_relaxed);
  phase_.fetch_add(1, std::memory_order_relaxed);
}

void Barrier::arrive_and_wait() {
  const std::uint32_t phase = phase_.load(std::memory_order_relaxed);
  arrive(phase);
  while (phase_.load(std::memory_order_relaxed) == phase) switch_to_scheduler();
  tsan_acquire(&edges_[phase & 1]);
}

void Barrier::arrive_and_drop() {
  tsan_release(&edges_[phase_.load(std::memory_order_relaxed) & 1]);
  note_progress();
  const int expected = expected_.fetch_sub(1, std::memory_order_relaxed) - 1;
  if (expected > 0 && arrived_.load(std::memory_order_relaxed) == expected) complete_phase();
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
  Launch& l = launch_state;
  l.grid = grid;
  l.threads = threads;
  l.body = &thread_body;
  if (l.scheduler_tsan == nullptr) l.scheduler_tsan = tsan_current_fiber();  // the launching thread's, once
  while (fibers.size() < static_cast<std::size_t>(threads)) {
    Fiber& f = fibers.emplace_back();
    f.stack = std::make_unique_for_overwrite<char[]>(kStackBytes);
    f.tsan = tsan_new_fiber();
  }
  const std::size_t num_blocks = std::size_t{grid.x} * grid.y * grid.z;
  for (std::size_t i = 0; i < num_blocks; ++i) {
    // Each block: fresh barriers, shared memory refilled, every fiber started at the body.
    Barrier block(threads);
    std::deque<WarpState> warps(static_cast<std::size_t>(threads / kWarpSize));
    l.block_barrier = &block;
    l.warps = &warps;
    l.block_index = dim3(static_cast<unsigned>(i % grid.x), static_cast<unsigned>(i / grid.x % grid.y),
                         static_cast<unsigned>(i / (std::size_t{grid.x} * grid.y)));
    // Under ASan only the launch's dynamic shared memory is addressable: a kernel reading or
    // writing past what it asked for is reported, as the GPU would fault or read another block's.
    ZT_SIMT_UNPOISON(block_smem, kMaxDynamicSmem);
    ZT_SIMT_POISON(block_smem + smem_bytes, kMaxDynamicSmem - smem_bytes);
    std::memset(block_smem, 0xFF, smem_bytes);
    tsan_release(&l.launch_edge);  // the caller's inputs and the refill happen before the block
    for (int t = 0; t < threads; ++t) {
      Fiber& f = fibers[static_cast<std::size_t>(t)];
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = f.stack.get();
      f.context.uc_stack.ss_size = kStackBytes;
      f.context.uc_link = nullptr;
      makecontext(&f.context, reinterpret_cast<void (*)()>(&fiber_main), 1, t);
      f.done.store(false, std::memory_order_relaxed);
    }
    // Round robin until every fiber has returned; a round in which nobody arrived anywhere, completed
    // a phase or returned means the waiters' barriers can never complete.
    for (int live = threads; live > 0;) {
      l.progressed.store(false, std::memory_order_relaxed);
      for (int t = 0; t < threads; ++t) {
        Fiber& f = fibers[static_cast<std::size_t>(t)];
        if (f.done.load(std::memory_order_relaxed)) continue;
        l.current.store(t, std::memory_order_relaxed);
        tsan_switch_to(f.tsan);
        swapcontext(&l.scheduler, &f.context);
        live -= f.done.load(std::memory_order_relaxed) ? 1 : 0;
      }
      if (live > 0 && !l.progressed.load(std::memory_order_relaxed)) {
        std::fprintf(stderr, "simt: block %zu: %d threads wait at a barrier the others never reach\n", i, live);
        std::abort();
      }
    }
    tsan_acquire(&l.block_edge);  // the block's writes happen before what follows it
  }
  ZT_SIMT_UNPOISON(block_smem, kMaxDynamicSmem);
  l.current.store(-1, std::memory_order_relaxed);
}

}  // namespace simt
