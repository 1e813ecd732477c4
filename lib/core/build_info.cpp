#include "core/build_info.hpp"

#include "core/build_config.hpp"
#include "core/git_commit.hpp"

#include <cblas.h>
#include <fmt/format.h>

namespace optkit {

const BuildInfo&
build_info() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = OPTKIT_VERSION;
    b.git_commit = OPTKIT_GIT_COMMIT;
    b.build_type = OPTKIT_BUILD_TYPE;
    b.cuda = OPTKIT_HAVE_CUDA != 0;
    b.cuda_version = OPTKIT_CUDA_VERSION;
    b.cuda_architectures = OPTKIT_CUDA_ARCHITECTURES;
    // openblas_get_config() reports how the linked library itself was built.
    b.blas = fmt::format("{} (static)", openblas_get_config());
    b.sanitizers = OPTKIT_SANITIZE != 0;
    return b;
  }();
  return info;
}

std::string
version_text() {
  const BuildInfo& b = build_info();
  std::string text = fmt::format("optkit {}\ncommit: {}\nbuild type: {}{}\n", b.version, b.git_commit, b.build_type,
                                 b.sanitizers ? " (ASan+UBSan)" : "");
  text += b.cuda ? fmt::format("features: CUDA yes (toolkit {}, archs {}, runtime static, driver loaded at run time)\n",
                               b.cuda_version, b.cuda_architectures)
                 : "features: CUDA no (built without a CUDA compiler)\n";
  text += fmt::format("          BLAS {}\n", b.blas);
  return text;
}

} // namespace optkit
