// SBMM on a CUDA device, side by side in one run (cuda/device_linears.cuh): Δ products of 8
// variants × 4 rows each through a Llama-3.2-1B-shaped layer, Δ 2:4 sparse with group-128 scales,
// random values.
//   sbmm       one launch over every variant's segment, Δs read packed and decoded in registers
//   per-delta  a loop over variants: the Δ decoded to a dense fp32 matrix, then its own cuBLASLt
//              product (the baseline)
//   layer      the base product over all 32 rows (cuBLASLt, fp32) plus the SBMM launch, against
//              the base product alone: what serving the variants decoupled adds to the layer
// Both Δ outputs are compared. Usage: perf_sbmm_cuda [device, default 0]
#include "cuda/device_linears.cuh"
#include "runtime/delta_variant.hpp"
#include "support/packed_delta.hpp"
#include "support/random_delta.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <random>

using namespace optkit;

namespace {

struct Shape {
  const char* name;
  int rows, cols, bits, variants, per_variant;
};

int
measure(int device, const Shape& shape) {
  constexpr int kGroup = 128;
  std::vector<std::unique_ptr<quant::DeltaArtifact>> artifacts;
  std::vector<std::unique_ptr<runtime::CompressedDelta>> deltas;
  std::vector<cuda::PackedDelta> packed;
  std::vector<std::vector<float>> scales;
  for (int v = 0; v < shape.variants; ++v) {
    artifacts.push_back(test::random_delta_artifact(shape.rows, shape.cols, shape.bits, true, shape.cols / kGroup,
                                                    static_cast<std::uint32_t>(v + 1)));
    deltas.push_back(runtime::CompressedDelta::load(*artifacts.back(), "m", shape.rows, shape.cols));
    packed.push_back(test::packed_delta(*artifacts.back(), shape.rows, shape.cols, scales));
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> base(static_cast<std::size_t>(shape.rows) * static_cast<std::size_t>(shape.cols));
  for (auto& w : base)
    w = 0.02f * normal(rng);
  cuda::DeviceLinears layer(device);
  const int w = layer.add_matrix(base.data(), shape.rows, shape.cols);
  for (int v = 0; v < shape.variants; ++v)
    layer.set_delta(w, v, packed[static_cast<std::size_t>(v)]);
  std::vector<cuda::RowSegment> segments;
  for (int v = 0; v < shape.variants; ++v)
    segments.push_back({v * shape.per_variant, shape.per_variant, v});
  const int m = shape.variants * shape.per_variant;

  std::vector<float> x(static_cast<std::size_t>(m) * static_cast<std::size_t>(shape.cols));
  for (auto& value : x)
    value = normal(rng);
  std::vector<float> y_sbmm(static_cast<std::size_t>(m) * static_cast<std::size_t>(shape.rows)), y_loop(y_sbmm.size());
  layer.delta_products(w, x.data(), m, segments, y_sbmm.data(), false);
  layer.delta_products(w, x.data(), m, segments, y_loop.data(), true);
  double worst = 0, scale = 1e-30;
  for (std::size_t i = 0; i < y_sbmm.size(); ++i) {
    worst = std::max(worst, std::fabs(double(y_sbmm[i]) - double(y_loop[i])));
    scale = std::max(scale, std::fabs(double(y_loop[i])));
  }

  const cuda::DeltaLinearTimings t = layer.time(w, m, segments);
  fmt::print("{} [{} x {}], {} variants x {} rows, {}-bit 2:4, group {} ({}):\n", shape.name, shape.rows, shape.cols,
             shape.variants, shape.per_variant, shape.bits, kGroup, layer.device_name());
  fmt::print("  per-delta dense decode + cuBLASLt  {:9.1f} us\n", t.per_delta_us);
  fmt::print("  sbmm, one launch                   {:9.1f} us   {:.1f}x faster; {:.0f} GB/s of packed Δ\n", t.sbmm_us,
             t.per_delta_us / t.sbmm_us, t.delta_bytes / t.sbmm_us / 1e3);
  fmt::print("  base product ({} rows, fp32)       {:9.1f} us\n", m, t.base_us);
  fmt::print("  base + sbmm (the layer)            {:9.1f} us   {:.2f}x the base alone\n", t.layer_us,
             t.layer_us / t.base_us);
  fmt::print("  max |sbmm - per-delta| {:.2e} of max |y| {:.2e}\n", worst, scale);
  return worst <= 1e-5 * scale ? 0 : 1;
}

} // namespace

int
main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  const Shape shapes[] = {{"gate_proj", 8192, 2048, 4, 8, 4},
                          {"gate_proj", 8192, 2048, 2, 8, 4},
                          {"down_proj", 2048, 8192, 4, 8, 4},
                          {"gate_proj", 8192, 2048, 4, 32, 1},
                          {"gate_proj", 8192, 2048, 4, 4, 16}};
  int failures = 0;
  try {
    for (const Shape& shape : shapes)
      failures += measure(device, shape);
  } catch (const std::exception& e) {
    fmt::print(stderr, "perf_sbmm_cuda: {}\n", e.what());
    return 3;
  }
  return failures == 0 ? 0 : 1;
}
