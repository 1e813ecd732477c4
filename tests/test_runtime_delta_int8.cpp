// The integer Δ kernel (runtime/delta_int8.hpp): a 2:4 or dense 4-bit Δ on its packed form against int8
// activations equals the float path on the dequantized activations x̂ = q·s (a float64 dot of
// the decoded Δ) to fp32 rounding, over row, activation-row and column tails, scale groups of one
// and two chunks, mid-rise and plain grids; a Δ whose kept positions change gives another,
// equally exact, answer (so a kernel that ignored a 2:4 index fails); the shapes it does not take
// are refused; a CompressedDelta with int8 activations gives the x̂ product through the kernel
// for decode rows and prefill rows alike, each row's the same whatever its batch. Each case runs on every kernel
// the CPU has (AVX512_VNNI + AVX512_VBMI, AVX2); skipped where it has none (the float path runs
// there).
#include "core/thread_pool.hpp"
#include "runtime/delta_int8.hpp"
#include "runtime/delta_variant.hpp"
#include "support/random_delta.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace optkit;
using namespace optkit::runtime;

namespace {

struct Shape {
  std::int64_t rows, cols, groups, m;
};

std::vector<float>
random_x(std::int64_t m, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(m * cols));
  for (auto& v : x)
    v = normal(rng);
  return x;
}

// The worst |kernel − float64 reference| over the largest reference magnitude, y[m, rows].
double
kernel_error(DeltaInt8Kernel kernel, const DeltaCodes& codes, std::int64_t rows, const QuantizedActivations& q,
             std::vector<float>* out) {
  std::vector<float> y(static_cast<std::size_t>(q.m * rows), 0.0f);
  delta_int8_rows(kernel, codes, delta_int8_row_offsets(codes, rows), 0, rows, q, y.data(), rows);
  std::vector<float> decoded(static_cast<std::size_t>(rows * codes.cols));
  decode_delta_rows_loops(codes, 0, rows, decoded.data());
  double worst = 0, scale = 1e-30;
  for (std::int64_t i = 0; i < q.m; ++i)
    for (std::int64_t r = 0; r < rows; ++r) {
      double ref = 0;
      for (std::int64_t c = 0; c < codes.cols; ++c) {
        const double x_hat = (double(q.u[static_cast<std::size_t>(i * q.pitch + c)]) - 128.0) *
                             double(q.scale[static_cast<std::size_t>(i)]);
        ref += x_hat * double(decoded[static_cast<std::size_t>(r * codes.cols + c)]);
      }
      worst = std::max(worst, std::fabs(double(y[static_cast<std::size_t>(i * rows + r)]) - ref));
      scale = std::max(scale, std::fabs(ref));
    }
  if (out)
    *out = y;
  return worst / scale;
}

} // namespace

TEST_CASE("the integer Δ kernel equals the float path on the quantized activations over every tail") {
  const auto probe = test::random_delta_artifact(4, 128, 4, true, 1, 1);
  const auto probe_delta = CompressedDelta::load(*probe, "m", 4, 128);
  if (!delta_int8_supported(probe_delta->codes(), true)) {
    MESSAGE("SKIPPED: this CPU lacks AVX2 and AVX512_VNNI + AVX512_VBMI (or OPTKIT_CPU_BASELINE=1): the float path "
            "runs");
    return;
  }
  const Shape shapes[] = {{1, 128, 1, 1},   {5, 384, 3, 3},   {33, 1024, 4, 8}, {7, 256, 1, 9},
                          {16, 512, 2, 13}, {3, 2048, 16, 2}, {64, 128, 1, 5}};
  std::uint32_t seed = 10;
  for (const auto kernel : delta_int8_kernels())
    for (const bool sparse : {true, false}) // 2:4 (decoder layers), dense (embeddings, LM head)
      for (const Shape& s : shapes) {
        CAPTURE(to_string(kernel));
        CAPTURE(sparse);
        CAPTURE(s.rows);
        CAPTURE(s.cols);
        CAPTURE(s.m);
        const auto artifact = test::random_delta_artifact(s.rows, s.cols, 4, sparse, s.groups, ++seed);
        const auto delta = CompressedDelta::load(*artifact, "m", s.rows, s.cols);
        DeltaCodes codes = delta->codes();
        REQUIRE(delta_int8_supported(codes, delta_pairs_distinct(codes, s.rows)));
        const auto x = random_x(s.m, s.cols, ++seed);
        const auto q = quantize_activations_u8(x.data(), s.m, s.cols, false);
        CHECK(kernel_error(kernel, codes, s.rows, q, nullptr) < 1e-5); // mid-rise grid (offset ½)
        codes.offset = 0.0f;                                           // a plain grid
        CHECK(kernel_error(kernel, codes, s.rows, q, nullptr) < 1e-5);
      }
}

TEST_CASE("the dense integer Δ kernel reads every code where its column is: one changed code changes one product") {
  const auto artifact = test::random_delta_artifact(4, 256, 4, false, 2, 31);
  const auto delta = CompressedDelta::load(*artifact, "m", 4, 256);
  const DeltaCodes codes = delta->codes();
  if (!delta_int8_supported(codes, true)) {
    MESSAGE("SKIPPED: this CPU has no integer Δ kernel");
    return;
  }
  // One activation row, zero but for column 77 (odd: a high nibble): only Δ[r, 77] counts.
  std::vector<float> x(256, 0.0f);
  x[77] = 1.0f;
  const auto q = quantize_activations_u8(x.data(), 1, 256, false);
  std::vector<float> decoded(4 * 256);
  decode_delta_rows_loops(codes, 0, 4, decoded.data());
  for (const auto kernel : delta_int8_kernels()) {
    CAPTURE(to_string(kernel));
    std::vector<float> y(4, 0.0f);
    delta_int8_rows(kernel, codes, delta_int8_row_offsets(codes, 4), 0, 4, q, y.data(), 4);
    for (std::size_t r = 0; r < 4; ++r)
      CHECK(y[r] == doctest::Approx(static_cast<double>(decoded[r * 256 + 77])).epsilon(1e-6));
  }
}

TEST_CASE("the integer Δ kernel follows every 2:4 index: moved kept positions give another exact answer") {
  const auto artifact = test::random_delta_artifact(8, 256, 4, true, 2, 77);
  const auto delta = CompressedDelta::load(*artifact, "m", 8, 256);
  const DeltaCodes codes = delta->codes();
  if (!delta_int8_supported(codes, true)) {
    MESSAGE("SKIPPED: this CPU has no integer Δ kernel");
    return;
  }
  const auto x = random_x(2, 256, 5);
  const auto q = quantize_activations_u8(x.data(), 2, 256, false);
  for (const auto kernel : delta_int8_kernels()) {
    CAPTURE(to_string(kernel));
    std::vector<float> before, after;
    CHECK(kernel_error(kernel, codes, 8, q, &before) < 1e-5);
    // Row 3, groups 20 and 21 (one index byte): each group's two kept columns move elsewhere in it.
    std::vector<std::uint8_t> indices(codes.indices, codes.indices + 8 * 256 / 8);
    auto& byte = indices[3 * 32 + 10];
    const auto moved = [](unsigned nibble) { return ((nibble & 3u) + 1u) % 4u | ((((nibble >> 2) + 1u) % 4u) << 2); };
    byte = static_cast<std::uint8_t>(moved(byte & 0xfu) | moved(byte >> 4) << 4);
    DeltaCodes changed = codes;
    changed.indices = indices.data();
    REQUIRE(delta_pairs_distinct(changed, 8));
    CHECK(kernel_error(kernel, changed, 8, q, &after) < 1e-5);
    for (std::size_t i = 0; i < before.size(); ++i)
      if (i % 8 == 3)
        CHECK(before[i] != after[i]); // row 3 of each activation row changed
      else
        CHECK(before[i] == after[i]);
  }
}

TEST_CASE(
    "the integer Δ kernel refuses the shapes it does not take, and a served Δ uses it for every row count alike") {
  const auto take = [](int bits, bool sparse, std::int64_t cols, std::int64_t groups, bool odd = false) {
    const auto artifact = test::random_delta_artifact(4, cols, bits, sparse, groups, 3, odd);
    const auto delta = CompressedDelta::load(*artifact, "m", 4, cols);
    return delta_int8_supported(delta->codes(), delta_pairs_distinct(delta->codes(), 4));
  };
  const bool cpu = take(4, true, 256, 2);
  CHECK_FALSE(take(4, true, 200, 2));       // columns not a multiple of 128
  CHECK_FALSE(take(4, true, 256, 4));       // groups of 64 columns
  CHECK_FALSE(take(8, true, 256, 2));       // 8-bit
  CHECK_FALSE(take(2, true, 256, 2));       // 2-bit
  CHECK(take(4, false, 256, 2) == cpu);     // dense: taken as 2:4 is
  CHECK_FALSE(take(4, false, 200, 2));      // dense, columns not a multiple of 128
  CHECK_FALSE(take(4, true, 256, 2, true)); // a nibble naming one column twice
  if (!cpu) {
    MESSAGE("SKIPPED: this CPU has no integer Δ kernel");
    return;
  }
  // CompressedDelta::multiply_add, int8 activations on: 4 and 32 rows (decode batches) and 40 (a
  // prefill) through the kernel, each the reference's answer added to y; and each row's answer the
  // same, bit for bit, as that row's alone (a token's product does not depend on its batch).
  const auto artifact = test::random_delta_artifact(40, 512, 4, true, 4, 9);
  const auto delta = CompressedDelta::load(*artifact, "m", 40, 512);
  CHECK_FALSE(delta->int8_activations()); // off until asked for
  delta->set_int8_activations(true);
  REQUIRE(delta->int8_activations());
  ThreadPool pool(2);
  for (const std::int64_t m : {4, 32, 40}) {
    CAPTURE(m);
    const auto x = random_x(m, 512, 6);
    const auto q = quantize_activations_u8(x.data(), m, 512, false);
    std::vector<float> expected;
    CHECK(kernel_error(delta_int8_kernels().front(), delta->codes(), 40, q, &expected) < 1e-5);
    std::vector<float> y(static_cast<std::size_t>(m * 40), 1.0f);
    delta->multiply_add(x.data(), m, y.data(), 40, pool);
    for (std::size_t i = 0; i < y.size(); ++i)
      CHECK(y[i] == doctest::Approx(static_cast<double>(1.0f + expected[i])).epsilon(1e-5));
    const std::int64_t last = m - 1;
    std::vector<float> alone(40, 1.0f);
    delta->multiply_add(x.data() + last * 512, 1, alone.data(), 40, pool);
    CHECK(std::equal(alone.begin(), alone.end(), y.begin() + last * 40));
  }
}
