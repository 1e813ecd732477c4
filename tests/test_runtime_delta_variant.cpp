// Deltas served decoupled (base weights shared, Δ kept compressed, one base product plus x·Δᵀ per
// run of a variant's rows) against the same delta merged into the base on load (the path `eval
// perplexity --delta` runs): the logits agree to float tolerance, in a batch that mixes the base
// and the variant, through prefill and decode.
#include "core/error.hpp"
#include "quant/delta_format.hpp"
#include "runtime/transformer.hpp"
#include "support/delta_fixture.hpp"
#include "support/random_delta.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace optkit;
using namespace optkit::runtime;

namespace {

std::filesystem::path
models() {
  return test::testdata_dir() / "models";
}

float
max_abs(const std::vector<float>& v) {
  float m = 0;
  for (const float x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

// Rows [first, first + count) of `a` and `b` (vocab wide) agree to `tolerance` × their scale.
void
check_close(const std::vector<float>& a, std::size_t a_row, const std::vector<float>& b, std::size_t b_row,
            std::size_t count, std::size_t vocab, float tolerance = 2e-4f) {
  float worst = 0, scale = 1e-6f;
  for (std::size_t i = 0; i < count * vocab; ++i) {
    worst = std::max(worst, std::fabs(a[a_row * vocab + i] - b[b_row * vocab + i]));
    scale = std::max(scale, std::fabs(b[b_row * vocab + i]));
  }
  CHECK(worst <= tolerance * scale);
}

} // namespace

// With fp32 activations to fp32 rounding; with int8 activations for the Δ products (where the CPU
// has the integer kernel: runtime/delta_int8.hpp) within their quantization, 5e-3 of the logits'
// scale (measured 1.0e-3 to 1.6e-3 on tiny-base + tiny-code).
TEST_CASE("a decoupled delta's logits equal the merged model's, beside base rows in the same batch") {
  for (const bool int8 : {false, true}) {
    CAPTURE(int8);
    const float tolerance = int8 ? 5e-3f : 2e-4f;
    const auto check_close = [&](const std::vector<float>& a, std::size_t a_row, const std::vector<float>& b,
                                 std::size_t b_row, std::size_t count,
                                 std::size_t vocab) { ::check_close(a, a_row, b, b_row, count, vocab, tolerance); };
    CpuTransformer merged(models() / "tiny-base", {.threads = 2, .delta = test::code_delta()});
    CpuTransformer base(models() / "tiny-base", {.threads = 2});
    CpuTransformer served(models() / "tiny-base", {.threads = 2, .int8_delta_activations = int8});
    const auto code = served.add_variant(test::code_delta());
    CHECK(served.variant(code).resident_bytes() > 0);
    const auto vocab = static_cast<std::size_t>(served.config().vocab_size);

    const std::vector<TokenId> p1{11, 200, 31, 77, 1500, 9}, p2{5, 6, 7}, p3{42, 43, 44, 45, 46, 47, 48, 49, 50, 51};
    // Served batch: base, variant, variant, base — the two variant inputs adjacent (one run of
    // rows), the base rows around them on the plain path.
    const auto s0 = served.add_sequence(), s1 = served.add_sequence(), s2 = served.add_sequence(),
               s3 = served.add_sequence();
    const std::vector<SequenceInput> batch{
        {s0, p1, true, -1}, {s1, p1, true, code}, {s2, p3, true, code}, {s3, p2, true, -1}};
    const auto logits = served.forward(batch);

    const auto m1 = merged.add_sequence(), m2 = merged.add_sequence();
    const std::vector<SequenceInput> merged_batch{{m1, p1, true, -1}, {m2, p3, true, -1}};
    const auto expect_variant = merged.forward(merged_batch);
    const auto b0 = base.add_sequence(), b3 = base.add_sequence();
    const std::vector<SequenceInput> base_batch{{b0, p1, true, -1}, {b3, p2, true, -1}};
    const auto expect_base = base.forward(base_batch);

    check_close(logits, 0, expect_base, 0, p1.size(), vocab);                                 // s0: base
    check_close(logits, p1.size(), expect_variant, 0, p1.size(), vocab);                      // s1: variant
    check_close(logits, 2 * p1.size(), expect_variant, p1.size(), p3.size(), vocab);          // s2: variant
    check_close(logits, 2 * p1.size() + p3.size(), expect_base, p1.size(), p2.size(), vocab); // s3: base
    // The variant really differs from the base on these rows (the test would pass vacuously otherwise).
    float differs = 0;
    for (std::size_t i = 0; i < p1.size() * vocab; ++i)
      differs = std::max(differs, std::fabs(expect_variant[i] - expect_base[i]));
    CHECK(differs > 1e-2f * max_abs(expect_base));

    // One decode step each, the variant rows now split around a base row (two runs).
    const std::vector<TokenId> t{100};
    const std::vector<SequenceInput> step{{s1, t, false, code}, {s0, t, false, -1}, {s2, t, false, code}};
    const auto next = served.forward(step);
    const std::vector<SequenceInput> merged_step{{m1, t, false, -1}, {m2, t, false, -1}};
    const auto expect_next = merged.forward(merged_step);
    const std::vector<SequenceInput> base_step{{b0, t, false, -1}};
    const auto expect_next_base = base.forward(base_step);
    check_close(next, 0, expect_next, 0, 1, vocab);
    check_close(next, 1, expect_next_base, 0, 1, vocab);
    check_close(next, 2, expect_next, 1, 1, vocab);
  }
}

TEST_CASE("a delta of another base, or an unknown variant id, is refused by name") {
  CpuTransformer other(models() / "tiny-quotes", {.threads = 1});
  CHECK_THROWS_WITH_AS(other.add_variant(test::code_delta()), doctest::Contains("different base"), InputError);
  CpuTransformer served(models() / "tiny-base", {.threads = 1});
  const auto s = served.add_sequence();
  const std::vector<TokenId> p{1, 2};
  const std::vector<SequenceInput> batch{{s, p, false, 3}};
  CHECK_THROWS_WITH_AS(served.forward(batch), doctest::Contains("names variant 3"), InputError);
}

TEST_CASE("a load's checkpoint runs before the artifact and before each layer, and a throw abandons the load") {
  CpuTransformer served(models() / "tiny-base", {.threads = 1});
  const auto layers = served.config().num_layers;
  std::int64_t calls = 0;
  CHECK(served.load_variant(test::code_delta(), [&] { ++calls; }) != nullptr);
  CHECK(calls == layers + 1);
  calls = 0;
  const auto stop_at_second_layer = [&] {
    if (++calls == 3)
      throw RuntimeFailure("abandoned");
  };
  CHECK_THROWS_WITH_AS(served.load_variant(test::code_delta(), stop_at_second_layer), "abandoned", RuntimeFailure);
  CHECK(calls == 3);
}

// The kernel file's decode (AVX2 on x86-64 where the shape allows) against quant's reference. The
// shapes: 96 columns in scale groups of 32 (the vector path), or of 14 (groups straddling four
// columns: the loops), and 104 columns (not a run of 16: the loops). Some 2:4 nibbles name one
// column twice or their columns in falling order, as a corrupted file could.
TEST_CASE("the decode of 2-, 4- and 8-bit deltas, 2:4 and dense, equals the artifact's reference decode") {
  const std::int64_t rows = 5;
  for (const bool sparse : {true, false})
    for (const int bits : {2, 4, 8})
      for (const auto& shape : {std::pair<std::int64_t, std::int64_t>{96, 3}, {96, 7}, {104, 1}}) {
        const std::int64_t cols = shape.first, groups = shape.second; // (clang 14 lambdas take no bindings)
        CAPTURE(sparse);
        CAPTURE(bits);
        CAPTURE(cols);
        CAPTURE(groups);
        const auto seed = static_cast<std::uint32_t>(bits * 10 + groups + cols);
        const auto artifact = test::random_delta_artifact(rows, cols, bits, sparse, groups, seed, true);
        const auto delta = CompressedDelta::load(*artifact, "m", rows, cols);
        REQUIRE(delta);
        std::vector<float> decoded(static_cast<std::size_t>(rows * cols));
        delta->decode_rows(0, rows, decoded.data());
        CHECK(decoded == artifact->decode_delta("m", rows, cols));
        std::vector<float> tail(static_cast<std::size_t>(2 * cols)); // rows 3 and 4 alone
        delta->decode_rows(3, 2, tail.data());
        CHECK(std::equal(tail.begin(), tail.end(), decoded.begin() + 3 * cols));
      }
}
