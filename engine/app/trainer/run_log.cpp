// MetricsLog, ProgressPrinter and the op profile's report.
#include "engine/app/trainer/run_log.h"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/launch/rendezvous.h"
#include "kernels/op_profiler.h"

namespace zt {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  // A rewrite (drop_records_after_step) killed before its rename left its staging file: the run
  // directory's lock is this run's now, so nothing else writes it.
  std::error_code ec;
  if (std::filesystem::is_regular_file(path_, ec)) {
    std::filesystem::remove(staging_path(ckpt::rename_target(path_, "metrics file")), ec);
  }
  open_file(/*truncate=*/false);
}

void MetricsLog::open_file(bool truncate) {
  // Not blocking in the open: a FIFO without a reader is refused (ENXIO) rather than waited on; one
  // with a reader (a pipe, /dev/stdout into one) is written as any file. Appending, truncated or not:
  // each record lands at the file's end, also after another run's (write_while takes ours back).
  const int fd =
      ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_APPEND | (truncate ? O_TRUNC : 0), 0644);
  if (fd < 0 && errno == ENXIO) {
    throw_input_error("metrics file {}: is a FIFO that nothing reads, whose open would wait; give a regular file",
                      path_);
  }
  // What the path is (a folder, a file the user may not write): the run directory's fault, exit 2.
  if (fd < 0 && (errno == EISDIR || errno == EACCES || errno == EROFS || errno == ENOTDIR || errno == ELOOP)) {
    throw_input_error("cannot open metrics file '{}' for writing: {}", path_, std::strerror(errno));
  }
  if (fd < 0) throw_runtime_error("cannot open metrics file '{}' for writing: {}", path_, std::strerror(errno));
  struct stat st {};
  regular_ = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  file_ = ::fdopen(fd, "a");
  if (file_ == nullptr) {
    ::close(fd);
    throw_runtime_error("cannot open metrics file '{}' for writing: {}", path_, std::strerror(errno));
  }
}

void MetricsLog::set_aside_file() {
  if (!regular_) return;
  set_aside_ = keep_aside(path_, "metrics file");
}

void MetricsLog::start_afresh() {
  std::fclose(file_);
  file_ = nullptr;
  set_aside_file();
  open_file(/*truncate=*/true);
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) { write_line(line_of(record)); }

std::string MetricsLog::line_of(const nlohmann::json& record) {
  // A sample of a byte-level vocabulary may cut a character short: its invalid bytes are written as
  // U+FFFD (what Hugging Face's decode gives), not a reason to end the run.
  return record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void MetricsLog::write_line(const std::string& line) {
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    throw_runtime_error("write to metrics file '{}' failed: {}", path_, std::strerror(errno));
  }
}

void MetricsLog::write_while(const nlohmann::json& record, const std::function<bool()>& still_ours) {
  const std::string line = line_of(record);
  write_line(line);
  if (!regular_ || still_ours()) return;
  // Appended and flushed: the offset is the record's end. Only a record that still ends the file is
  // cut off: a record the taker wrote after it (or, had this process been stopped before its
  // write, before it) is the taker's, never cut with it.
  const int fd = ::fileno(file_);
  const off_t end = ::lseek(fd, 0, SEEK_CUR);
  const auto size = static_cast<off_t>(line.size());
  struct stat st {};
  if (end >= size && ::fstat(fd, &st) == 0 && st.st_size == end && ::ftruncate(fd, end - size) != 0) {
    throw_runtime_error("cannot take a record back out of metrics file '{}': {}", path_, std::strerror(errno));
  }
}

void MetricsLog::sync() {
  if (std::fflush(file_) != 0 || (regular_ && ::fsync(::fileno(file_)) != 0)) {
    throw_runtime_error("cannot sync metrics file '{}' to disk: {}", path_, std::strerror(errno));
  }
}

void MetricsLog::each_line(const std::function<bool(const std::string&, bool)>& visit) const {
  std::fflush(file_);
  // A file that cannot be read is refused, not taken as empty: a resume would keep the records it
  // repeats (the steps after its checkpoint twice in the log), or take its own log for another's.
  std::ifstream in(path_, std::ios::binary);
  std::error_code gone;
  if (!in && std::filesystem::exists(path_, gone)) {
    throw_input_error("cannot read metrics file '{}' to continue it: {}", path_, std::strerror(errno));
  }
  for (std::string line; std::getline(in, line);) {
    if (!visit(line, in.eof())) return;  // eof: no newline after it
  }
  if (in.bad()) throw_input_error("cannot read metrics file '{}' to continue it", path_);
}

namespace {

// Whether drop_records_after_step drops `line`: a last line without its newline is a record cut
// short by a kill (the next record would be glued onto it); a summary's step is its last_step (a
// later one ended the trajectory dropped).
bool past_step(const nlohmann::json& record, bool torn, std::int64_t step) {
  if (torn) return true;
  const char* key = record.is_object() && record.contains("last_step") ? "last_step" : "step";
  return record.is_object() && record.contains(key) && record[key].is_number_integer() &&
         record[key].get<std::int64_t>() > step;
}

}  // namespace

MetricsLog::AtStep MetricsLog::read_at_step(std::int64_t step, const std::vector<std::string>& save_ids) const {
  AtStep at;
  if (!regular_) return at;  // a pipe or a device keeps nothing to read back
  each_line([&](const std::string& line, bool torn) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    at.past += past_step(record, torn, step) ? 1 : 0;
    if (!record.is_object()) return true;
    if (record.contains("step") && record["step"].is_number_integer() && record["step"].get<std::int64_t>() == step) {
      at.any_record = true;
      if (!torn && record.contains("type") && record["type"].is_string()) {
        at.kept_types.insert(record["type"].get<std::string>());
      }
    }
    if (record.contains("save_id") && record["save_id"].is_string()) {
      const std::string& id = record["save_id"].get_ref<const std::string&>();
      if (std::find(save_ids.begin(), save_ids.end(), id) != save_ids.end()) {
        at.save_ids.insert(id);
      } else if (record.contains("step") && record["step"] == step) {
        at.other_save = true;
      }
    }
    return true;
  });
  return at;
}

int MetricsLog::drop_records_after_step(std::int64_t step, int past) {
  if (!regular_) return 0;
  auto dropped_line = [step](const std::string& line, bool torn) {
    return past_step(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false), torn, step);
  };
  // Line by line (a log of a long fast run is gigabytes: never whole in memory).
  if (past > 0) {
    // Through a symlink, the file it names is rewritten (a rename over the link would replace it).
    const std::string target = ckpt::rename_target(path_, "metrics file");
    const std::string temp = staging_path(target);
    std::FILE* out = std::fopen(temp.c_str(), "w");
    if (out == nullptr) throw_runtime_error("cannot rewrite metrics file '{}': {}", temp, std::strerror(errno));
    bool written = true;
    each_line([&](const std::string& line, bool torn) {
      if (!dropped_line(line, torn)) {
        written = std::fwrite(line.data(), 1, line.size(), out) == line.size() && std::fputc('\n', out) != EOF;
      }
      return written;
    });
    // Durable before it replaces the log (a crash then leaves the old file or the whole new one).
    written = written && std::fflush(out) == 0 && ::fsync(fileno(out)) == 0;
    written = std::fclose(out) == 0 && written;
    if (!written) {
      const int err = errno;
      std::remove(temp.c_str());
      throw_runtime_error("cannot rewrite metrics file '{}': {}", temp, std::strerror(err));
    }
    std::error_code ec;
    std::filesystem::rename(temp, target, ec);
    if (ec) throw_runtime_error("cannot replace metrics file '{}': {}", target, ec.message());
    const std::filesystem::path parent = std::filesystem::path(target).parent_path();
    ckpt::sync_dir(parent.empty() ? "." : parent.string());  // the rename, durable as the file is
  }
  std::fclose(file_);  // reopened on the file the rename put in place
  file_ = nullptr;
  open_file(/*truncate=*/false);
  return past;
}

namespace {

// `line` in at most `columns` bytes (its text is ASCII): its " | "-separated fields dropped from the
// end, the ETA kept (what a user watching a long run reads first), then cut.
std::string fit_to_columns(const std::string& line, std::size_t columns) {
  if (line.size() <= columns) return line;
  constexpr std::string_view kSep = " | ";
  std::vector<std::string> fields;
  for (std::size_t at = 0;;) {
    const std::size_t next = line.find(kSep, at);
    fields.push_back(line.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + kSep.size();
  }
  const auto joined = [&] {
    std::string text;
    for (const std::string& f : fields) text += (text.empty() ? "" : std::string(kSep)) + f;
    return text;
  };
  std::string text = joined();
  for (std::size_t i = fields.size(); text.size() > columns && i-- > 1;) {
    if (fields[i].starts_with("eta ")) continue;
    fields.erase(fields.begin() + static_cast<std::ptrdiff_t>(i));
    text = joined();
  }
  return text.substr(0, columns);
}

}  // namespace

ProgressPrinter::ProgressPrinter(const std::string& mode, int every_steps)
    // Under mpirun stdout is the launcher's pseudo-terminal, not the user's: "auto" is plain there.
    : live_(mode == "live" || (mode == "auto" && isatty(STDOUT_FILENO) == 1 && !launched_by_mpi())),
      quiet_(mode == "quiet"),
      every_steps_(every_steps) {}

ProgressPrinter::~ProgressPrinter() {
  if (line_open_) print_out("\n");
}

void ProgressPrinter::step(int step, int total_steps, const std::string& line) {
  if (quiet_) return;
  if (live_) {
    // A line wider than the terminal wraps, and the carriage return goes back to its last row only:
    // every step left the rows above behind (136 characters at stage 0, 150 at stage 3, against 80
    // columns). Fitted to the terminal's width, read at each step (a window may be resized); the
    // last column stays free (a line that fills it wraps on some terminals).
    winsize size{};
    const bool sized = ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 1;
    // Carriage return, the line, then clear what a longer old line left.
    print_out("\r{}\x1b[K", sized ? fit_to_columns(line, size.ws_col - 1u) : line);
    std::fflush(stdout);
    line_open_ = true;
    return;
  }
  if (step % every_steps_ == 0 || step == total_steps) {
    print_out("{}\n", line);
    std::fflush(stdout);
  }
}

void ProgressPrinter::message(const std::string& text) {
  if (quiet_) return;
  if (line_open_) {
    print_out("\n");
    line_open_ = false;
  }
  print_out("{}\n", text);
  std::fflush(stdout);
}

void report_op_profile(const OpProfiler& profiler, const std::string& path, nlohmann::json about,
                       ProgressPrinter& progress) {
  nlohmann::json j = profiler.to_json();
  j.update(about);
  // Step time not inside any timed op: every wait and every piece of host work of the step.
  j["outside_ops_holds"] =
      "communication (the parameter store's collectives and waits, the loss all-reduce), data loading, buffer "
      "allocation, the parameter store's and optimizer's host bookkeeping; on CUDA also the gaps between kernels "
      "when the host launches slower than the device runs";
  try {
    // Through a symlink, the file it names (a rename over the link would replace it).
    ckpt::write_file_atomically(ckpt::rename_target(path, "op profile"), j.dump(1) + "\n");
  } catch (const std::exception& e) {
    throw_runtime_error("cannot write the op profile (the run's weights and checkpoints are written): {}", e.what());
  }
  if (profiler.steps() == 0) {
    progress.message(fmt::format("op profile: no step after the warm-up step to profile; {} lists no ops", path));
    return;
  }
  progress.message(fmt::format("op profile over {} step(s) after {} warm-up step(s), {}: {} ({})\n{}", profiler.steps(),
                               j.value("warmup_steps_excluded", 0), j.value("timing", std::string()), path,
                               j.value("device", std::string()), profiler.format_table()));
}

}  // namespace zt
