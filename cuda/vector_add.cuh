// A first, deliberately simple kernel: z = a·x + y over float vectors. It proves the toolchain,
// the launch path and the host↔device copies on a real GPU (optkit doctor runs it).
#pragma once

#include <string>
#include <vector>

namespace optkit::cuda {

struct AxpyCheck {
  std::string error;               // empty when the kernel ran
  double max_abs_error = 0;        // against the same computation on the CPU
  double gigabytes_per_second = 0; // effective bandwidth of the kernel (3 vectors moved)
};

// Runs axpy on `device` over `n` elements and compares with the CPU result.
AxpyCheck run_axpy_check(int device, std::size_t n);

} // namespace optkit::cuda
