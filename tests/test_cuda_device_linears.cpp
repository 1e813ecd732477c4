// The decoupled delta layers on a CUDA device (cuda/device_linears.cuh: cuBLASLt base product + one
// SBMM launch over the variants' row segments) against the CPU: the runtime's own path
// (LinearWeight product + CompressedDelta::multiply_add per segment) and a float64 oracle on
// each Δ decoded whole by the artifact. Variants of 2, 4 and 8 bits, 2:4 sparse and dense, share
// one launch with base rows; shapes leave partial blocks, tiles, words and x chunks. Without a
// device ctest reports this file as skipped (SKIPPED: below).
#include "cuda/device_linears.cuh"

#include "core/thread_pool.hpp"
#include "doctor/gpu_probe.hpp"
#include "runtime/delta_variant.hpp"
#include "runtime/linear_weight.hpp"
#include "support/packed_delta.hpp"
#include "support/random_delta.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace optkit;

namespace {

struct Variant {
  int bits;
  bool sparse;
  std::int64_t groups;
};

} // namespace

TEST_CASE("the CUDA linear layers equal the CPU path and a float64 oracle over mixed variants in one launch") {
  const doctor::GpuProbe probe = doctor::probe_gpus();
  if (probe.devices.empty()) {
    MESSAGE("SKIPPED: no CUDA device: " << probe.error);
    return;
  }
  // 1096 columns: two staged x chunks, the second partial; 4-bit 2:4 rows end in half a word.
  constexpr std::int64_t kRows = 200, kCols = 1096;
  // Scale groups of 16 and 8 columns take one scale per packed word; 110 and 366 columns, one per value.
  const Variant variants[] = {{4, true, 69}, {2, true, 10}, {8, true, 137}, {4, false, 137}, {8, false, 3}};
  std::vector<std::unique_ptr<quant::DeltaArtifact>> artifacts;
  std::vector<std::unique_ptr<runtime::CompressedDelta>> deltas;
  std::vector<cuda::PackedDelta> packed;
  std::vector<std::vector<float>> scales;
  for (std::size_t v = 0; v < std::size(variants); ++v) {
    artifacts.push_back(test::random_delta_artifact(kRows, kCols, variants[v].bits, variants[v].sparse,
                                                    variants[v].groups, static_cast<std::uint32_t>(v + 1)));
    deltas.push_back(runtime::CompressedDelta::load(*artifacts.back(), "m", kRows, kCols));
    packed.push_back(test::packed_delta(*artifacts.back(), kRows, kCols, scales));
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> base(static_cast<std::size_t>(kRows * kCols));
  for (auto& w : base)
    w = 0.05f * normal(rng);
  // Base rows first and between; a variant of 11 rows spans two tiles.
  const std::vector<cuda::RowSegment> segments = {{0, 3, -1}, {3, 3, 0},  {6, 11, 1}, {17, 1, -1},
                                                  {18, 1, 2}, {19, 4, 3}, {23, 2, 4}};
  const int m = 25;
  std::vector<float> x(static_cast<std::size_t>(m * kCols));
  for (auto& v : x)
    v = normal(rng);

  // The CPU path: the runtime's base product, then each segment's Δ as the runtime applies it.
  ThreadPool pool(2);
  const auto weight = runtime::make_owned_dense_weight(std::vector<float>(base), kRows, kCols);
  std::vector<float> cpu(static_cast<std::size_t>(m * kRows));
  weight->multiply(x.data(), m, cpu.data(), pool);
  // x[i] · w[r] in float64, w row-major [kRows, kCols].
  const auto row_dot = [&](const std::vector<float>& w, std::int64_t i, std::int64_t r) {
    double sum = 0;
    for (std::int64_t c = 0; c < kCols; ++c)
      sum += double(x[static_cast<std::size_t>(i * kCols + c)]) * double(w[static_cast<std::size_t>(r * kCols + c)]);
    return sum;
  };
  std::vector<double> oracle(cpu.size(), 0.0), oracle_delta(cpu.size(), 0.0);
  for (const auto& s : segments) {
    std::vector<float> dense;
    if (s.slot >= 0) {
      const auto& delta = *deltas[static_cast<std::size_t>(s.slot)];
      delta.multiply_add(x.data() + s.row * kCols, s.count, cpu.data() + s.row * kRows, kRows, pool);
      dense = artifacts[static_cast<std::size_t>(s.slot)]->decode_delta("m", kRows, kCols);
    }
    for (int i = s.row; i < s.row + s.count; ++i)
      for (std::int64_t r = 0; r < kRows; ++r) {
        const auto at = static_cast<std::size_t>(i * kRows + r);
        oracle_delta[at] = dense.empty() ? 0.0 : row_dot(dense, i, r);
        oracle[at] = row_dot(base, i, r) + oracle_delta[at];
      }
  }

  // A small matrix first, so the layer under test is not matrix 0 and the batch buffers are shared.
  cuda::DeviceLinears layer(0);
  const std::vector<float> other(8 * 16, 0.5f);
  const int small = layer.add_matrix(other.data(), 8, 16);
  const int w = layer.add_matrix(base.data(), kRows, kCols);
  for (std::size_t v = 0; v < packed.size(); ++v)
    layer.set_delta(w, static_cast<int>(v), packed[v]);
  std::vector<float> gpu(cpu.size()), sbmm(cpu.size()), per_delta(cpu.size());
  layer.multiply(w, x.data(), m, segments, gpu.data());
  layer.delta_products(w, x.data(), m, segments, sbmm.data(), false);
  layer.delta_products(w, x.data(), m, segments, per_delta.data(), true);

  double scale = 0, delta_scale = 0, worst_cpu = 0, worst_oracle = 0, worst_sbmm = 0, worst_per_delta = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    scale = std::max(scale, std::fabs(oracle[i]));
    delta_scale = std::max(delta_scale, std::fabs(oracle_delta[i]));
    worst_cpu = std::max(worst_cpu, std::fabs(double(gpu[i]) - double(cpu[i])));
    worst_oracle = std::max(worst_oracle, std::fabs(double(gpu[i]) - oracle[i]));
    worst_sbmm = std::max(worst_sbmm, std::fabs(double(sbmm[i]) - oracle_delta[i]));
    worst_per_delta = std::max(worst_per_delta, std::fabs(double(per_delta[i]) - oracle_delta[i]));
  }
  MESSAGE(layer.device_name() << ": max |gpu - cpu| " << worst_cpu << ", |gpu - oracle| " << worst_oracle
                              << " of max |y| " << scale << "; Δ only: sbmm " << worst_sbmm << ", per-delta "
                              << worst_per_delta << " of " << delta_scale);
  REQUIRE(delta_scale > 0);
  CHECK(worst_cpu <= 1e-5 * scale);
  CHECK(worst_oracle <= 1e-5 * scale);
  CHECK(worst_sbmm <= 1e-5 * delta_scale);
  CHECK(worst_per_delta <= 1e-5 * delta_scale);

  // Base-only batches run no SBMM tile and leave the base product as it is; so does a slot that
  // holds no Δ of this matrix, or one that was emptied.
  const auto base_rows_match = [&](const std::vector<cuda::RowSegment>& only, int rows) {
    std::vector<float> out(static_cast<std::size_t>(rows * kRows));
    layer.multiply(w, x.data(), rows, only, out.data());
    double worst = 0;
    for (std::size_t i = 0; i < out.size(); ++i)
      worst = std::max(worst, std::fabs(double(out[i]) - (oracle[i] - oracle_delta[i])));
    return worst <= 1e-5 * scale;
  };
  CHECK(base_rows_match({{0, 2, -1}}, 2));
  CHECK(base_rows_match({{0, 2, 9}}, 2));
  layer.clear_slot(1);
  CHECK(base_rows_match({{6, 11, 1}}, 17));
  // The other slots still hold theirs: the first segments are unchanged.
  std::vector<float> again(static_cast<std::size_t>(6 * kRows));
  layer.multiply(w, x.data(), 6, {{0, 3, -1}, {3, 3, 0}}, again.data());
  for (std::size_t i = 0; i < again.size(); ++i)
    CHECK(std::fabs(double(again[i]) - double(gpu[i])) <= 1e-6 * scale);
  // The small matrix: every output is 0.5 · the row's sum of its first 16 values.
  std::vector<float> small_y(static_cast<std::size_t>(2 * 8)), small_x(x.begin(), x.begin() + 2 * 16);
  layer.multiply(small, small_x.data(), 2, {{0, 2, 0}}, small_y.data());
  for (std::int64_t i = 0; i < 2; ++i) {
    double sum = 0;
    for (std::int64_t c = 0; c < 16; ++c)
      sum += 0.5 * double(small_x[static_cast<std::size_t>(i * 16 + c)]);
    for (std::int64_t r = 0; r < 8; ++r)
      CHECK(std::fabs(double(small_y[static_cast<std::size_t>(i * 8 + r)]) - sum) <= 1e-4);
  }
  CHECK(layer.delta_bytes() > 0);
  CHECK(layer.weight_bytes() == static_cast<std::uint64_t>((8 * 16 + kRows * kCols) * 4));

  // A segment outside the batch, an unknown matrix or a Δ the kernel does not take is refused.
  CHECK_THROWS_AS(layer.multiply(w, x.data(), 4, {{2, 3, 0}}, gpu.data()), std::runtime_error);
  CHECK_THROWS_AS(layer.multiply(7, x.data(), 4, {{0, 2, 0}}, gpu.data()), std::runtime_error);
  cuda::PackedDelta three_bits = packed[0];
  three_bits.bits = 3;
  CHECK_THROWS_AS(layer.set_delta(w, 0, three_bits), std::runtime_error);
}
