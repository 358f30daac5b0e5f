// zt_bench_loader: the sharded-corpus loader's throughput and resident memory (issue 32). Writes
// (or reuses) GB of random llm.c uint16 shards of --shard-tokens each, opens them as
// data.train_files does, then fills micro-batches of B x T on one thread, as the trainer does: one
// sequential epoch over every shard and a run of random windows, for a tenth of the shards and for
// all of them. Reports tokens/s, the time to open the shards, and the process's resident memory
// before and at its peak during each read (VmHWM, reset before each), to show that it does not
// grow with the corpus. Prints a table and writes a JSON result.
//
// usage: zt_bench_loader [--dir DIR] [--gb 10] [--shard-tokens 100000000] [--batch 16] [--seq-len 1024]
//                        [--random-windows 2000000] [--out FILE] [--commit HASH] [--keep]
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/app/data/batch_sampler.h"
#include "engine/app/data/token_corpus.h"
#include "engine/app/data/token_file.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using zt::data::SampleOrder;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A /proc/self/status field in bytes ("VmRSS", "VmHWM").
std::int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1) * 1024;
  }
  return -1;
}

// Resets VmHWM to the current resident size (Linux: "5" to clear_refs).
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string git_head(const std::string& root) {
  std::string out;
  if (FILE* p = ::popen(("git -C " + root + " rev-parse HEAD 2>/dev/null").c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof(buf), p) != nullptr) out = buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

// Shard i's tokens: xorshift64 over GPT-2's vocabulary, seeded by i (the same files every run).
void write_shard(const std::string& path, int index, std::int64_t tokens) {
  std::vector<std::uint16_t> t(static_cast<std::size_t>(tokens));
  std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(index + 1);
  for (std::uint16_t& v : t) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = static_cast<std::uint16_t>((x >> 16) % 50257);
  }
  zt::data::write_llmc_token_file(path, t);
}

struct Row {
  std::string name;
  int shards = 0;
  std::int64_t corpus_tokens = 0, tokens_read = 0;
  double open_s = 0, read_s = 0;
  std::int64_t rss_before = 0, rss_peak = 0;
  double tokens_per_s() const { return static_cast<double>(tokens_read) / read_s; }
};

// Reads `windows` samples (0: one sequential epoch) in micro-batches of B x T.
Row measure(const std::vector<std::string>& paths, SampleOrder order, std::int64_t windows, int B, int T) {
  Row r;
  const Clock::time_point t_open = Clock::now();
  const zt::data::TokenCorpus corpus =
      zt::data::TokenCorpus::open_shards(paths, zt::data::TokenFileFormat::kAuto, 50257, "bench");
  r.open_s = seconds_since(t_open);
  r.shards = corpus.shard_count();
  r.corpus_tokens = corpus.token_count();
  if (windows == 0) windows = corpus.window_count(order, T) / B * B;
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());
  const zt::data::SampleStream how{order, 1337, zt::data::kTrainStream};
  reset_peak();
  r.rss_before = status_bytes("VmRSS");
  std::int64_t checksum = 0;
  const Clock::time_point t0 = Clock::now();
  for (std::int64_t g = 0; g < windows; g += B) {
    zt::data::fill_batch(corpus, how, B, T, g, inputs.data(), targets.data());
    checksum += inputs[0] + targets.back();  // keeps the copies observable
  }
  r.read_s = seconds_since(t0);
  r.rss_peak = status_bytes("VmHWM");
  r.tokens_read = windows * T;
  if (checksum == -1) std::puts("");  // never: the checksum only has to be used
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp/zt_loader_bench", out, commit;
  double gb = 10;
  std::int64_t shard_tokens = 100'000'000, random_windows = 2'000'000;
  int B = 16, T = 1024;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "zt_bench_loader: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir")
      dir = next();
    else if (a == "--gb")
      gb = std::atof(next().c_str());
    else if (a == "--shard-tokens")
      shard_tokens = std::atoll(next().c_str());
    else if (a == "--batch")
      B = std::atoi(next().c_str());
    else if (a == "--seq-len")
      T = std::atoi(next().c_str());
    else if (a == "--random-windows")
      random_windows = std::atoll(next().c_str());
    else if (a == "--out")
      out = next();
    else if (a == "--commit")
      commit = next();
    else if (a == "--keep")
      keep = true;
    else {
      std::fprintf(stderr, "zt_bench_loader: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (gb <= 0 || shard_tokens < T + 1 || B < 1 || T < 1) {
    std::fprintf(stderr, "zt_bench_loader: --gb, --shard-tokens, --batch and --seq-len must be positive\n");
    return 2;
  }
  const fs::path root = fs::path(argv[0]).parent_path() / ".." / "..";
  if (commit.empty()) commit = git_head(fs::weakly_canonical(root).string());

  const auto n_shards = static_cast<int>(gb * 1e9 / (2.0 * static_cast<double>(shard_tokens)) + 0.5);
  fs::create_directories(dir);
  std::vector<std::string> paths;
  const Clock::time_point t_gen = Clock::now();
  int written = 0;
  for (int i = 0; i < n_shards; ++i) {
    const std::string path = fmt::format("{}/bench_train_{:06d}.bin", dir, i);
    const auto want = static_cast<std::uintmax_t>(1024 + 2 * shard_tokens);
    if (!fs::exists(path) || fs::file_size(path) != want) {
      write_shard(path, i, shard_tokens);
      ++written;
    }
    paths.push_back(path);
  }
  std::printf("%d shards of %lld tokens in %s (%d written in %.1f s)\n", n_shards, static_cast<long long>(shard_tokens),
              dir.c_str(), written, seconds_since(t_gen));
  const std::vector<std::string> tenth(paths.begin(), paths.begin() + std::max(1, n_shards / 10));

  std::vector<Row> rows;
  for (const std::vector<std::string>& set : {tenth, paths}) {
    Row seq = measure(set, SampleOrder::kSequential, 0, B, T);
    seq.name = "sequential epoch";
    rows.push_back(seq);
    Row rnd = measure(set, SampleOrder::kRandom, random_windows, B, T);
    rnd.name = "random windows";
    rows.push_back(rnd);
  }

  std::printf("\nloader: micro-batches of %d x %d on one thread, llm.c uint16 shards\n", B, T);
  std::printf("%-17s %7s %9s %12s %9s %12s %10s %10s\n", "read", "shards", "corpus GB", "tokens read", "open ms",
              "tokens/s", "RSS MiB", "peak MiB");
  nlohmann::json jrows = nlohmann::json::array();
  for (const Row& r : rows) {
    std::printf("%-17s %7d %9.2f %12lld %9.2f %12.3e %10.1f %10.1f\n", r.name.c_str(), r.shards,
                2.0 * static_cast<double>(r.corpus_tokens) / 1e9, static_cast<long long>(r.tokens_read), r.open_s * 1e3,
                r.tokens_per_s(), static_cast<double>(r.rss_before) / (1 << 20),
                static_cast<double>(r.rss_peak) / (1 << 20));
    jrows.push_back({{"read", r.name},
                     {"shards", r.shards},
                     {"corpus_tokens", r.corpus_tokens},
                     {"tokens_read", r.tokens_read},
                     {"open_s", r.open_s},
                     {"read_s", r.read_s},
                     {"tokens_per_s", r.tokens_per_s()},
                     {"rss_before_bytes", r.rss_before},
                     {"rss_peak_bytes", r.rss_peak}});
  }
  double slowest = rows.front().tokens_per_s();
  std::int64_t growth = 0;
  for (const Row& r : rows) {
    slowest = std::min(slowest, r.tokens_per_s());
    growth = std::max(growth, r.rss_peak - r.rss_before);
  }
  std::printf("slowest: %.3e tokens/s (target 1e7 on one core); largest RSS growth during a read: %.1f MiB\n", slowest,
              static_cast<double>(growth) / (1 << 20));
  if (!out.empty()) {
    const nlohmann::json j = {{"commit", commit},
                              {"cpu", cpu_model()},
                              {"batch", B},
                              {"seq_len", T},
                              {"shard_tokens", shard_tokens},
                              {"threads", 1},
                              {"rows", jrows},
                              {"slowest_tokens_per_s", slowest},
                              {"largest_rss_growth_bytes", growth},
                              {"targets", {{"tokens_per_s", 1e7}}}};
    std::ofstream(out) << j.dump(1) << "\n";
    std::printf("wrote %s\n", out.c_str());
  }
  if (!keep) fs::remove_all(dir);
  return 0;
}
