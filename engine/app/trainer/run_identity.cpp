// The run's identity and the ranks' agreement on it (see the header).
#include "engine/app/trainer/run_identity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/data/token_corpus.h"
#include "engine/app/trainer/trainer_state.h"
#include "engine/base/core/build_info.h"
#include "engine/base/core/check.h"
#include "kernels/compute_backend.h"
#include "models/model_family.h"

namespace zt {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kFingerprintBytes = 64 * 1024;  // read at each end of a file
// And between the ends: blocks spread evenly over the middle, so a file rewritten there at the
// same size (another tokenisation, other documents) is not taken for the same data.
constexpr std::int64_t kSampledBlocks = 32, kSampledBlockBytes = 4096;
constexpr std::size_t kRecordBytes = 512;  // a rank's first difference, as gathered
constexpr std::size_t kShownChars = 80;    // of a value, in the message
// An entry's "found": the tokenizer a run reads beside its first training shard where no key names
// one (recorded since 2026-12-07).
constexpr const char* kBesideFirstShard = "beside the first training shard";

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A file the data section reads, with its split; `found` where no key names it (the tokenizer
// beside the first training shard).
struct DataPath {
  std::string path;
  const char* split;
  const char* found = nullptr;
};

// The files the data section reads, in the order the splits read them.
std::vector<DataPath> data_paths(const DataConfig& d) {
  std::vector<DataPath> paths;
  if (!d.train_files.empty()) {
    for (const auto& [patterns, key, split] : {std::tuple{&d.train_files, "data.train_files", kTrainSplit},
                                               std::tuple{&d.val_files, "data.val_files", kValSplit}}) {
      for (const std::string& p : *patterns) {
        try {
          for (std::string& path : data::expand_pattern(p, key)) paths.push_back({std::move(path), split});
        } catch (const InputError&) {
          // Listed unreadable (bytes -1): the ranks still compare, so a pattern that matches on
          // some nodes only is named there; opening the data reports it on every rank.
          paths.push_back({p, split});
        }
      }
    }
    // The tokenizer a run reads where none is named (DataSource): the one beside its first training
    // shard. Recorded, so that a checkpoint knows the vocabulary it trained with after a later run
    // in its directory replaced the run directory's copy (checkpoint_vocabulary.h).
    if (!paths.empty() && paths.front().split == kTrainSplit && d.tokenizer_file.empty()) {
      std::error_code ec;
      const fs::path beside = fs::path(paths.front().path).parent_path() / "tokenizer.json";
      if (fs::exists(beside, ec)) paths.push_back({beside.string(), kVocabSplit, kBesideFirstShard});
    }
  } else if (!d.train_file.empty()) {
    paths = {{d.train_file, kTrainSplit}, {d.val_file, kValSplit}};
  } else if (d.reads_prepared_dataset()) {
    for (const auto& [name, split] : {std::pair{"train.bin", kTrainSplit}, std::pair{"val.bin", kValSplit},
                                      std::pair{"vocab.json", kVocabSplit}, std::pair{"tokenizer.json", kVocabSplit}}) {
      const fs::path p = fs::path(d.dataset) / name;
      if (std::string_view(name).ends_with(".bin") || fs::exists(p)) paths.push_back({p.string(), split});
    }
  }
  for (const std::string* extra : {&d.vocab_file, &d.tokenizer_file}) {
    if (!extra->empty()) paths.push_back({*extra, kVocabSplit});
  }
  return paths;
}

void flatten(const nlohmann::json& j, const std::string& prefix, IdentityEntries& out) {
  if (!j.is_object()) {
    out.emplace_back(prefix, j.dump());  // as JSON: a string quoted, a newline escaped (one line each)
    return;
  }
  for (const auto& [key, value] : j.items()) flatten(value, prefix.empty() ? key : prefix + "." + key, out);
}

std::string text_of(const IdentityEntries& entries) {
  std::string text;
  for (const auto& [key, value] : entries) text += key + '\t' + value + '\n';
  return text;
}

IdentityEntries parse(const std::string& text) {
  IdentityEntries out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at), tab = text.find('\t', at);
    if (end == std::string::npos || tab > end) break;
    out.emplace_back(text.substr(at, tab - at), text.substr(tab + 1, end - tab - 1));
    at = end + 1;
  }
  return out;
}

// `value` as a message shows it, kShownChars of it from a little before `differs_at` (where the
// values compared first differ): cut at kShownChars from its start, two values that differ past
// it read the same ("NVIDIA RTX 6000 Ada Generation (sm_89), CUDA runtime 12040, cuBLASLt ..."
// hid the library versions that differed).
std::string shown(const std::string& value, std::size_t differs_at) {
  if (value.size() <= kShownChars) return value;
  constexpr std::size_t kContext = 20;  // characters shown before the difference
  const std::size_t start = differs_at > kContext ? std::min(differs_at - kContext, value.size() - kShownChars) : 0;
  return (start > 0 ? "..." : "") + value.substr(start, kShownChars) +
         (start + kShownChars < value.size() ? "..." : "");
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

nlohmann::json file_identity(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);                                // fails for all but regular files
  if (ec) return {{"path", path}, {"bytes", -1}, {"fingerprint", std::uint32_t{0}}};  // opening the data names it
  std::ifstream in(path, std::ios::binary);  // after the size: a FIFO's open would block
  if (!in) return {{"path", path}, {"bytes", -1}, {"fingerprint", std::uint32_t{0}}};
  const std::int64_t bytes = static_cast<std::int64_t>(size), head = std::min(bytes, kFingerprintBytes);
  std::vector<char> buf(static_cast<std::size_t>(head));
  in.read(buf.data(), head);
  std::uint32_t crc = ckpt::crc32_update(0u, buf.data(), in.gcount());
  in.clear();
  in.seekg(bytes - head);
  in.read(buf.data(), head);
  crc = ckpt::crc32_update(crc, buf.data(), in.gcount());
  nlohmann::json identity = {{"path", path}, {"bytes", bytes}, {"fingerprint", crc}};
  const std::int64_t middle = bytes - 2 * kFingerprintBytes;
  if (middle > 0) {
    std::uint32_t sampled = 0;
    for (std::int64_t i = 0; i < kSampledBlocks; ++i) {
      const std::int64_t length = std::min(kSampledBlockBytes, middle);
      in.clear();
      in.seekg(kFingerprintBytes + (middle - length) * i / (kSampledBlocks - 1));
      in.read(buf.data(), length);
      sampled = ckpt::crc32_update(sampled, buf.data(), in.gcount());
    }
    identity["sampled_fingerprint"] = sampled;
  }
  return identity;
}

// The crc32 of the blocks between a file's ends, where its identity has one (a file longer than
// its two ends; one recorded before it was read is compared by its ends alone).
std::optional<std::uint32_t> sampled_fingerprint(const nlohmann::json& f) {
  if (!f.contains("sampled_fingerprint") || !f["sampled_fingerprint"].is_number_unsigned()) return std::nullopt;
  return f["sampled_fingerprint"].get<std::uint32_t>();
}

bool same_contents(const nlohmann::json& a, const nlohmann::json& b) {
  const std::optional<std::uint32_t> sa = sampled_fingerprint(a), sb = sampled_fingerprint(b);
  return a["bytes"] == b["bytes"] && a["fingerprint"] == b["fingerprint"] && (!sa || !sb || *sa == *sb);
}

std::string describe_contents(const nlohmann::json& f) {
  // An entry file_identity could not read (it printed as "-1 bytes, fingerprint 00000000").
  if (f["bytes"].get<std::int64_t>() < 0) return "gone or unreadable";
  const std::optional<std::uint32_t> sampled = sampled_fingerprint(f);
  return fmt::format("{} bytes, fingerprint {:08x}{}", f["bytes"].get<std::int64_t>(),
                     f["fingerprint"].get<std::uint32_t>(), sampled ? fmt::format(", sampled {:08x}", *sampled) : "");
}

namespace {

// data_identity's entries, of the split `only` alone where given.
nlohmann::json identity_of(const RunConfig& config, std::optional<std::string_view> only) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& [path, split, found] : data_paths(config.data)) {
    if (only && *only != split) continue;
    nlohmann::json f = file_identity(path);
    f["split"] = split;
    if (found != nullptr) f["found"] = found;
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace

nlohmann::json data_identity(const RunConfig& config) { return identity_of(config, std::nullopt); }

nlohmann::json data_identity_of_split(const RunConfig& config, std::string_view split) {
  return identity_of(config, split);
}

void hold_prepared_dataset(const RunConfig& config, ckpt::FileHandle& holder) {
  const DataConfig& d = config.data;
  if (!d.reads_prepared_dataset() || d.dataset.empty()) return;
  if (!ckpt::FileHandle::hold_shared(d.dataset, holder)) {
    throw_input_error(
        "config error in {}: data.dataset = \"{}\": a prepare is writing it now; start the run once it ends",
        config.sources_of({"data.dataset"}), d.dataset);
  }
}

void check_data_unchanged(const RunConfig& config, const nlohmann::json& recorded) {
  const nlohmann::json now = data_identity(config);
  // Files come or gone (a shard matching data.train_files, a vocab.json made): named by path.
  std::vector<std::string> before, after;
  for (const nlohmann::json& f : recorded) before.push_back(f["path"].get<std::string>());
  for (const nlohmann::json& f : now) after.push_back(f["path"].get<std::string>());
  const bool same_files = before == after;
  std::sort(before.begin(), before.end());
  std::sort(after.begin(), after.end());
  if (!same_files) {  // named by the files come and gone, not every path (thousands of shards)
    std::vector<std::string> gone, come;
    std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(gone));
    std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(come));
    throw_input_error(
        "the data files changed as the run started ({} come, {} gone{}{}): another program is writing them; start "
        "the run once they are written",
        come.size(), gone.size(), come.empty() ? "" : fmt::format("; first come: {}", come.front()),
        gone.empty() ? "" : fmt::format("; first gone: {}", gone.front()));
  }
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (!same_contents(recorded[i], now[i])) {
      throw_input_error(
          "data file {} changed as the run started ({} -> {}): another program is writing it; start the run "
          "once it is written",
          now[i]["path"].get<std::string>(), describe_contents(recorded[i]), describe_contents(now[i]));
    }
  }
}

std::string run_kernels(const RunConfig& config) {
  return config.device == Device::kCPU ? cpu_blas_description().kernels()
                                       : cuda_kernels_identity(rank_device_index(config));
}

const char* run_kernels_key(Device device) { return device == Device::kCPU ? "cpu_kernels" : "cuda_kernels"; }

IdentityEntries run_identity(const RunConfig& config, const nlohmann::json& data) {
  IdentityEntries out;
  // First, so that ranks of two builds are told so rather than by the first key whose default or
  // meaning changed between them.
  out.emplace_back("the zerotrain build", build_description());
  flatten(config.to_json(), "", out);
  std::erase_if(out, [](const auto& e) { return e.first == "train.num_threads"; });  // a node's own
  // Deterministic mode's bits follow the BLAS kernels too (OpenBLAS picks them by the CPU), and on
  // CUDA the GPU and its libraries (cuBLASLt's heuristic picks each product's algorithm by them):
  // ranks on nodes of two kinds compute other bits than one rank would, against the mode's promise.
  if (config.train.deterministic) {
    out.emplace_back(config.device == Device::kCPU
                         ? "the BLAS kernels (train.deterministic's bits follow them: export one "
                           "OPENBLAS_CORETYPE on every rank, or set train.deterministic = false)"
                         : "the GPU and its libraries (train.deterministic's bits follow them: run every rank "
                           "on one GPU model and one install, or set train.deterministic = false)",
                     run_kernels(config));
  }
  for (std::size_t i = 0; i < data.size(); ++i) {
    const nlohmann::json& f = data[i];
    out.emplace_back(fmt::format("data.file[{}]", i), fmt::format("{} ({})", f["path"].dump(), describe_contents(f)));
  }
  // The multiple-choice file each rank scores its share of: a rank reading another copy would run
  // a different number of forwards (a hang at stage 3) or mix two files' losses. Not part of the
  // data identity a checkpoint keeps: it does not change the trajectory.
  if (!config.data.choice_file.empty()) {
    const nlohmann::json f = file_identity(config.data.choice_file);
    out.emplace_back("data.choice_file's contents", describe_contents(f));
  }
  const ModelSpec spec = config.model_spec();
  const ParamTable table = build_param_table(spec);
  std::string units;
  for (const UnitSpec& u : table.units()) units += fmt::format("{}:{};", u.name, u.numel);
  out.emplace_back("model.param_table", fmt::format("{} units, {} parameters, hash {:016x}", table.units().size(),
                                                    table.total_numel(), fnv1a(units)));
  const StepSchedule schedule = step_schedule(spec, config.train.activation_checkpointing);
  std::string calls;
  for (const PassSchedule* pass : {&schedule.forward, &schedule.backward}) {
    for (const UnitEvent& e : *pass) calls += fmt::format("{}{} ", static_cast<int>(e.op), e.unit);
    calls += '|';
  }
  out.emplace_back("model.schedule", fmt::format("{} forward and {} backward unit calls, hash {:016x}",
                                                 schedule.forward.size(), schedule.backward.size(), fnv1a(calls)));
  return out;
}

void check_ranks_agree(Communicator& comm, const IdentityEntries& mine) {
  const int N = comm.world_size();
  if (N == 1) return;
  const std::string text = text_of(mine);
  const std::uint64_t hash = fnv1a(text);
  const std::vector<std::uint64_t> hashes = all_gather_values<std::uint64_t>(comm, {&hash, 1});
  if (std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t h) { return h == hashes[0]; })) return;

  // Rare: name what differs. Each rank finds its first entry (in rank 0's order) that differs from
  // rank 0's, and the ranks gather them.
  const IdentityEntries reference = parse(broadcast_string(comm, text));
  const std::map<std::string, std::string> own(mine.begin(), mine.end()), ref(reference.begin(), reference.end());
  std::string record;
  if (hash != hashes[0]) {
    for (const auto& [key, value] : reference) {
      const auto it = own.find(key);
      const std::string my = it == own.end() ? "(none)" : it->second;
      if (my != value) {
        record = key + '\t' + my;
        break;
      }
    }
    for (const auto& [key, value] : mine) {
      if (record.empty() && !ref.contains(key)) record = key + '\t' + value;
    }
  }
  std::vector<char> records(kRecordBytes * static_cast<std::size_t>(N));
  std::vector<char> own_record(kRecordBytes, '\0');
  std::memcpy(own_record.data(), record.data(), std::min(record.size(), kRecordBytes - 1));
  const std::int64_t words = kRecordBytes / 4;
  comm.all_gather(TensorView{own_record.data(), DType::kI32, Device::kCPU, Shape{words}},
                  TensorView{records.data(), DType::kI32, Device::kCPU, Shape{words * N}})
      .wait();
  // The first of the differing entries in rank 0's order (an entry rank 0 lacks: after them all).
  auto order = [&](const std::string& key) {
    for (std::size_t i = 0; i < reference.size(); ++i) {
      if (reference[i].first == key) return i;
    }
    return reference.size();
  };
  std::vector<std::pair<std::string, std::string>> firsts(static_cast<std::size_t>(N));
  std::string key;
  for (int r = 0; r < N; ++r) {
    const std::string rec(records.data() + kRecordBytes * r);
    const std::size_t tab = rec.find('\t');
    if (tab == std::string::npos) continue;
    firsts[r] = {rec.substr(0, tab), rec.substr(tab + 1)};
    if (key.empty() || order(firsts[r].first) < order(key)) key = firsts[r].first;
  }
  // Each rank's value of it: its own where that was its first difference, else rank 0's.
  const std::string ref_value = ref.contains(key) ? ref.at(key) : "(none)";
  std::vector<std::pair<std::string, std::vector<int>>> sides;
  for (int r = 0; r < N; ++r) {
    const std::string value = firsts[r].first == key ? firsts[r].second : ref_value;
    auto side = std::find_if(sides.begin(), sides.end(), [&](const auto& s) { return s.first == value; });
    if (side == sides.end()) side = sides.insert(sides.end(), {value, {}});
    side->second.push_back(r);
  }
  const std::string& first = sides.front().first;
  std::size_t differs_at = first.size();  // the values' common start
  for (const auto& [value, ranks] : sides) {
    const auto common = value.begin() + static_cast<std::ptrdiff_t>(std::min(value.size(), differs_at));
    differs_at = static_cast<std::size_t>(std::mismatch(value.begin(), common, first.begin()).first - value.begin());
  }
  std::string message = fmt::format("ranks disagree on {}:", key);
  for (std::size_t i = 0; i < sides.size(); ++i) {
    message +=
        fmt::format("{} {} on {}", i > 0 ? "," : "", shown(sides[i].first, differs_at), rank_list(sides[i].second));
  }
  fail_on_every_rank(
      comm,
      fmt::format("{} (every rank must run the same config, data and build; checked before the first step)", message),
      /*input_error=*/true);
}

}  // namespace zt
