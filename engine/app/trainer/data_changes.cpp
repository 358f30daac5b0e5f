// data_changes.h: a checkpoint's data identity against the files read now.
#include "engine/app/trainer/data_changes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <string_view>

namespace zt {

namespace {

// The differences between two lists of files (data_changes' rules).
std::vector<std::string> file_changes(const nlohmann::json& saved, const nlohmann::json& now) {
  // The same contents in the same order read through other paths (a relative path for an absolute
  // one, the data moved): the same batches, so no change.
  bool same_order = saved.size() == now.size();
  for (std::size_t i = 0; same_order && i < now.size(); ++i) same_order = same_contents(saved[i], now[i]);
  if (same_order) return {};
  std::vector<std::string> changes;
  const auto describe = describe_contents;
  auto path_of = [](const nlohmann::json& f) { return f["path"].get<std::string>(); };
  // Each file read now paired with the saved file it stands for: by its path; else (moved, or
  // named another way: relative for absolute) by its contents; else, changed and named another
  // way, by its file name. One change each, not a file gone and a file come.
  std::vector<int> match(now.size(), -1);
  std::vector<bool> paired(saved.size(), false);
  auto pair_by = [&](auto same) {
    for (std::size_t i = 0; i < now.size(); ++i) {
      for (std::size_t j = 0; j < saved.size() && match[i] < 0; ++j) {
        if (!paired[j] && same(saved[j], now[i])) {
          match[i] = static_cast<int>(j);
          paired[j] = true;
        }
      }
    }
  };
  auto same_name = [&](const nlohmann::json& a, const nlohmann::json& b) {
    return std::filesystem::path(path_of(a)).filename() == std::filesystem::path(path_of(b)).filename();
  };
  pair_by([&](const nlohmann::json& a, const nlohmann::json& b) { return path_of(a) == path_of(b); });
  // Moved: its contents and its name first, so that two files of equal contents pair by name.
  pair_by([&](const nlohmann::json& a, const nlohmann::json& b) { return same_contents(a, b) && same_name(a, b); });
  pair_by(same_contents);
  pair_by(same_name);
  for (std::size_t i = 0; i < now.size(); ++i) {
    const std::string path = path_of(now[i]);
    if (match[i] < 0) {
      changes.push_back(fmt::format("data file {}: not read by the saved run -> {}", path, describe(now[i])));
      continue;
    }
    const nlohmann::json& before = saved[static_cast<std::size_t>(match[i])];
    if (!same_contents(before, now[i])) {
      const std::string was = path_of(before) == path ? "" : fmt::format(" (saved as {})", path_of(before));
      changes.push_back(fmt::format("data file {}{}: {} -> {}", path, was, describe(before), describe(now[i])));
    }
  }
  for (std::size_t j = 0; j < saved.size(); ++j) {
    if (!paired[j]) {
      changes.push_back(fmt::format("data file {}: {} -> not read by this run", path_of(saved[j]), describe(saved[j])));
    }
  }
  if (changes.empty()) {  // every file the same, read in another order: other windows make each step
    std::vector<std::string> before, after;
    for (const nlohmann::json& f : saved) before.push_back(path_of(f));
    // A file whose contents another name held (moved and renamed, or names swapped) is named with
    // the saved one: the two lists could otherwise read alike.
    for (std::size_t i = 0; i < now.size(); ++i) {
      const std::string was = path_of(saved[static_cast<std::size_t>(match[i])]);
      after.push_back(same_name(saved[static_cast<std::size_t>(match[i])], now[i])
                          ? path_of(now[i])
                          : fmt::format("{} (saved as {})", path_of(now[i]), was));
    }
    changes.push_back(
        fmt::format("the order of the data files: {} -> {}", fmt::join(before, ", "), fmt::join(after, ", ")));
  }
  return changes;
}

// The entries of `files` whose split is in `splits`; all of them when `files` records no splits (a
// checkpoint from before they were).
nlohmann::json of_splits(const nlohmann::json& files, std::initializer_list<std::string_view> splits) {
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& f : files) {
    const std::string split = f.value("split", "");
    if (split.empty() || std::find(splits.begin(), splits.end(), split) != splits.end()) out.push_back(f);
  }
  return out;
}

// `now` without the files found where no key names them (entries with "found") where `saved`
// records none: an earlier build's identity, which did not list them, or one made before such a
// file was there (a tokenizer put beside the shards since decodes samples; losses stay comparable).
nlohmann::json without_unrecorded_found(const nlohmann::json& saved, const nlohmann::json& now) {
  const auto found = [](const nlohmann::json& f) { return f.contains("found"); };
  if (std::any_of(saved.begin(), saved.end(), found)) return now;
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& f : now) {
    if (!found(f)) out.push_back(f);
  }
  return out;
}

bool records_splits(const nlohmann::json& files) {
  return std::all_of(files.begin(), files.end(), [](const nlohmann::json& f) { return f.contains("split"); });
}

}  // namespace

std::vector<std::string> data_changes(const nlohmann::json& saved, const nlohmann::json& now) {
  if (!records_splits(saved)) return file_changes(saved, without_unrecorded_found(saved, now));
  return file_changes(of_splits(saved, {kTrainSplit}), of_splits(now, {kTrainSplit}));
}

std::vector<std::string> evaluation_data_changes(const nlohmann::json& saved, const nlohmann::json& now) {
  if (!records_splits(saved)) return {};
  return file_changes(of_splits(saved, {kValSplit, kVocabSplit}),
                      of_splits(without_unrecorded_found(saved, now), {kValSplit, kVocabSplit}));
}

std::vector<std::string> validation_data_changes(const nlohmann::json& saved, const nlohmann::json& now) {
  const nlohmann::json val_now = of_splits(now, {kValSplit});
  if (records_splits(saved)) return file_changes(of_splits(saved, {kValSplit}), val_now);
  // An identity from before splits were recorded lists every file the run read, validation ones
  // among them: each validation file read now against the saved entry of its path, else of its
  // name (the data moved). A changed val.bin was scored against the run's logged val_loss unsaid.
  nlohmann::json val_saved = nlohmann::json::array();
  for (const nlohmann::json& f : val_now) {
    const auto name_of = [](const nlohmann::json& e) {
      return std::filesystem::path(e["path"].get<std::string>()).filename();
    };
    // By path; else (moved) by name and contents, so that a training shard of the same name
    // (train/000000.bin beside val/000000.bin) is not taken for it; else by name (changed too).
    auto it = std::find_if(saved.begin(), saved.end(), [&](const nlohmann::json& s) { return s["path"] == f["path"]; });
    if (it == saved.end()) {
      it = std::find_if(saved.begin(), saved.end(),
                        [&](const nlohmann::json& s) { return name_of(s) == name_of(f) && same_contents(s, f); });
    }
    if (it == saved.end()) {
      it = std::find_if(saved.begin(), saved.end(), [&](const nlohmann::json& s) { return name_of(s) == name_of(f); });
    }
    if (it == saved.end()) {
      return {fmt::format("data file {}: not read by the saved run -> {}", f["path"].get<std::string>(),
                          describe_contents(f))};
    }
    val_saved.push_back(*it);
  }
  return file_changes(val_saved, val_now);
}

bool vocabulary_changed(const nlohmann::json& saved, const nlohmann::json& now) {
  return records_splits(saved) &&
         !file_changes(of_splits(saved, {kVocabSplit}), of_splits(without_unrecorded_found(saved, now), {kVocabSplit}))
              .empty();
}

}  // namespace zt
