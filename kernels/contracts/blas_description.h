// Which OpenBLAS the CPU backend loaded and why (kernels/cpu/blas.h), for printouts: the engine
// reads it through kernels/compute_backend.h, never the CPU backend's headers.
#pragma once

#include <string>

namespace zt {

struct BlasDescription {
  std::string library_path;      // the file that was loaded
  std::string core_name;         // what OpenBLAS says it runs on (openblas_get_corename)
  std::string core_type_source;  // "user" (OPENBLAS_CORETYPE was set), "detected", or "library default"
  std::string config;            // openblas_get_config()
};

}  // namespace zt
