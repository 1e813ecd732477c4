// Measurements `optkit doctor` takes inside a worker child, so a broken driver or a crashing BLAS
// takes down the child and is reported, never the parent.
#pragma once

#include <nlohmann/json.hpp>

namespace optkit::doctor {

struct BlasCheck {
  double max_relative_error = 0; // sgemm against a naive triple loop
  double gflops = 0;             // sgemm throughput at n = 1024
  int threads = 0;
};

BlasCheck check_blas();

// Child side of the doctor: BLAS and CUDA probes as one JSON object.
nlohmann::json run_probes();

} // namespace optkit::doctor
