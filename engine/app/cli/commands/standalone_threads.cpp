// The CPU threads a standalone model computes on (fit_threads_to_idle_cores, standalone_model.h):
// sample and eval beside a training run on the same cores take the idle ones, not all of them.
#include <fmt/format.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "engine/app/cli/commands/standalone_model.h"
#include "engine/app/config/train_section.h"

namespace zt::cli {

namespace {

// Threads of other processes ready to run now, by /proc/loadavg's fourth field (runnable
// scheduling entities / all), less this one and its `siblings` on the node (eval's other ranks,
// started with it): the median of five reads 4 ms apart, as one read catches a moment. Unlike the
// load averages it does not lag: a training run that just ended no longer counts. -1 where the
// field cannot be read.
int runnable_elsewhere(int siblings) {
  if (const char* forced = std::getenv("ZT_TEST_RUNNABLE_ELSEWHERE"); forced != nullptr) return std::atoi(forced);
  std::vector<int> reads;
  for (int i = 0; i < 5; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(4));
    std::ifstream in("/proc/loadavg");
    double one = 0, five = 0, fifteen = 0;
    int runnable = 0;
    char slash = 0;
    if (!(in >> one >> five >> fifteen >> runnable >> slash) || slash != '/') return -1;
    reads.push_back(runnable);
  }
  std::sort(reads.begin(), reads.end());
  return std::max(0, reads[reads.size() / 2] - 1 - siblings);
}

}  // namespace

std::string fit_threads_to_idle_cores(const ArgParser& parser, WeightSource& source, int processes_on_node) {
  const int from_environment = omp_num_threads_from_environment();
  if (parser.has("threads") || from_environment > 0) {  // as train reads OMP_NUM_THREADS too
    source.num_threads = parser.has("threads") ? parser.get_int("threads", 1, 1, 1024) : from_environment;
    const int cores = omp_get_num_procs();
    if (source.device != Device::kCPU || source.num_threads * processes_on_node <= cores || omp_waits_passively()) {
      return "";
    }
    // As train warns of train.num_threads past the cores.
    const char* given = parser.has("threads") ? "--threads" : "OMP_NUM_THREADS";
    return fmt::format(
        "{} = {} on each of this node's {} process(es) asks for {} threads on its {} cores: OpenMP's spinning "
        "waits can make this several times slower; leave {} out or set OMP_WAIT_POLICY=passive",
        given, source.num_threads, processes_on_node, source.num_threads * processes_on_node, cores, given);
  }
  if (source.device != Device::kCPU) return "";
  const int busy = runnable_elsewhere(processes_on_node - 1);
  if (busy < 0) return "";
  const int cores = omp_get_num_procs();
  const int idle = std::max(1, (cores - busy) / std::max(1, processes_on_node));
  if (idle >= source.num_threads) return "";
  const std::string why = fmt::format(
      "{} CPU thread(s), not {}: {} thread(s) of other processes were ready to run on this machine's {} cores, and "
      "threads past the idle ones spin-wait on cores others hold (--threads N to choose)",
      idle, source.num_threads, busy, cores);
  source.num_threads = idle;
  return why;
}

}  // namespace zt::cli
