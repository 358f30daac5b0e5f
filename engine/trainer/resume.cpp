// Resolving `--resume` on rank 0 and sharing the choice with the other ranks.
#include "engine/trainer/resume.h"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "engine/checkpoint/checkpoint_folder.h"
#include "engine/checkpoint/checkpoint_manifest.h"
#include "engine/checkpoint/checkpoint_reader.h"
#include "engine/core/check.h"

namespace zt {

std::string resolve_resume_checkpoint(Communicator& comm, const std::string& arg, const std::string& checkpoint_folder) {
  const bool latest = arg == "latest";
  const std::string where = latest ? checkpoint_folder : arg;
  // What rank 0 tells the others: the step of the chosen checkpoint (-1: none) and whether it is
  // `where` itself (a checkpoint directory given by path) or where/step_XXXXXXXX.
  std::int32_t choice[2] = {-1, 0};
  std::string path, error;
  if (comm.rank() == 0) {
    try {
      if (latest && !std::filesystem::is_directory(where)) {
        throw_input_error("--resume latest: no checkpoint to resume from (checkpoint folder '{}' does not exist)", where);
      }
      const ckpt::ResolvedCheckpoint resolved = ckpt::resolve_checkpoint(where, ckpt::Validation::kChecksums);
      for (const std::string& note : resolved.notes) fmt::print("resume: {}\n", note);
      path = resolved.path;
      const std::int64_t step = ckpt::CheckpointReader(path).manifest().position.step;
      ZT_CHECK(step >= 0 && step <= INT32_MAX, "checkpoint step {} out of range", step);
      choice[0] = static_cast<std::int32_t>(step);
      choice[1] = path == where ? 1 : 0;
    } catch (const InputError& e) {
      error = e.what();
    }
  }
  std::vector<std::int32_t> all(2 * static_cast<std::size_t>(comm.world_size()));
  comm.all_gather(TensorView{choice, DType::kI32, Device::kCPU, Shape{2}},
                  TensorView{all.data(), DType::kI32, Device::kCPU, Shape{2 * comm.world_size()}})
      .wait();
  if (comm.rank() == 0) {
    if (!error.empty()) throw InputError(error);
    return path;
  }
  if (all[0] < 0) throw_input_error("--resume {}: rank 0 found no usable checkpoint (see its error)", arg);
  return all[1] == 1 ? where : (std::filesystem::path(where) / ckpt::step_dir_name(all[0])).string();
}

}  // namespace zt
