#include "doctor/probes.hpp"

#include "core/thread_pool.hpp"
#include "doctor/gpu_probe.hpp"
#include "model/dtype.hpp"
#include "quant/quant_args.hpp"
#include "runtime/delta_int8.hpp"
#include "runtime/dot_rows.hpp"
#include "runtime/int8_gemm.hpp"
#include "runtime/kernels.hpp"
#include "runtime/linear_weight.hpp"
#include "runtime/panel_gemm.hpp"
#include "runtime/quantized_weight.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
// GCC 12's AVX-512 reductions start from self-initialized "undefined" vectors (-Wuninitialized).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif
#include <numeric>
#include <random>
#include <span>
#include <unistd.h>
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

namespace {

// Σ of n words. On x86-64 with AVX-512: eight sequential streams side by side, a 64-byte load from
// each per step (as many streams as the decode kernel reads, so the hardware prefetchers see the
// same pattern and the figure is the most one core's loads pull, not one stream's); elsewhere
// integer adds the compiler vectorizes without reassociation flags.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) std::uint64_t
sum_words_avx512(const std::uint64_t* p, std::size_t n) {
  constexpr std::size_t kStreams = 8;
  const std::size_t stream = n / kStreams / 8 * 8; // words per stream, whole vectors
  __m512i acc[kStreams];
  for (auto& a : acc)
    a = _mm512_setzero_si512();
  for (std::size_t i = 0; i < stream; i += 8)
    for (std::size_t k = 0; k < kStreams; ++k)
      acc[k] = _mm512_add_epi64(acc[k], _mm512_loadu_si512(p + k * stream + i));
  __m512i total = acc[0];
  for (std::size_t k = 1; k < kStreams; ++k)
    total = _mm512_add_epi64(total, acc[k]);
  auto sum = static_cast<std::uint64_t>(_mm512_reduce_add_epi64(total));
  for (std::size_t i = kStreams * stream; i < n; ++i)
    sum += p[i];
  return sum;
}
#endif

std::uint64_t
sum_words(const std::uint64_t* p, std::size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f"))
    return sum_words_avx512(p, n);
#endif
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i)
    sum += p[i];
  return sum;
}

#if defined(__x86_64__)
// CPUID leaf 7, EDX bit 22 (clang 14's __builtin_cpu_supports does not know "amx-bf16").
bool
cpuid_has_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx & (1u << 22)) != 0;
}
#endif

} // namespace

std::size_t
streaming_bytes() {
  std::size_t l3 = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  l3 = static_cast<std::size_t>(std::max(0L, sysconf(_SC_LEVEL3_CACHE_SIZE)));
#endif
  const std::size_t bytes = std::max<std::size_t>(std::size_t{256} << 20, l3 * 5 / 2);
  return bytes / (std::size_t{1} << 20) * (std::size_t{1} << 20); // whole MiB
}

double
read_bandwidth_gbps(std::span<const std::uint64_t> data, ThreadPool& pool) {
  const auto chunk = static_cast<std::int64_t>((data.size() + pool.size() - 1) / pool.size());
  std::vector<std::uint64_t> sums(pool.size() + 1); // one per chunk
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(
        static_cast<std::int64_t>(data.size()),
        [&](std::int64_t b, std::int64_t e) {
          sums[static_cast<std::size_t>(b / chunk)] += sum_words(data.data() + b, static_cast<std::size_t>(e - b));
        },
        chunk);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (std::accumulate(sums.begin(), sums.end(), std::uint64_t{0}) == 0) // keeps the reads
    return 0;
  return static_cast<double>(data.size_bytes()) / best / 1e9;
}

CpuKernelCheck
check_cpu_kernels() {
  CpuKernelCheck check;
#if defined(__x86_64__)
  const std::pair<const char*, bool> features[] = {{"avx2", __builtin_cpu_supports("avx2")},
                                                   {"fma", __builtin_cpu_supports("fma")},
                                                   {"avx512f", __builtin_cpu_supports("avx512f")},
                                                   {"avx512_vnni", __builtin_cpu_supports("avx512vnni")},
                                                   {"avx512_vbmi", __builtin_cpu_supports("avx512vbmi")},
                                                   {"avx512_bf16", __builtin_cpu_supports("avx512bf16")},
                                                   {"amx_bf16", cpuid_has_amx_bf16()}};
  for (const auto& [name, present] : features)
    if (present)
      check.isa += (check.isa.empty() ? "" : " ") + std::string(name);
#endif
  if (check.isa.empty())
    check.isa = "none of avx2/avx512";
  check.row_dot = runtime::dot_rows_kernel();
  check.bf16_prefill = runtime::bf16_gemm_kernel_name();
  check.attention = runtime::attention_kernel();
  const auto f32_kernel = runtime::panel_gemm_kernel(runtime::PanelProduct::f32, 128);
  check.f32_prefill = !f32_kernel                                           ? "sgemm"
                      : *f32_kernel == runtime::PanelKernel::f32_transposed ? "avx512f, activations transposed"
                                                                            : "avx512f";

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
  const auto bf16_rounded = runtime::make_dense_weight(model::DType::bf16, std::as_bytes(std::span(w16)), rows, cols,
                                                       runtime::ActivationPrecision::bf16);
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
  check.bf16_rounded_gflops = gflops([&] { bf16_rounded->multiply(x.data(), m, y.data(), pool); });
  check.f32_gflops = gflops([&] { f32->multiply(x.data(), m, y.data(), pool); });
  check.max_relative_error = std::max(check.max_relative_error, worst_error());

  // W8A8 (int8 per-row weights, int8 per-token activations) on the same shape.
  check.w8a8 = runtime::int8_gemm_supported() ? "avx512_vnni integers" : "fp32 fake-quantized";
  const auto delta_kernels = runtime::delta_int8_kernels();
  check.delta_product =
      delta_kernels.empty() ? "fp32 decode" : std::string(runtime::to_string(delta_kernels.front())) + " integers";
  std::vector<std::int8_t> w8(w16.size());
  for (std::size_t i = 0; i < w8.size(); ++i)
    w8[i] = static_cast<std::int8_t>(static_cast<int>(i % 251) - 125);
  const auto int8 = runtime::make_quantized_weight(
      {runtime::QuantizedStorage::int8_values, rows, cols, 8, std::as_bytes(std::span(w8)),
       std::vector<float>(static_cast<std::size_t>(rows), 0.01f), cols,
       quant::QuantArgs{8, quant::NumberType::integer, true, quant::Strategy::token, 0, true}});
  check.w8a8_gflops = gflops([&] { int8->multiply(x.data(), m, y.data(), pool); });

  // Decode: one activation row against weights that stream from memory (2.5x the last-level
  // cache), beside the machine's read bandwidth over the same bytes with the same threads.
  std::vector<std::uint64_t> stream(streaming_bytes() / sizeof(std::uint64_t), 0x3c003c003c003c00ULL);
  check.stream_mib = static_cast<double>(stream.size() * sizeof(std::uint64_t)) / (1 << 20);
  check.read_gbps = read_bandwidth_gbps(stream, pool);
  const auto bytes = std::as_bytes(std::span(stream));
  const std::int64_t decode_cols = 4096;
  std::vector<float> dx(static_cast<std::size_t>(decode_cols), 0.25f);
  const auto decode_gbps = [&](model::DType dtype) {
    const auto w_rows = static_cast<std::int64_t>(bytes.size() / model::dtype_size(dtype)) / decode_cols;
    const auto weight = runtime::make_dense_weight(dtype, bytes, w_rows, decode_cols);
    std::vector<float> dy(static_cast<std::size_t>(w_rows));
    double best = 1e30, spent = 0;
    for (int rep = 0; rep < 3 && spent < 1.0; ++rep) { // best of 3, or of fewer on a slow (portable) build
      const auto start = std::chrono::steady_clock::now();
      weight->multiply(dx.data(), 1, dy.data(), pool);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::min(best, seconds);
      spent += seconds;
    }
    return static_cast<double>(weight->storage_bytes()) / best / 1e9;
  };
  check.bf16_decode_gbps = decode_gbps(model::DType::bf16);
  check.f32_decode_gbps = decode_gbps(model::DType::f32);
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
        {"attention", cpu.attention},
        {"f32_prefill", cpu.f32_prefill},
        {"delta_product", cpu.delta_product},
        {"bf16_gflops", cpu.bf16_gflops},
        {"bf16_rounded_gflops", cpu.bf16_rounded_gflops},
        {"bf16_widened_gflops", cpu.bf16_widened_gflops},
        {"f32_gflops", cpu.f32_gflops},
        {"f32_sgemm_gflops", cpu.f32_sgemm_gflops},
        {"w8a8", cpu.w8a8},
        {"w8a8_gflops", cpu.w8a8_gflops},
        {"max_relative_error", cpu.max_relative_error},
        {"stream_mib", cpu.stream_mib},
        {"read_gbps", cpu.read_gbps},
        {"bf16_decode_gbps", cpu.bf16_decode_gbps},
        {"f32_decode_gbps", cpu.f32_decode_gbps}}},
      {"gpu", to_json(gpus)},
      {"kernels", kernels}};
}

} // namespace optkit::doctor
