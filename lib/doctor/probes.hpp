// Measurements `optkit doctor` takes inside a worker child, so a broken driver or a crashing BLAS
// takes down the child and is reported, never the parent.
#pragma once

#include "core/thread_pool.hpp"

#include <nlohmann/json.hpp>
#include <span>
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
  std::string row_dot;      // decode kernel, as runtime::dot_rows_kernel() names it
  std::string bf16_prefill; // runtime::bf16_gemm_kernel_name()
  std::string attention;    // runtime::attention_kernel(): attention and SiLU
  std::string f32_prefill;  // "avx512f, activations transposed", "avx512f" (panel GEMM) or "sgemm"
  double bf16_gflops = 0, bf16_widened_gflops = 0; // the runtime's BF16 product; widened + sgemm
  double bf16_rounded_gflops = 0;                  // the same with --activations bf16
  double f32_gflops = 0, f32_sgemm_gflops = 0;     // the runtime's F32 product; OpenBLAS sgemm
  std::string w8a8;                                // "avx512_vnni integers" or "fp32 fake-quantized"
  double w8a8_gflops = 0;                          // the runtime's W8A8 product
  std::string delta_product;     // served deltas' decode: "<kernel> integers" (delta_int8.hpp) or "fp32 decode"
  double max_relative_error = 0; // of the runtime's products against float64
  double stream_mib = 0;         // bytes the two below stream (2.5x the L3 cache)
  double read_gbps = 0;          // STREAM-style read bandwidth, all threads
  double bf16_decode_gbps = 0, f32_decode_gbps = 0; // one activation row against those bytes as W
};

CpuKernelCheck check_cpu_kernels();

// Bytes an array must span to stream from memory rather than the last-level cache: 2.5x the L3
// cache (this machine's is 480 MiB), at least 256 MiB.
std::size_t streaming_bytes();

// STREAM-style read bandwidth in GB/s: the pool's threads sum their shares of `data`, best of 5.
double read_bandwidth_gbps(std::span<const std::uint64_t> data, ThreadPool& pool);

// Child side of the doctor: BLAS and CUDA probes as one JSON object.
nlohmann::json run_probes();

} // namespace optkit::doctor
