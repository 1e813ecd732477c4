// The delta product serve-deltas runs, side by side in one run (DeltaZip's SBMM on the CPU):
// 8 variants × 4 rows each (decode steps; more rows per variant: a batch of prefills) through one
// Llama-3.2-1B-shaped layer (gate_proj, 8192 × 2048), Δ 4-bit 2:4 sparse with group-128 scales,
// random values.
//   sbmm      CompressedDelta::multiply_add per variant segment: Δ decoded a block of rows at a
//             time into cache and multiplied there (what the runtime does): row dots up to 8
//             rows; from 16, the AVX-512 panel GEMM on x packed once; else one sgemm per block
//   per-delta a loop over variants that decodes each whole Δ to a dense fp32 matrix and
//             multiplies (DeltaArtifact::decode_delta + sgemm: the baseline of the issue)
//   per-delta, parallel decode: the same with the decoding split over the threads too, so the
//             ratio is not only the parallelism
// Both outputs are compared. Usage: perf_sbmm [repeats, default 5] [threads, default all]
//   [rows per variant, default 4]
#include "core/thread_pool.hpp"
#include "quant/delta_format.hpp"
#include "runtime/delta_variant.hpp"
#include "runtime/linear_weight.hpp"
#include "support/best_of.hpp"
#include "support/random_delta.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

using namespace optkit;
using test::best_ms;

namespace {

constexpr std::int64_t kRows = 8192, kCols = 2048, kVariants = 8, kGroup = 128;

} // namespace

int
main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  ThreadPool pool(argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 0);
  const std::int64_t per_variant = argc > 3 ? std::max(1, std::atoi(argv[3])) : 4;
  std::vector<std::unique_ptr<quant::DeltaArtifact>> artifacts;
  std::vector<std::unique_ptr<runtime::CompressedDelta>> deltas;
  for (std::int64_t v = 0; v < kVariants; ++v) {
    artifacts.push_back(
        test::random_delta_artifact(kRows, kCols, 4, true, kCols / kGroup, static_cast<std::uint32_t>(v + 1)));
    deltas.push_back(runtime::CompressedDelta::load(*artifacts.back(), "m", kRows, kCols));
  }
  const std::int64_t m = kVariants * per_variant;
  std::vector<float> x(static_cast<std::size_t>(m * kCols));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (auto& v : x)
    v = normal(rng);
  std::vector<float> y_sbmm(static_cast<std::size_t>(m * kRows)), y_loop(y_sbmm.size());

  const double sbmm = best_ms(repeats, [&] {
    std::fill(y_sbmm.begin(), y_sbmm.end(), 0.0f);
    for (std::int64_t v = 0; v < kVariants; ++v)
      deltas[static_cast<std::size_t>(v)]->multiply_add(x.data() + v * per_variant * kCols, per_variant,
                                                        y_sbmm.data() + v * per_variant * kRows, kRows, pool);
  });
  const double loop = best_ms(repeats, [&] {
    for (std::int64_t v = 0; v < kVariants; ++v) {
      const auto dense = artifacts[static_cast<std::size_t>(v)]->decode_delta("m", kRows, kCols);
      runtime::multiply_fp32_rows(dense.data(), kRows, kCols, x.data() + v * per_variant * kCols, per_variant,
                                  y_loop.data() + v * per_variant * kRows, pool);
    }
  });
  std::vector<float> dense(static_cast<std::size_t>(kRows * kCols)), y_par(y_sbmm.size());
  const double parallel = best_ms(repeats, [&] {
    for (std::int64_t v = 0; v < kVariants; ++v) {
      const auto& delta = *deltas[static_cast<std::size_t>(v)];
      pool.parallel_for(kRows / 64, [&](std::int64_t b0, std::int64_t b1) {
        delta.decode_rows(b0 * 64, (b1 - b0) * 64, dense.data() + b0 * 64 * kCols);
      });
      runtime::multiply_fp32_rows(dense.data(), kRows, kCols, x.data() + v * per_variant * kCols, per_variant,
                                  y_par.data() + v * per_variant * kRows, pool);
    }
  });
  float worst = 0, scale = 1e-12f;
  for (std::size_t i = 0; i < y_sbmm.size(); ++i) {
    worst = std::max(worst, std::fabs(y_sbmm[i] - y_loop[i]));
    scale = std::max(scale, std::fabs(y_loop[i]));
  }
  fmt::print("Δ products: {} variants x {} rows, [{} x {}] 4-bit 2:4, best of {}, {} threads\n", kVariants, per_variant,
             kRows, kCols, repeats, pool.size());
  fmt::print("  per-delta dense decode + sgemm  {:8.2f} ms\n", loop);
  fmt::print("  per-delta, parallel decode      {:8.2f} ms\n", parallel);
  fmt::print("  sbmm (block decode + product)   {:8.2f} ms   {:.2f}x the first, {:.2f}x the second\n", sbmm,
             loop / sbmm, parallel / sbmm);
  fmt::print("  max |difference| {:.2e} of max |y| {:.2e}\n", worst, scale);
  return worst <= 1e-4f * scale ? 0 : 1;
}
