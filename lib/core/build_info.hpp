// What this binary is: version, commit, build type and compiled-in features.
#pragma once

#include <string>

namespace optkit {

struct BuildInfo {
  std::string version;
  std::string git_commit;
  std::string build_type;
  bool cuda = false;
  std::string cuda_version;       // toolkit the cuda/ kernels were compiled with
  std::string cuda_architectures; // e.g. "80-real;90"
  std::string blas;               // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ... (static)"
  bool sanitizers = false;
};

const BuildInfo& build_info();

// Multi-line text for `optkit --version`.
std::string version_text();

} // namespace optkit
