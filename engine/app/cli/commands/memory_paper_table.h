// `zerotrain memory --params N`: the model states per rank of the ZeRO paper's formulas for a bare
// parameter count at each stage (no units, padding, buffers or activations), as the paper's
// Figure 1 tabulates them; `--config` gives the engine's own prediction (memory_command.cpp).
#pragma once

#include "engine/app/cli/commands/arg_parser.h"

namespace zt::cli {

// Prints the table (or with `json` its JSON) for --params and --k on `ranks` ranks; returns the
// exit code. Throws InputError for a --params that is not a whole number from 1 to 9e15.
int memory_paper_table(const ArgParser& parser, int ranks, bool json);

}  // namespace zt::cli
