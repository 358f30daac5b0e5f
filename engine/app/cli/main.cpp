// zerotrain's entry point: the command line (engine/app/cli/commands/command_line.cpp).
#include <csignal>
#include <string>
#include <vector>

#include "engine/app/cli/commands/commands.h"

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) delivers SIGXFSZ, whose default ends the process with a core dump
  // and no word, mid-save. Ignored, the write fails with EFBIG instead and takes the path every
  // failed write takes: one line naming the file, nothing left under a final name.
  std::signal(SIGXFSZ, SIG_IGN);
  return zt::cli::run_command_line({argv + 1, argv + argc});
}
