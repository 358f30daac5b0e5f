// CommWorker: the progress loop (see the header for why it exists and how it keeps MPI's order).
#include "engine/distributed/comm/comm_worker.h"

#include <algorithm>
#include <chrono>
#include <set>

namespace zt {

namespace {

// The live workers, for halt_all.
std::mutex g_workers_mutex;
std::set<CommWorker*>& live_workers() {
  static std::set<CommWorker*> workers;
  return workers;
}
thread_local bool t_on_worker = false;  // this thread is a worker's (an operation that aborts)

}  // namespace

CommWorker::CommWorker() : thread_([this] { run(); }) {
  const std::lock_guard<std::mutex> lock(g_workers_mutex);
  live_workers().insert(this);
}

CommWorker::~CommWorker() {
  {
    const std::lock_guard<std::mutex> lock(g_workers_mutex);
    live_workers().erase(this);
  }
  halt();
}

void CommWorker::halt_all() {
  // A worker's operation aborting while another thread halts them all (and joins this one, holding
  // the lock) leaves it to that thread: waiting for the lock here would wait for ever.
  std::unique_lock<std::mutex> lock(g_workers_mutex, std::defer_lock);
  if (t_on_worker) {
    if (!lock.try_lock()) return;
  } else {
    lock.lock();
  }
  for (CommWorker* w : live_workers()) w->halt();
}

void CommWorker::halt() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  const std::lock_guard<std::mutex> lock(join_mutex_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::shared_ptr<CommWorker::Completion> CommWorker::submit(Operation op) {
  auto completion = std::make_shared<Completion>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Entry{std::move(op), completion, false});
  }
  wake_.notify_one();
  return completion;
}

void CommWorker::run() {
  t_on_worker = true;
  std::deque<Entry> active;  // in submission order
  int idle_rounds = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (active.empty()) wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      while (!queue_.empty()) {
        active.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    bool finished_any = false;
    bool earlier_all_posted = true;
    for (auto it = active.begin(); it != active.end();) {
      if (stop_.load(std::memory_order_acquire)) return;  // halted: nothing more runs or completes
      if (!earlier_all_posted && !it->posted_all) break;  // keep the posting order of every rank
      Progress p;
      try {
        p = it->op();
      } catch (...) {
        it->completion->error = std::current_exception();
        p.done = true;
      }
      it->posted_all = it->posted_all || p.posted_all || p.done;
      earlier_all_posted = earlier_all_posted && it->posted_all;
      if (p.done) {
        it->op = nullptr;  // drop the operation's references first: the waiting thread frees the buffers
        it->completion->done.store(true, std::memory_order_release);
        it = active.erase(it);
        finished_any = true;
      } else {
        ++it;
      }
    }
    // Poll eagerly while data moves, then back off (10 us doubling to 200 us) so that the computing
    // threads keep their cores; a new submission wakes the thread at once.
    idle_rounds = finished_any ? 0 : idle_rounds + 1;
    if (idle_rounds > 32) {
      const int shift = std::min(idle_rounds - 33, 5);
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, std::chrono::microseconds(std::min(10 << shift, 200)),
                     [&] { return stop_ || !queue_.empty(); });
    }
  }
}

}  // namespace zt
