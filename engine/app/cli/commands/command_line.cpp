// The zerotrain command line (see commands.h): sub-command dispatch, and exceptions turned into
// one-line errors and exit codes (2: usage/config/input, 1: runtime failure).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "engine/app/cli/commands/commands.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/console.h"
#include "engine/distributed/launch/rendezvous.h"
#include "engine/distributed/launch/signals.h"

namespace {

constexpr const char* kUsage =
    "usage: zerotrain <command> [flags]\n\n"
    "commands:\n"
    "  train         train a GPT-2 or Llama-style model from a JSON config\n"
    "  prepare       turn a text file into a vocabulary and train/val token files\n"
    "  sample        generate text from a run's final weights, a checkpoint or pretrained weights\n"
    "  eval          score saved weights: multiple-choice accuracy (HellaSwag), loss on a token file\n"
    "  debug-state   one forward/backward on a deterministic batch, every tensor to safetensors\n"
    "  memory        predicted bytes per rank for ZeRO stages 0-3 (a config, or a parameter count)\n"
    "  plan          what fits a memory budget per rank, fastest first, and a --set line for it\n"
    "  ckpt          inspect, verify or export a sharded checkpoint\n"
    "  version       print the version and build features\n\n"
    "Run 'zerotrain <command> --help' for a command's flags.\n";

}  // namespace

namespace zt::cli {

namespace {

// What a command printed must reach its reader: stdout (buffered) is flushed and checked, so that a
// sample or an evaluation written to a full disk or /dev/full ends non-zero instead of losing its
// output silently. train's record is its run directory, whose files it checks itself: a console
// that could not be written is a warning there.
int check_stdout(const std::vector<std::string>& all, int code) {
  const bool flushed = flush_stdout();
  if (flushed && std::ferror(stdout) == 0) return code;
  // The first failed write's reason (a command that flushed as it went failed before this flush).
  const std::string kept = stdout_failure_reason();
  const std::string why = !kept.empty() ? kept : "an earlier write failed";
  std::clearerr(stdout);
  // A help text is all such a command prints (train --help runs nothing: no run directory to point
  // to); a command that failed said so already, a write's own exception among its errors (a second
  // line repeated it).
  const bool help = std::find(all.begin(), all.end(), "--help") != all.end() ||
                    std::find(all.begin(), all.end(), "-h") != all.end() || all.empty();
  const std::string command = all.empty() ? std::string() : all[0];
  if (command == "train" && !help) {
    print_err(
        "zerotrain: warning: standard output could not be written ({}): its lines are lost; the "
        "run directory's metrics.jsonl has the run's record\n",
        why);
    return code;
  }
  if (code != 0) return code;
  print_err("zerotrain: error: cannot write {} to standard output: {}\n",
            help ? std::string("the help") : fmt::format("the {} command's output", command), why);
  note_error_reported(1);
  return 1;
}

int run_command(const std::vector<std::string>& all);

}  // namespace

int run_command_line(const std::vector<std::string>& all) {
  const int code = run_command(all);
  return check_stdout(all, code);
}

namespace {

int run_command(const std::vector<std::string>& all) {
  if (all.size() >= 2 && all[0] == "help") {  // `zerotrain help train`: as `zerotrain train --help`
    return run_command_line({all[1], "--help"});
  }
  if (all.empty() || all[0] == "--help" || all[0] == "-h" || all[0] == "help") {
    std::fputs(kUsage, all.empty() ? stderr : stdout);
    return all.empty() ? 2 : 0;
  }
  const std::string command = all[0];
  const std::vector<std::string> args(all.begin() + 1, all.end());
  try {
    if (command == "train") return train_main(args);
    if (command == "prepare") return prepare_main(args);
    if (command == "sample") return sample_main(args);
    if (command == "eval") return eval_main(args);
    if (command == "debug-state") return debug_state_main(args);
    if (command == "memory") return memory_main(args);
    if (command == "plan") return plan_main(args);
    if (command == "ckpt") return ckpt_main(args);
    if (command == "version" || command == "--version") return version_main(args);
    // One line, as every other bad input gets (the usage block is --help's).
    const std::set<std::string> commands = {"train",  "prepare", "sample", "eval",   "debug-state",
                                            "memory", "plan",    "ckpt",   "version"};
    const std::string near = nearest_key(command, commands);
    print_err("zerotrain: error: unknown command '{}'{} (commands: {}; zerotrain --help says what each does)\n",
              command, near.empty() ? "" : fmt::format(", did you mean '{}'?", near),
              "train, prepare, sample, eval, debug-state, memory, plan, ckpt, version");
    note_error_reported(2);
    return 2;
  } catch (const AgreedInputError&) {  // on_every_rank printed the job's line on rank 0
    return 2;
  } catch (const AgreedRuntimeError&) {
    return 1;
  } catch (const InputError& e) {
    print_stderr(error_line(e.what()));
    note_error_reported(2);
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the command line or a config named cannot be looked at (a symlink loop, a folder
    // without permission, a name too long): the path and the reason, not the library's wording.
    print_err("zerotrain: error: cannot access '{}': {}\n", one_line(e.path1().string()), e.code().message());
    note_error_reported(2);
    return 2;
  } catch (const std::exception& e) {
    print_stderr(error_line(e.what()));
    note_error_reported(1);
    return 1;
  }
}

}  // namespace

bool quiet_past_rank_zero(const char* command) {
  LaunchInfo launch;
  try {
    launch = detect_launch();
  } catch (const InputError&) {  // launcher variables that disagree: a run refuses them, a prediction ignores them
    return false;
  }
  if (launch.rank <= 0) return false;
  if (launch.source != "OpenMPI" && launch.source != "PMI") {
    print_stderr(fmt::format("{}: rank {} of {} ({}): rank 0 alone prints; this rank prints nothing\n", command,
                             launch.rank, launch.world_size, launch.source));
  }
  return true;
}

}  // namespace zt::cli
