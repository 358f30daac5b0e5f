// What a run is, for its ranks to compare before the first step and for its checkpoints to record:
// the resolved config, the identity of its data (every file it reads: path, bytes, a fingerprint),
// the model's parameter table and the units' step schedule. Ranks launched with different configs
// (mpirun's `-np 1 A : -np 1 B`), a different data file on one node, or another build would
// otherwise train on silently or die inside a collective with no word of the cause.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/distributed/comm/communicator.h"

namespace zt {

// Every file the config's data section reads (token files or shards, a prepared folder's files, a
// vocabulary or tokenizer file) as {"path", "bytes", "fingerprint"}, in the order the splits read
// them; the fingerprint is a crc32 of the file's first and last 64 KiB. The embedded dataset has
// none (its text follows from data.embedded_chars and train.seed). A file that cannot be read is
// listed with bytes -1: opening it reports the error.
nlohmann::json data_identity(const RunConfig& config);

// "key", "value" entries in a fixed order: the resolved config flattened ("train.seed", "1337"),
// but train.num_threads (a node's own), one "data.file[i]" per data file, "model.param_table" and
// "model.schedule" (each unit's name and size, and the forward and backward unit calls).
using IdentityEntries = std::vector<std::pair<std::string, std::string>>;
IdentityEntries run_identity(const RunConfig& config, const nlohmann::json& data);

// Collective, the run's first: one all-gather of a hash of every rank's entries. Where they differ
// (rare: a few more collectives), InputError on every rank naming the first entry that differs,
// its values and the ranks holding each, e.g. "ranks disagree on train.seed: 1337 on rank 0, 42 on
// rank 1".
void check_ranks_agree(Communicator& comm, const IdentityEntries& mine);

// The differences between a checkpoint's data identity and the run's, one "what: old -> new"
// each (a file added, gone, resized or with another fingerprint, or the same files in another
// order); empty when they are the same, also under other paths (the same contents in the same
// order: the same batches). A file read under another path is paired with the saved one it stands
// for by its contents, or, changed, by its file name: one entry, "(saved as <path>)".
std::vector<std::string> data_changes(const nlohmann::json& saved, const nlohmann::json& now);

}  // namespace zt
