// zerotrain's entry point: the command line (engine/app/cli/commands/command_line.cpp).
#include <string>
#include <vector>

#include "engine/app/cli/commands/commands.h"

int main(int argc, char** argv) { return zt::cli::run_command_line({argv + 1, argv + argc}); }
