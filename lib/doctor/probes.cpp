#include "doctor/probes.hpp"

#include "doctor/gpu_probe.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
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

nlohmann::json
run_probes() {
  const BlasCheck blas = check_blas();
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
      {"gpu", to_json(gpus)},
      {"kernels", kernels}};
}

} // namespace optkit::doctor
