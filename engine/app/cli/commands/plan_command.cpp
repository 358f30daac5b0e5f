// `zerotrain plan`: which ZeRO stage, micro-batch, activation checkpointing, head chunks, block
// units, prefetch depth and in-flight bound fit a memory budget per rank, fastest first by an
// estimated step time, and a ready --set line for the best (engine/app/plan/planner.h; the model
// and its limits: docs/memory.md, "Planning a run"). Nothing is trained.
#include <fmt/format.h>
#include <omp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/config/config_limits.h"
#include "engine/app/plan/planner.h"
#include "engine/app/trainer/memory_report.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"

namespace zt::cli {

namespace {

constexpr const char* kDefaultProfile = "docs/results/cpu_op_profile.json";

// This process's binary, as /proc names it; empty where it cannot tell.
std::filesystem::path own_binary() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe;
}

// Where the default profile is looked for after the working directory (the repository's root): in
// the repository whose build/ holds this binary (build/zerotrain run from anywhere).
std::filesystem::path profile_beside_binary() {
  const std::filesystem::path exe = own_binary();
  return exe.empty() ? std::filesystem::path() : exe.parent_path().parent_path() / kDefaultProfile;
}

// This process's binary for a command line: relative to the working directory where it lies under
// it (./zerotrain in its own folder), else absolute; "zerotrain" where /proc cannot tell.
std::string this_binary() {
  const std::filesystem::path exe = own_binary();
  if (exe.empty()) return "zerotrain";
  std::error_code ec;
  const std::filesystem::path here = std::filesystem::relative(exe, std::filesystem::current_path(ec), ec);
  if (ec || here.empty() || *here.begin() == ".." || !std::filesystem::exists(exe, ec)) return exe.string();
  return here.has_parent_path() ? here.string() : "./" + here.string();  // a bare name is looked up on PATH
}

std::string default_profile() {
  if (std::filesystem::exists(kDefaultProfile)) return kDefaultProfile;
  std::error_code ec;
  const std::filesystem::path beside = profile_beside_binary();
  return !beside.empty() && std::filesystem::exists(beside, ec) ? beside.string() : "";
}

// "80GiB", "24GB", "512MiB", "1.5e9" (bytes): a size in bytes.
std::int64_t parse_size(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end != nullptr ? std::string(end) : "";
  double scale = -1;
  for (const auto& [name, bytes] : {std::pair{"", 1.0},
                                    {"B", 1.0},
                                    {"KB", 1e3},
                                    {"MB", 1e6},
                                    {"GB", 1e9},
                                    {"TB", 1e12},
                                    {"KiB", 1024.0},
                                    {"MiB", 1048576.0},
                                    {"GiB", 1073741824.0},
                                    {"TiB", 1099511627776.0}}) {
    if (unit == name) scale = bytes;
  }
  // From 1 byte (0.5 would truncate to an empty budget) to below 2^62 bytes (4 EiB): a double
  // beyond it would not convert to a byte count, and 2^62 + 1 already reads as 2^62.
  if (!decimal_start(text) || end == text.c_str() || scale < 0 || !std::isfinite(v) || v * scale < 1 ||
      v * scale >= 0x1p62) {
    throw_input_error(
        "zerotrain plan: {} must be a size such as 80GiB, 24GB or 512MiB, units B, KB-TB or KiB-TiB, from 1 byte to "
        "below 4 EiB (got '{}')",
        flag, text);
  }
  return static_cast<std::int64_t>(v * scale);
}

// A link's rate or latency: a decimal number in [lo, hi] (1e-300 GB/s printed 300-digit times).
double parse_in_range(const ArgParser& p, const std::string& flag, double fallback, double lo, double hi) {
  if (!p.has(flag)) return fallback;
  char* end = nullptr;
  const std::string text = p.get(flag);
  const double v = std::strtod(text.c_str(), &end);
  if (!decimal_start(text) || end != text.c_str() + text.size() || !(v >= lo && v <= hi)) {
    throw_input_error("zerotrain plan: --{} must be a number from {:g} to {:g} (got '{}')", flag, lo, hi, text);
  }
  return v;
}

// A step time in the unit that keeps it readable: a CPU profile ranking a large model gives steps of
// minutes or hours, which in ms are seven-digit numbers nobody reads as such.
std::string format_duration(double seconds) {
  if (seconds < 10) return fmt::format("{:.1f}ms", 1e3 * seconds);
  if (seconds < 600) return fmt::format("{:.1f}s", seconds);
  if (seconds < 36000) return fmt::format("{:.1f}min", seconds / 60);
  return fmt::format("{:.1f}h", seconds / 3600);
}

// "zero.stage=3" -> "zero.stage": the key of a --set entry.
std::string key_of(const std::string& set) { return set.substr(0, set.find('=')); }

// The --set entries a choice runs with: the user's own but those the choice sets again (its value
// wins), then the choice's. The `best:` line and --json's run_sets (its sets alone left out the
// user's: a plan with --set precision.activations=bf16 listed choices that need more without it).
std::vector<std::string> run_sets(const std::vector<std::string>& given, const std::vector<std::string>& choice) {
  std::vector<std::string> sets;
  for (const std::string& s : given) {
    const bool replaced =
        std::any_of(choice.begin(), choice.end(), [&](const std::string& c) { return key_of(c) == key_of(s); });
    if (!replaced) sets.push_back(s);
  }
  sets.insert(sets.end(), choice.begin(), choice.end());
  return sets;
}

// One argument of the `best:` line as a POSIX shell reads it back: as it is where it holds only
// characters no shell treats specially, else in single quotes (a quote inside as '\''), so a config
// path with a space, or a --set value with quotes or a `;`, is pasted as the argument it was.
std::string shell_quoted(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("_-./:=,+@%", ch) != nullptr;
  });
  if (plain) return arg;
  std::string out = "'";
  for (const char ch : arg) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// Why no choice was printed: none fits the budget, or (none to weigh) the config's rules refused
// every one, the first refusal quoted.
std::string nothing_fits(const plan::PlanResult& r, std::int64_t budget) {
  if (r.considered == 0) {
    return fmt::format(
        "no choice to weigh: the global batch of {} tokens holds no whole micro-batch of one "
        "sequence a rank",
        r.global_batch_tokens);
  }
  if (r.invalid == r.considered) {
    return fmt::format("none of the {} choices is a config that trains (the first refused: {})", r.considered,
                       r.first_refusal);
  }
  const auto [offered, least] = format_bytes_apart(budget, r.smallest_bytes);
  // A key the search leaves as the config sets it, where it holds less.
  const std::string fewer_buffers =
      r.smallest_bytes_fewer_buffers < 0
          ? ""
          : fmt::format("; with --set zero.overlap_comm=false (not searched) it needs {}{}",
                        format_bytes(r.smallest_bytes_fewer_buffers),
                        r.smallest_bytes_fewer_buffers <= budget ? ", which fits" : "");
  return fmt::format("nothing fits {} per rank: the least any choice needs is {} (add ranks or memory{})", offered,
                     least, fewer_buffers);
}

// Where the profile's times come from another kind of device than the config runs on: its step
// times are that device's, so the ranking weighs compute against communication wrongly.
std::string profile_device_warning(const plan::OpProfile& profile, Device device) {
  const bool profile_cpu = profile.device.starts_with("cpu");
  if (profile_cpu == (device == Device::kCPU)) return "";
  return fmt::format(
      "warning: the profile was measured on {} but the config runs on {}: the step times below are the profile's "
      "device's (give --profile a run directory profiled with --set log.profile_ops=true on the target device)",
      profile.device, device == Device::kCPU ? "the cpu" : "cuda");
}

// Where the profile is a reference file (the repository's): its times are its machine's, which a
// step here may differ from by a third (a trial's 2-core VM: 24-33% slower than the reference's).
std::string profile_machine_note(const plan::OpProfile& profile) {
  if (profile.machine.empty()) return "";
  return fmt::format(
      "the step times are those of the profile's machine ({}); for this machine's, profile a run here "
      "(--set log.profile_ops=true) and give its directory to --profile",
      profile.machine);
}

// "zero.stage=3" -> "3": the value of a --set entry.
std::string value_of(const plan::Choice& c, const std::string& key) {
  for (const std::string& s : c.sets) {
    if (s.starts_with(key + "=")) return s.substr(key.size() + 1);
  }
  return "-";  // a key the choice does not set: unused at its stage (prefetch below stage 3)
}

}  // namespace

int plan_main(const std::vector<std::string>& args) {
  ArgParser parser("plan", "Search what fits a memory budget per rank, fastest first (nothing is trained).");
  parser.value_flag("config", "FILE", "JSON run config", true)
      .value_flag("set", "SECTION.KEY=VALUE",
                  "override a config key; a key the search sets (zero.stage, train.micro_batch, ...) given here is "
                  "held at its value, not searched",
                  false, true)
      .value_flag("ranks", "N", "ranks the run will use (default 1)")
      .value_flag("device-memory", "SIZE",
                  "memory per rank: the GPU's less the CUDA context's and NCCL's (not predicted), or the host's share "
                  "on the CPU, such as 80GiB",
                  true)
      .value_flag("profile", "PATH",
                  fmt::format("per-op profile: a run directory with op_profile.json, or a file like {} (default: "
                              "the repository's, in the working directory or above the binary's build/ folder)",
                              kDefaultProfile))
      .value_flag("link-gbps", "X", "bandwidth inside a group, GB/s (default 10)")
      .value_flag("link-latency-us", "X", "latency per ring hop inside a group, microseconds (default 5)")
      .value_flag("cross-link-gbps", "X", "bandwidth across groups (hybrid sharding), GB/s (default: --link-gbps)")
      .value_flag("cross-link-latency-us", "X", "latency across groups, microseconds (default: --link-latency-us)")
      .value_flag("cores-per-node", "N",
                  "CPU ranks: the cores of a node, a fraction for a container's CPU quota (default: this machine's)")
      .value_flag("ranks-per-node", "N", "CPU ranks: ranks sharing a node (default: --ranks)")
      .value_flag("top", "K", "rows to print (default 10)")
      .bool_flag("json", "print every fitting choice as JSON");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  const int ranks = parser.get_int("ranks", 1, 1, kMaxPredictedRanks);
  if (quiet_past_rank_zero("zerotrain plan")) return 0;  // --ranks says how many; a launch prints once
  const std::int64_t budget = parse_size("--device-memory", parser.get("device-memory"));
  const std::string profile_path = parser.has("profile") ? parser.get("profile") : default_profile();
  if (profile_path.empty()) {
    throw_input_error(
        "zerotrain plan: no --profile given, and no {} in the working directory nor at {} (run from the "
        "repository, or profile a run with --set log.profile_ops=true and give its directory)",
        kDefaultProfile, profile_beside_binary().lexically_normal().string());
  }
  const plan::OpProfile profile = plan::load_op_profile(profile_path);
  plan::Links links;
  // From a slow network's 1 MB/s to past any link's 100 TB/s; from 1 ns to a second a hop.
  links.bytes_per_s = parse_in_range(parser, "link-gbps", 10.0, 1e-3, 1e5) * 1e9;
  links.latency_s = parse_in_range(parser, "link-latency-us", 5.0, 1e-3, 1e6) * 1e-6;
  links.across_bytes_per_s = parse_in_range(parser, "cross-link-gbps", links.bytes_per_s / 1e9, 1e-3, 1e5) * 1e9;
  links.across_latency_s = parse_in_range(parser, "cross-link-latency-us", links.latency_s * 1e6, 1e-3, 1e6) * 1e-6;
  links.cores_per_node = parse_in_range(parser, "cores-per-node", static_cast<double>(omp_get_num_procs()), 0.01, 1e6);
  links.ranks_per_node = parser.get_int("ranks-per-node", ranks, 1, ranks);  // a node holds at most the job
  const int top = parser.get_int("top", 10, 1, 1 << 20);                     // read before anything prints
  const plan::PlanResult r = plan::plan(parser.get("config"), parser.all("set"), ranks, budget, profile, links);
  const std::string device_warning = profile_device_warning(profile, r.device);
  const std::string machine_note = profile_machine_note(profile);

  nlohmann::json notes = nlohmann::json::array();
  for (const std::string& line : {r.note, device_warning, machine_note}) {
    if (!line.empty()) notes.push_back(line);
  }
  if (parser.has("json")) {
    nlohmann::json rows = nlohmann::json::array();
    for (const plan::Choice& c : r.fitting) {
      rows.push_back({{"sets", c.sets},
                      {"run_sets", run_sets(parser.all("set"), c.sets)},
                      {"required_bytes", c.required_bytes},
                      {"compute_s", c.time.compute_s},
                      {"comm_s", c.time.comm_s},
                      {"step_s", c.time.step_s}});
    }
    fmt::print(
        "{}\n",
        nlohmann::json{
            {"config", parser.get("config")},
            {"ranks", ranks},
            {"budget_bytes", budget},
            {"profile", profile.source},
            {"global_batch_tokens", r.global_batch_tokens},
            {"notes", notes},
            {"held", r.held},
            {"considered", r.considered},
            {"invalid", r.invalid},
            // the least any choice the config's rules accept needs (null: none)
            {"least_required_bytes", r.smallest_bytes >= 0 ? nlohmann::json(r.smallest_bytes) : nlohmann::json()},
            // ... and with fewer communication buffers (null: no less)
            {"least_required_bytes_fewer_buffers",
             r.smallest_bytes_fewer_buffers >= 0 ? nlohmann::json(r.smallest_bytes_fewer_buffers) : nlohmann::json()},
            {"fitting", rows}}
            .dump(2));
    if (r.fitting.empty()) {  // the JSON says so on stdout; the reason on stderr, one line, as without --json
      print_stderr(error_line(nothing_fits(r, budget)));
      return 2;
    }
    for (const auto& line : notes) print_err("zerotrain plan: {}\n", line.get<std::string>());
    return 0;
  }
  fmt::print("zerotrain plan: {} on {} rank(s), {} per rank, global batch {} tokens; profile {} ({})\n",
             parser.get("config"), ranks, format_bytes(budget), r.global_batch_tokens, profile.source, profile.device);
  if (!r.note.empty()) fmt::print("note: {}\n", r.note);
  if (!r.held.empty()) fmt::print("held as --set gives them, not searched: {}\n", fmt::join(r.held, ", "));
  if (!device_warning.empty()) fmt::print("{}\n", device_warning);
  if (!machine_note.empty()) fmt::print("note: {}\n", machine_note);
  fmt::print("{} choices considered ({} refused by the config's rules), {} fit\n\n", r.considered, r.invalid,
             r.fitting.size());
  if (r.fitting.empty()) throw_input_error("{}", nothing_fits(r, budget));
  fmt::print("{:>4} {:>5} {:>9} {:>10} {:>6} {:>5} {:>8} {:>8} {:>11} {:>10} {:>9} {:>9}\n", "#", "stage", "mb x acc",
             "ckpt", "chunks", "units", "prefetch", "inflight", "memory", "compute", "comm", "step");
  for (int i = 0; i < top && i < static_cast<int>(r.fitting.size()); ++i) {
    const plan::Choice& c = r.fitting[static_cast<std::size_t>(i)];
    fmt::print("{:>4} {:>5} {:>9} {:>10} {:>6} {:>5} {:>8} {:>8} {:>11} {:>10} {:>9} {:>9}\n", i + 1,
               value_of(c, "zero.stage"), value_of(c, "train.micro_batch") + " x " + value_of(c, "train.grad_accum"),
               value_of(c, "train.activation_checkpointing"), value_of(c, "train.head_chunks"),
               value_of(c, "train.block_units"), value_of(c, "zero.prefetch_units"),
               value_of(c, "zero.max_inflight_reduction_mb"), format_bytes(c.required_bytes),
               format_duration(c.time.compute_s), format_duration(c.time.comm_s), format_duration(c.time.step_s));
  }
  fmt::print(
      "(mb x acc: train.micro_batch x train.grad_accum; ckpt: train.activation_checkpointing; chunks: "
      "train.head_chunks; units: train.block_units; prefetch: zero.prefetch_units, stage 3 only; inflight: "
      "zero.max_inflight_reduction_mb, 0 for no bound, where gradients pend (stages 2-3, or a head in chunks on "
      "several ranks); memory: the memory "
      "check's need per rank, the largest of a "
      "step's, the set-up's, the final gather's, a sample's bound and the multiple-choice scorer's, with "
      "checkpoint.async's staging; compute, comm and step: the estimate per optimizer step, docs/memory.md)\n");
  // Runnable as printed: the batch terms were resolved for `ranks` ranks, and the binary is this one
  // (relative to this directory where it lies under it: build/zerotrain), not a `zerotrain` on PATH.
  std::string line = fmt::format("{}{} train --config {}", ranks > 1 ? fmt::format("mpirun -np {} ", ranks) : "",
                                 shell_quoted(this_binary()), shell_quoted(parser.get("config")));
  for (const std::string& s : run_sets(parser.all("set"), r.fitting.front().sets)) line += " --set " + shell_quoted(s);
  fmt::print("\nbest: {}\n", line);
  return 0;
}

}  // namespace zt::cli
