// Which OpenBLAS the CPU backend loaded and why (kernels/cpu/blas.h), for printouts: the engine
// reads it through kernels/compute_backend.h, never the CPU backend's headers.
#pragma once

#include <string>

namespace zt {

struct BlasDescription {
  std::string library_path;  // the file that was loaded
  std::string core_name;     // what OpenBLAS says it runs on (openblas_get_corename)
  // "user" (OPENBLAS_CORETYPE was set, and taken), "OPENBLAS_CORETYPE=X not taken by OpenBLAS" (a name
  // it does not know: it detected the core itself), "detected", or "library default"
  std::string core_type_source;
  std::string config;  // openblas_get_config()

  // The kernels a product's bits follow: OpenBLAS picks them by the CPU (or OPENBLAS_CORETYPE), and
  // two picks (or two versions) round a product differently in its last bits, also in deterministic
  // mode's blocks. "SkylakeX (OpenBLAS 0.3.21)": the core and the config's first two words.
  std::string kernels() const {
    const std::size_t version_end = config.find(' ', config.find(' ') + 1);
    return core_name + " (" + config.substr(0, version_end) + ")";
  }
};

}  // namespace zt
