// OpenBLAS thread count for a scope. The runtime keeps BLAS single-threaded (it splits GEMMs over
// its own pool); compression's big one-off products (Hessians, GPTQ's lazy updates, Cholesky)
// run from one thread and want every core.
#pragma once

namespace optkit {

class ScopedBlasThreads {
public:
  explicit ScopedBlasThreads(int threads);
  ~ScopedBlasThreads();
  ScopedBlasThreads(const ScopedBlasThreads&) = delete;
  ScopedBlasThreads& operator=(const ScopedBlasThreads&) = delete;

private:
  int m_previous;
};

} // namespace optkit
