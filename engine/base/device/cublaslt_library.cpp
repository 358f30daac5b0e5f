// Opening cuBLASLt at run time ([Note: cuBLASLt opened on first use]).
#include "engine/base/device/cublaslt_library.h"

#include <dlfcn.h>

#include <atomic>
#include <string>

#include "engine/base/core/check.h"

// The build's toolkit names both (CMake): the soname of its major version, and the directory it
// was found in, tried after the loader's own search (LD_LIBRARY_PATH, the binary's run path, the
// system's cache) where that finds nothing.
#ifndef ZT_CUBLASLT_SONAME
#error "ZT_CUBLASLT_SONAME must name the toolkit's libcublasLt soname"
#endif
#ifndef ZT_CUBLASLT_DIR
#error "ZT_CUBLASLT_DIR must name the toolkit's library directory"
#endif

namespace zt::cuda {

namespace {

std::atomic<bool> opened{false};

struct Loaded {
  CublasLt api{};
  std::string error;  // empty when every entry point was found
};

// dlsym's `name` from `handle` into `slot`; where it is missing, `error` names the first such.
template <typename Fn>
void resolve(void* handle, const char* name, Fn& slot, std::string& error) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot == nullptr && error.empty()) error = std::string(ZT_CUBLASLT_SONAME " has no ") + name;
}

Loaded open_library() {
  Loaded l;
  const std::string fallback = std::string(ZT_CUBLASLT_DIR) + "/" + ZT_CUBLASLT_SONAME;
  void* handle = dlopen(ZT_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* first = dlerror();
    const std::string first_error = first != nullptr ? first : "no reason given";
    handle = dlopen(fallback.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* second = dlerror();
      l.error = "cannot open " ZT_CUBLASLT_SONAME " (the CUDA matrix products need it): " + first_error + "; " +
                (second != nullptr ? second : fallback + ": no reason given");
      return l;
    }
  }
  CublasLt& a = l.api;
  std::string& e = l.error;
  // Every entry point is looked up (the first missing one is named), none called yet.
  resolve(handle, "cublasLtCreate", a.create, e);
  resolve(handle, "cublasLtDestroy", a.destroy, e);
  resolve(handle, "cublasLtGetStatusName", a.get_status_name, e);
  resolve(handle, "cublasLtGetStatusString", a.get_status_string, e);
  resolve(handle, "cublasLtMatmul", a.matmul, e);
  resolve(handle, "cublasLtMatmulDescCreate", a.matmul_desc_create, e);
  resolve(handle, "cublasLtMatmulDescDestroy", a.matmul_desc_destroy, e);
  resolve(handle, "cublasLtMatmulDescSetAttribute", a.matmul_desc_set_attribute, e);
  resolve(handle, "cublasLtMatrixLayoutCreate", a.matrix_layout_create, e);
  resolve(handle, "cublasLtMatrixLayoutDestroy", a.matrix_layout_destroy, e);
  resolve(handle, "cublasLtMatrixLayoutSetAttribute", a.matrix_layout_set_attribute, e);
  resolve(handle, "cublasLtMatmulPreferenceCreate", a.matmul_preference_create, e);
  resolve(handle, "cublasLtMatmulPreferenceDestroy", a.matmul_preference_destroy, e);
  resolve(handle, "cublasLtMatmulPreferenceSetAttribute", a.matmul_preference_set_attribute, e);
  resolve(handle, "cublasLtMatmulAlgoGetHeuristic", a.matmul_algo_get_heuristic, e);
  resolve(handle, "cublasLtMatmulAlgoCheck", a.matmul_algo_check, e);
  resolve(handle, "cublasLtMatmulAlgoCapGetAttribute", a.matmul_algo_cap_get_attribute, e);
  resolve(handle, "cublasLtGetVersion", a.get_version, e);
  // The handle stays open for the process's life: the kernels hold its functions until exit.
  opened.store(true, std::memory_order_release);
  return l;
}

}  // namespace

const CublasLt& cublaslt() {
  static const Loaded loaded = open_library();
  if (!loaded.error.empty()) throw_runtime_error("{}", loaded.error);
  return loaded.api;
}

bool cublaslt_opened() { return opened.load(std::memory_order_acquire); }

}  // namespace zt::cuda
