#include "core/blas_threads.hpp"

#include <cblas.h>

namespace optkit {

ScopedBlasThreads::ScopedBlasThreads(int threads) : m_previous(openblas_get_num_threads()) {
  openblas_set_num_threads(threads);
}

ScopedBlasThreads::~ScopedBlasThreads() {
  openblas_set_num_threads(m_previous);
}

} // namespace optkit
