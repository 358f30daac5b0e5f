// CommWorker: the CPU backend's communication stream. One background thread posts this rank's
// collectives in submission order and drives them to completion while the main thread computes.
//
// Why a thread: MPI moves data only inside MPI calls. With collectives polled from the main
// thread alone, a reduce-scatter started during backward would sit idle until the next wait and
// nothing would overlap. Gloo's CPU process groups run their collectives on worker threads for
// the same reason.
//
// Ordering: MPI requires every rank to start the collectives of a communicator in the same order.
// The worker starts them strictly in submission order, and an operation that posts in several
// phases (a deterministic all-reduce: all-to-all, then all-gather) holds back every later
// operation until its last phase is posted, so the order on the wire is the program order on
// every rank.
//
// Memory: buffers are allocated by the submitting (main) thread and owned by its Work handle; an
// operation drops its own references before it reports completion, so the main thread frees them
// and the MemoryTracker is only ever touched from there.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace zt {

class CommWorker {
 public:
  // What one call of an operation achieved.
  struct Progress {
    bool posted_all = false;  // every phase has been handed to MPI (later operations may start)
    bool done = false;        // complete, results written
  };
  // Called repeatedly on the worker thread: the first call posts, later calls test and finish.
  using Operation = std::function<Progress()>;

  struct Completion {
    std::atomic<bool> done{false};
    std::exception_ptr error;  // set before `done` when the operation threw
  };

  CommWorker();
  // Stops the thread; operations still in flight are abandoned (only on an error path: normal
  // shutdown has waited for every Work).
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  std::shared_ptr<Completion> submit(Operation op);
  // Stops every live worker's thread before the job is aborted (MPI_Abort): no operation runs, and
  // no completion writes into a result, past this call (a collective completing during the abort
  // ran its completion while the process was torn down: a segfault). Every worker, not only the
  // communicator's that timed out: the world's (the loss vote), hybrid sharding's two hops. From a
  // worker's own thread (an operation that aborts), that worker stops after the operation.
  static void halt_all();

 private:
  struct Entry {
    Operation op;
    std::shared_ptr<Completion> completion;
    bool posted_all = false;
  };
  void run();
  void halt();  // joins the thread, but from that thread itself; idempotent

  std::mutex join_mutex_;  // one join, whichever thread halts it (halt_all beside the destructor)
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Entry> queue_;        // submitted, not yet seen by the thread
  std::atomic<bool> stop_{false};  // set under mutex_ (the waits' predicate), read without it too
  std::thread thread_;
};

}  // namespace zt
