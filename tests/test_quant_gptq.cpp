// GPTQ and SparseGPT 2:4 against an independent PyTorch implementation
// (tests/oracles/gptq_reference.py wrote testdata/golden/gptq_cases.safetensors): same inputs,
// same grid, the reconstructions must agree.
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/safetensors.hpp"
#include "quant/gptq.hpp"
#include "quant/hessian.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit;
using quant::NumberType;
using quant::QuantArgs;
using quant::Strategy;

namespace {

std::vector<float>
tensor(const model::SafetensorsFile& file, const std::string& name) {
  const auto view = file.find(name);
  REQUIRE(view.info);
  std::vector<float> out(view.element_count());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = view.at(i);
  return out;
}

struct Agreement {
  double equal_fraction = 0; // elements within 1e-5
  double max_abs = 0;
};

Agreement
compare(const std::vector<float>& a, const std::vector<float>& b) {
  Agreement r;
  std::size_t equal = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    equal += d <= 1e-5 ? 1 : 0;
    r.max_abs = std::max(r.max_abs, d);
  }
  r.equal_fraction = static_cast<double>(equal) / static_cast<double>(a.size());
  return r;
}

} // namespace

TEST_CASE("GPTQ and SparseGPT reconstructions agree with the PyTorch reference") {
  const model::SafetensorsFile golden(test::testdata_dir() / "golden" / "gptq_cases.safetensors");
  const auto x = tensor(golden, "X"), w = tensor(golden, "W");
  const std::int64_t rows = 48, cols = 96, tokens = 400;
  quant::Hessian hessian(cols);
  hessian.add(x.data(), tokens, 4);
  auto h = hessian.matrix();
  ThreadPool pool(2);
  QuantArgs int4{4, NumberType::integer, true, Strategy::group, 32, false};
  QuantArgs int8{8, NumberType::integer, true, Strategy::channel, 0, false};
  QuantArgs int2_midrise{2, NumberType::integer, true, Strategy::group, 32, false};
  int2_midrise.levels = quant::Levels::midrise;
  struct Case {
    const char* name;
    std::optional<QuantArgs> args;
    bool act_order, sparse;
  };
  for (const Case& c : {Case{"gptq_int4_g32", int4, false, false}, Case{"gptq_int4_g32_actorder", int4, true, false},
                        Case{"gptq_int8_channel", int8, false, false}, Case{"sparsegpt_24", std::nullopt, false, true},
                        Case{"sparsegpt_24_int4_g32", int4, false, true},
                        Case{"sparsegpt_24_int2_g32_midrise", int2_midrise, false, true}}) {
    CAPTURE(c.name);
    quant::GptqOptions o;
    o.block_size = 32;
    o.act_order = c.act_order;
    o.sparse_2_4 = c.sparse;
    const auto got = quant::gptq(w, rows, cols, h, c.args, model::DType::bf16, o, pool);
    const auto expected = tensor(golden, c.name);
    const auto agreement = compare(got.weight, expected);
    // fp32 on both sides in a different order: a value on a rounding boundary may land one grid
    // step apart, and the error it propagates moves later columns slightly.
    CHECK(agreement.equal_fraction >= 0.97);
    const double ours = quant::relative_output_error(w, got.weight, rows, cols, h);
    const double theirs = quant::relative_output_error(w, expected, rows, cols, h);
    CHECK(ours == doctest::Approx(theirs).epsilon(0.02));
    if (c.sparse)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < cols; g += 4) {
          int kept = 0;
          for (int k = 0; k < 4; ++k) {
            const auto i = static_cast<std::size_t>(r * cols + g + k);
            kept += got.kept[i];
            if (!got.kept[i])
              CHECK(got.weight[i] == 0.0f);
            else if (c.args && c.args->levels == quant::Levels::midrise) // no zero level: q + ½ ≠ 0
              CHECK(got.weight[i] == (got.q[i] + 0.5f) * got.grid->scale_at(r, g + k));
          }
          CHECK(kept == 2);
        }
  }
}

TEST_CASE("GPTQ beats round-to-nearest on the calibration objective; the dead input is zeroed") {
  const model::SafetensorsFile golden(test::testdata_dir() / "golden" / "gptq_cases.safetensors");
  const auto x = tensor(golden, "X"), w = tensor(golden, "W");
  quant::Hessian hessian(96);
  hessian.add(x.data(), 400, 4);
  auto h = hessian.matrix();
  ThreadPool pool(2);
  QuantArgs int4{4, NumberType::integer, true, Strategy::group, 32, false};
  const auto g = quant::gptq(w, 48, 96, h, int4, model::DType::bf16, {}, pool);
  const auto r = quant::rtn(w, 48, 96, int4, model::DType::bf16);
  CHECK(quant::relative_output_error(w, g.weight, 48, 96, h) <
        0.7 * quant::relative_output_error(w, r.weight, 48, 96, h));
  for (std::int64_t row = 0; row < 48; ++row)
    CHECK(g.weight[static_cast<std::size_t>(row * 96 + 17)] == 0.0f);
  CHECK(g.damping_attempts == 1);
  // Grid values times the stored scale give the reconstruction exactly.
  for (std::size_t i = 0; i < g.q.size(); ++i)
    CHECK(g.q[i] * g.grid->scale_at(static_cast<std::int64_t>(i) / 96, static_cast<std::int64_t>(i) % 96) ==
          g.weight[i]);
}

TEST_CASE("a Hessian that dampening cannot make positive definite is an error, never an RTN fall-back") {
  ThreadPool pool(1);
  // Negative definite: no dampening fraction of its (negative) mean diagonal helps.
  std::vector<float> h = {-2, 0, 0, 0, 0, -1, 0, 0, 0, 0, -3, 0, 0, 0, 0, -1};
  std::vector<float> w(8, 0.5f);
  QuantArgs int4{4, NumberType::integer, true, Strategy::channel, 0, false};
  quant::GptqOptions o;
  o.layer = "model.layers.3.mlp.up_proj";
  CHECK_THROWS_WITH_AS(quant::gptq(w, 2, 4, h, int4, model::DType::f32, o, pool),
                       doctest::Contains("model.layers.3.mlp.up_proj: the calibration Hessian is not positive "
                                         "definite even with dampening"),
                       RuntimeFailure);
  // A singular but positive semidefinite H succeeds once damped (a retry with more damping if needed).
  std::vector<float> singular = {1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1};
  const auto ok = quant::gptq(w, 2, 4, singular, int4, model::DType::f32, {}, pool);
  CHECK(ok.damping_attempts >= 1);
}

TEST_CASE("GPTQ gives the Hessian it factored in back bit for bit: after act-order, a retry, and a failure") {
  const model::SafetensorsFile golden(test::testdata_dir() / "golden" / "gptq_cases.safetensors");
  const auto x = tensor(golden, "X"), w = tensor(golden, "W");
  quant::Hessian hessian(96);
  hessian.add(x.data(), 400, 4);
  auto h = hessian.matrix();
  const auto original = h;
  ThreadPool pool(2);
  QuantArgs int4{4, NumberType::integer, true, Strategy::group, 32, false};
  quant::GptqOptions o;
  o.block_size = 32;
  o.act_order = true; // H permuted in place, and the dead input 17's zero diagonal set to 1
  const auto first = quant::gptq(w, 48, 96, h, int4, model::DType::bf16, o, pool);
  CHECK(h == original);
  // The same H again gives the same bits: nothing of the first factorization is left in it.
  const auto second = quant::gptq(w, 48, 96, h, int4, model::DType::bf16, o, pool);
  CHECK(second.weight == first.weight);
  CHECK(second.q == first.q);
  CHECK(h == original);

  // Singular: the first dampening may fail; H is rebuilt for the next one and given back.
  std::vector<float> singular = {1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1};
  const auto singular_copy = singular;
  std::vector<float> w4(8, 0.5f);
  quant::GptqOptions once;
  once.dampening = 0;
  once.max_damping_attempts = 2; // 0, then 0 again: both fail
  CHECK_THROWS_AS(quant::gptq(w4, 2, 4, singular, int4, model::DType::f32, once, pool), RuntimeFailure);
  CHECK(singular == singular_copy);
  const auto damped = quant::gptq(w4, 2, 4, singular, int4, model::DType::f32, {}, pool);
  CHECK(damped.damping_attempts >= 1);
  CHECK(singular == singular_copy);
}

TEST_CASE("a Hessian taken in place has matrix()'s very values and is empty afterwards") {
  quant::Hessian h(5);
  std::vector<float> x(7 * 5);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(static_cast<float>(i) * 0.7f) * 3.0f;
  h.add(x.data(), 7, 3);
  const auto copy = h.matrix();
  const auto taken = std::move(h).take_matrix();
  CHECK(taken == copy); // bit for bit, both triangles
  CHECK_THROWS_WITH_AS(h.matrix(), doctest::Contains("no calibration data"),
                       RuntimeFailure); // NOLINT(bugprone-use-after-move)
}
