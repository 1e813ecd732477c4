#include "doctor/probes.hpp"

#include "core/thread_pool.hpp"
#include "doctor/gpu_probe.hpp"
#include "model/dtype.hpp"
#include "runtime/dot_rows.hpp"
#include "runtime/linear_weight.hpp"
#include "runtime/panel_gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace optkit::doctor {
namespace {

std::vector<float>
random_matrix(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> m(n * n);
  for (auto& v : m) {
    v = dist(rng);
  }
  return m;
}

void
sgemm(std::size_t n, const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c) {
  const auto dim = static_cast<blasint>(n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim, dim, dim, 1.0f, a.data(), dim, b.data(), dim, 0.0f,
              c.data(), dim);
}

} // namespace

BlasCheck
check_blas() {
  BlasCheck check;
  check.threads = openblas_get_num_threads();
  std::mt19937 rng(42);
  {
    const std::size_t n = 96;
    const auto a = random_matrix(n, rng);
    const auto b = random_matrix(n, rng);
    std::vector<float> c(n * n);
    sgemm(n, a, b, c);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        double reference = 0;
        double magnitude = 0;
        for (std::size_t k = 0; k < n; ++k) {
          const double product = static_cast<double>(a[i * n + k]) * static_cast<double>(b[k * n + j]);
          reference += product;
          magnitude += std::fabs(product);
        }
        check.max_relative_error =
            std::max(check.max_relative_error,
                     std::fabs(static_cast<double>(c[i * n + j]) - reference) / std::max(magnitude, 1e-30));
      }
    }
  }
  {
    const std::size_t n = 1024;
    const auto a = random_matrix(n, rng);
    const auto b = random_matrix(n, rng);
    std::vector<float> c(n * n);
    sgemm(n, a, b, c); // warm-up: thread pool start, page faults
    const int repeats = 3;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) {
      sgemm(n, a, b, c);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    check.gflops = 2.0 * std::pow(static_cast<double>(n), 3) * repeats / seconds / 1e9;
  }
  return check;
}

CpuKernelCheck
check_cpu_kernels() {
  CpuKernelCheck check;
#if defined(__x86_64__)
  const std::pair<const char*, bool> features[] = {{"avx2", __builtin_cpu_supports("avx2")},
                                                   {"fma", __builtin_cpu_supports("fma")},
                                                   {"avx512f", __builtin_cpu_supports("avx512f")},
                                                   {"avx512_vnni", __builtin_cpu_supports("avx512vnni")},
                                                   {"avx512_bf16", __builtin_cpu_supports("avx512bf16")}};
  for (const auto& [name, present] : features)
    if (present)
      check.isa += (check.isa.empty() ? "" : " ") + std::string(name);
#endif
  if (check.isa.empty())
    check.isa = "none of avx2/avx512";
  check.row_dot = runtime::dot_rows_kernel();
  check.bf16_prefill =
      runtime::panel_gemm_supported(runtime::PanelProduct::bf16_split) ? "avx512_bf16" : "widened sgemm";
  check.f32_prefill = runtime::panel_gemm_supported(runtime::PanelProduct::f32) ? "avx512f" : "sgemm";

  const std::int64_t m = 128, rows = 2048, cols = 2048;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::uint16_t> w16(static_cast<std::size_t>(rows * cols));
  std::vector<float> w32(w16.size());
  for (std::size_t i = 0; i < w16.size(); ++i) {
    w16[i] = model::float_to_bf16(dist(rng));
    w32[i] = model::bf16_to_float(w16[i]); // the same values, so one reference serves both
  }
  std::vector<float> x(static_cast<std::size_t>(m * cols)), y(static_cast<std::size_t>(m * rows));
  for (auto& v : x)
    v = dist(rng);
  const auto bf16 = runtime::make_dense_weight(model::DType::bf16, std::as_bytes(std::span(w16)), rows, cols);
  const auto f32 = runtime::make_dense_weight(model::DType::f32, std::as_bytes(std::span(w32)), rows, cols);
  ThreadPool pool(0);
  // The runtime's answer against float64 on a few outputs.
  const auto worst_error = [&] {
    double worst = 0;
    for (std::int64_t i = 0; i < m; i += 17)
      for (std::int64_t r = 0; r < rows; r += 101) {
        double want = 0, magnitude = 0;
        for (std::int64_t c = 0; c < cols; ++c) {
          const double p = static_cast<double>(w32[static_cast<std::size_t>(r * cols + c)]) *
                           static_cast<double>(x[static_cast<std::size_t>(i * cols + c)]);
          want += p;
          magnitude += std::fabs(p);
        }
        worst = std::max(worst,
                         std::fabs(static_cast<double>(y[static_cast<std::size_t>(i * rows + r)]) - want) / magnitude);
      }
    return worst;
  };
  const auto gflops = [&](auto&& multiply) {
    multiply(); // warm-up
    const auto start = std::chrono::steady_clock::now();
    multiply();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return 2.0 * static_cast<double>(m * rows * cols) / seconds / 1e9;
  };
  check.bf16_widened_gflops = gflops([&] { runtime::multiply_widened(*bf16, x.data(), m, y.data(), pool); });
  check.f32_sgemm_gflops =
      gflops([&] { runtime::multiply_fp32_rows(w32.data(), rows, cols, x.data(), m, y.data(), pool); });
  check.bf16_gflops = gflops([&] { bf16->multiply(x.data(), m, y.data(), pool); });
  check.max_relative_error = worst_error();
  check.f32_gflops = gflops([&] { f32->multiply(x.data(), m, y.data(), pool); });
  check.max_relative_error = std::max(check.max_relative_error, worst_error());
  return check;
}

nlohmann::json
run_probes() {
  const BlasCheck blas = check_blas();
  const CpuKernelCheck cpu = check_cpu_kernels();
  const GpuProbe gpus = probe_gpus();
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& device : gpus.devices) {
    const KernelSelfTest test = run_kernel_self_test(device.index);
    kernels.push_back({{"device", device.index},
                       {"ran", test.ran},
                       {"error", test.error},
                       {"max_abs_error", test.max_abs_error},
                       {"gigabytes_per_second", test.gigabytes_per_second},
                       {"decode_attention_error", test.decode_attention_error},
                       {"decode_attention_max_error", test.decode_attention_max_error}});
  }
  return {
      {"blas", {{"max_relative_error", blas.max_relative_error}, {"gflops", blas.gflops}, {"threads", blas.threads}}},
      {"cpu_kernels",
       {{"isa", cpu.isa},
        {"row_dot", cpu.row_dot},
        {"bf16_prefill", cpu.bf16_prefill},
        {"f32_prefill", cpu.f32_prefill},
        {"bf16_gflops", cpu.bf16_gflops},
        {"bf16_widened_gflops", cpu.bf16_widened_gflops},
        {"f32_gflops", cpu.f32_gflops},
        {"f32_sgemm_gflops", cpu.f32_sgemm_gflops},
        {"max_relative_error", cpu.max_relative_error}}},
      {"gpu", to_json(gpus)},
      {"kernels", kernels}};
}

} // namespace optkit::doctor
