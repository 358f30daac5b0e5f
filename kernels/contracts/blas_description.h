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
};

}  // namespace zt
