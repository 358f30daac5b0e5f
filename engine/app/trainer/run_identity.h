// What a run is, for its ranks to compare before the first step and for its checkpoints to record:
// the resolved config, the identity of its data (every file it reads: path, bytes, a fingerprint),
// the model's parameter table and the units' step schedule. Ranks launched with different configs
// (mpirun's `-np 1 A : -np 1 B`), a different data file on one node, or another build would
// otherwise train on silently or die inside a collective with no word of the cause.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/config/run_config.h"
#include "engine/distributed/comm/communicator.h"

namespace zt {

// What a data file is for: the training batches, the validation loss, or turning tokens into text.
inline constexpr const char* kTrainSplit = "train";
inline constexpr const char* kValSplit = "val";
inline constexpr const char* kVocabSplit = "vocab";

// Every file the config's data section reads (token files or shards, a prepared folder's files, a
// vocabulary or tokenizer file, and the tokenizer.json beside the first training shard that a shard
// run reads where no key names one, with "found") as {"path", "bytes", "fingerprint", "split"} and, for a file
// longer than 128 KiB, "sampled_fingerprint", in the order the splits read them; the fingerprint is
// a crc32 of the file's first and last 64 KiB, the sampled one of 32 blocks of 4 KiB spread evenly
// between them. The embedded dataset has
// none (its text follows from data.embedded_chars and train.seed). A file that cannot be read is
// listed with bytes -1: opening it reports the error.
nlohmann::json data_identity(const RunConfig& config);
// The entries of data_identity whose split is `split` (the validation files': what `eval --val`
// compares), without reading the others.
nlohmann::json data_identity_of_split(const RunConfig& config, std::string_view split);
// A prepared dataset's folder (data.dataset, read where no token files are named) held shared in
// `holder` for the run, so that a prepare into it (which holds it exclusively) is refused while the
// run reads it; InputError naming the key where a prepare is writing it now (its files would change
// between the identity recorded and the data read, or be read half replaced).
void hold_prepared_dataset(const RunConfig& config, ckpt::FileHandle& holder);
// The data files as the run opened them are the ones `recorded` (data_identity before) names:
// InputError naming the first that changed in between (a program writing it as the run started),
// rather than a checkpoint recording files the run did not train on.
void check_data_unchanged(const RunConfig& config, const nlohmann::json& recorded);
// One file's entry as data_identity lists it ({"path", "bytes", "fingerprint"} and, past 128 KiB,
// "sampled_fingerprint"; bytes -1 where it cannot be read).
nlohmann::json file_identity(const std::string& path);
// Whether two entries are the same contents (a sampled fingerprint compared where both have one).
bool same_contents(const nlohmann::json& a, const nlohmann::json& b);
// The crc32 of the blocks between a file's ends, where its entry has one.
std::optional<std::uint32_t> sampled_fingerprint(const nlohmann::json& f);
// One entry's contents as messages and `ckpt inspect` show them: "N bytes, fingerprint X" and, where
// it has one, ", sampled Y" (its "bytes" and "fingerprint" checked by the caller where untrusted).
std::string describe_contents(const nlohmann::json& f);

// "key", "value" entries in a fixed order: "the zerotrain build" first, the resolved config
// flattened ("train.seed", "1337") but train.num_threads (a node's own), in deterministic CPU runs
// the BLAS kernels, one "data.file[i]" per data file, data.choice_file's contents where there is
// one, "model.param_table" and "model.schedule" (each unit's name and size, and the forward and
// backward unit calls).
using IdentityEntries = std::vector<std::pair<std::string, std::string>>;
IdentityEntries run_identity(const RunConfig& config, const nlohmann::json& data);

// The kernels deterministic mode's bits follow beside the config on this rank's device: on the CPU
// the BLAS kernels OpenBLAS picked (BlasDescription::kernels), on CUDA the GPU and its libraries
// (cuda_kernels_identity). Checkpoints and final.safetensors record them under
// run_kernels_key(device), and a deterministic resume on others says so.
std::string run_kernels(const RunConfig& config);
const char* run_kernels_key(Device device);  // "cpu_kernels" or "cuda_kernels"

// Collective, the run's first: one all-gather of a hash of every rank's entries. Where they differ
// (rare: a few more collectives), InputError on every rank naming the first entry that differs,
// its values and the ranks holding each, e.g. "ranks disagree on train.seed: 1337 on rank 0, 42 on
// rank 1".
void check_ranks_agree(Communicator& comm, const IdentityEntries& mine);

}  // namespace zt
