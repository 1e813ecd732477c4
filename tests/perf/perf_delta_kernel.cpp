// The Δ product of a decode step on the CPU, side by side in one run, on Llama-3.2-1B's gate_proj
// shape (8192 × 2048), for 1 to 32 activation rows:
//   base      the BF16 base product of the same shape (LinearWeight, what every row pays anyway)
//   integer   a 2:4 4-bit Δ (group-128 scales) on its packed form against int8 activations
//             (runtime/delta_int8.hpp), activations quantized included, on each kernel this CPU
//             runs: AVX512_VNNI + AVX512_VBMI (VPERMI2B gather, VPDPBUSD) and AVX2 (VPSHUFB
//             gather, VPMADDUBSW); the runtime serves with the first
//   float     the same Δ on serve-deltas' float path (CompressedDelta::multiply_add without int8
//             activations): decoded 32 rows at a time to fp32, multiplied by row dots up to 8
//             rows and by sgemm (or the AVX-512 panel GEMM) beyond; what CPUs without AVX2 run
// The Δs rotate over 8 variants (55 MB, past the last-level cache, as a batch of 8 variants reads
// them) and the base over 2 copies. Each round times the base, the kernels and the float path in
// turn, so a slow spell of a shared machine falls on all of them; each column gives the best time
// over the rounds per product, its ratio to the base's best (×) and the median over the rounds of
// its ratio to the base in the same round (×med). Goal of the DeltaZip issue: integer ≤ 0.3× base
// at 1 and at 8 rows. Usage: perf_delta_kernel [repeats, default 5] [threads, default all]
#include "core/thread_pool.hpp"
#include "model/dtype.hpp"
#include "runtime/delta_int8.hpp"
#include "runtime/delta_variant.hpp"
#include "runtime/linear_weight.hpp"
#include "support/best_of.hpp"
#include "support/perf_args.hpp"
#include "support/random_delta.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

using namespace optkit;

namespace {

constexpr std::int64_t kRows = 8192, kCols = 2048, kVariants = 8, kBaseCopies = 2;

// The kernels' names, or their instruction sets' short names for the table's columns.
std::vector<std::string>
kernel_names(const std::vector<runtime::DeltaInt8Kernel>& kernels, bool short_names) {
  std::vector<std::string> names;
  for (const auto kernel : kernels)
    names.emplace_back(!short_names                                      ? runtime::to_string(kernel)
                       : kernel == runtime::DeltaInt8Kernel::avx512_vbmi ? "avx512"
                                                                         : "avx2");
  return names;
}

} // namespace

int
main(int argc, char** argv) {
  constexpr std::string_view kUsage = "perf_delta_kernel [repeats, default 5] [threads, default 0: all]";
  const int repeats = test::positional_number(argc, argv, 1, "repeats", 5, 1, kUsage);
  ThreadPool pool(test::positional_number(argc, argv, 2, "threads", 0u, 0u, kUsage));
  std::vector<std::unique_ptr<quant::DeltaArtifact>> artifacts;
  std::vector<std::unique_ptr<runtime::CompressedDelta>> deltas, float_deltas;
  for (std::int64_t v = 0; v < kVariants; ++v) {
    artifacts.push_back(
        test::random_delta_artifact(kRows, kCols, 4, true, kCols / 128, static_cast<std::uint32_t>(v + 1)));
    deltas.push_back(runtime::CompressedDelta::load(*artifacts.back(), "m", kRows, kCols));
    deltas.back()->set_int8_activations(true); // where the CPU has the kernel
    float_deltas.push_back(runtime::CompressedDelta::load(*artifacts.back(), "m", kRows, kCols));
  }
  const bool integer = runtime::delta_int8_supported(deltas[0]->codes(), true);
  const auto kernels = integer ? runtime::delta_int8_kernels() : std::vector<runtime::DeltaInt8Kernel>{};
  std::vector<std::vector<float>> offsets;
  for (const auto& d : deltas)
    offsets.push_back(runtime::delta_int8_row_offsets(d->codes(), kRows));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<std::vector<std::uint16_t>> base_bits;
  std::vector<std::unique_ptr<runtime::LinearWeight>> bases;
  for (std::int64_t c = 0; c < kBaseCopies; ++c) {
    auto& bits = base_bits.emplace_back(static_cast<std::size_t>(kRows * kCols));
    for (auto& b : bits)
      b = model::float_to_bf16(0.02f * normal(rng));
    bases.push_back(runtime::make_dense_weight(model::DType::bf16, std::as_bytes(std::span(bits)), kRows, kCols));
  }
  const double delta_mb = double(deltas[0]->storage_bytes()) / 1e6, base_mb = double(kRows * kCols * 2) / 1e6;
  fmt::print("Δ product, {} × {}, {} threads: BF16 base {:.1f} MB, 2:4 4-bit Δ {:.1f} MB ({:.3f}×); integer kernels: "
             "{}\n",
             kRows, kCols, pool.size(), base_mb, delta_mb, delta_mb / base_mb,
             kernels.empty() ? "none on this CPU" : fmt::format("{}", fmt::join(kernel_names(kernels, false), ", ")));
  fmt::print("{:>4}   {:>10}", "rows", "base ms");
  for (const auto& name : kernel_names(kernels, true))
    fmt::print("   {:>21}", fmt::format("{} ms (× ×med)", name));
  fmt::print("   {:>21}   {:>12}\n", "float ms (× ×med)", "int max err");
  for (const std::int64_t m : {1, 2, 4, 8, 16, 32, 64, 128}) {
    std::vector<float> x(static_cast<std::size_t>(m * kCols)), y(static_cast<std::size_t>(m * kRows));
    for (auto& v : x)
      v = normal(rng);
    // The base, each kernel (what CompressedDelta::multiply_add does for decode rows, on it) and the
    // float path, timed in turn each round.
    std::vector<std::function<void()>> works{[&] {
      for (const auto& w : bases)
        w->multiply(x.data(), m, y.data(), pool);
    }};
    for (const auto kernel : kernels)
      works.emplace_back([&, kernel] {
        for (std::size_t v = 0; v < deltas.size(); ++v) {
          const auto q = runtime::quantize_activations_u8(x.data(), m, kCols, false);
          pool.parallel_for(
              kRows,
              [&](std::int64_t r0, std::int64_t r1) {
                runtime::delta_int8_rows(kernel, deltas[v]->codes(), offsets[v], r0, r1, q, y.data(), kRows);
              },
              runtime::delta_int8_task_rows(kRows, pool.size()));
        }
      });
    works.emplace_back([&] {
      for (const auto& d : float_deltas)
        d->multiply_add(x.data(), m, y.data(), kRows, pool);
    });
    const auto times = test::interleaved_ms(repeats, works);
    // Per product: the base rotates over kBaseCopies copies, the Δs over kVariants.
    const auto per_product = [&](std::size_t work) { return work == 0 ? 1.0 / kBaseCopies : 1.0 / kVariants; };
    const auto column = [&](std::size_t work) {
      return fmt::format("   {:>8.3f} ({:>4.2f} {:>4.2f})", times.best(work) * per_product(work),
                         times.best(work) * per_product(work) / (times.best(0) * per_product(0)),
                         times.median_ratio(work, 0) * per_product(work) / per_product(0));
    };
    fmt::print("{:>4}   {:>10.3f}", m, times.best(0) * per_product(0));
    for (std::size_t k = 1; k <= kernels.size(); ++k)
      fmt::print("{}", column(k));
    double error = 0;
    if (integer) { // the served path against the float path on the same x: the activation quantization's error
      std::vector<float> a(y.size(), 0.0f), b(y.size(), 0.0f);
      deltas[0]->multiply_add(x.data(), m, a.data(), kRows, pool);
      float_deltas[0]->multiply_add(x.data(), m, b.data(), kRows, pool);
      double scale = 1e-30;
      for (std::size_t i = 0; i < a.size(); ++i) {
        error = std::max(error, double(std::abs(a[i] - b[i])));
        scale = std::max(scale, double(std::abs(b[i])));
      }
      error /= scale;
    }
    fmt::print("{}   {:>12.1e}\n", column(works.size() - 1), error);
  }
  return 0;
}
