// Measurements `optkit doctor` takes inside a worker child, so a broken driver or a crashing BLAS
// takes down the child and is reported, never the parent.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace optkit::doctor {

struct BlasCheck {
  double max_relative_error = 0; // sgemm against a naive triple loop
  double gflops = 0;             // sgemm throughput at n = 1024
  int threads = 0;
};

BlasCheck check_blas();

// The CPU runtime's kernels: what the CPU offers, which kernels run, and their throughput on a
// prefill-shaped product (128 x 2048 x 2048) beside the OpenBLAS paths they replace.
struct CpuKernelCheck {
  std::string isa;          // the relevant instruction sets found, e.g. "avx2 fma avx512f avx512_bf16"
  std::string row_dot;      // decode kernel: "avx2" or "portable"
  std::string bf16_prefill; // "avx512_bf16" (panel GEMM) or "widened sgemm"
  std::string f32_prefill;  // "avx512f" (panel GEMM) or "sgemm"
  double bf16_gflops = 0, bf16_widened_gflops = 0; // the runtime's BF16 product; widened + sgemm
  double f32_gflops = 0, f32_sgemm_gflops = 0;     // the runtime's F32 product; OpenBLAS sgemm
  double max_relative_error = 0;                   // of the runtime's products against float64
};

CpuKernelCheck check_cpu_kernels();

// Child side of the doctor: BLAS and CUDA probes as one JSON object.
nlohmann::json run_probes();

} // namespace optkit::doctor
