// plan hetero's indicators from real weights and activations (SplitQuant §IV-B) on the tiny
// model: the weight maxima and widths against the safetensors read directly, the first layer's
// input variance against an RMSNorm of the embeddings computed here, the power iteration against
// a closed form, and the shape of both indicators over bitwidths and layers.
#include "core/error.hpp"
#include "hetero/layer_statistics.hpp"
#include "hetero/variance_indicator.hpp"
#include "model/model_config.hpp"
#include "model/weight_store.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

using namespace optkit;
using namespace optkit::hetero;

TEST_CASE("top_eigenvalue: power iteration against closed forms") {
  // [[2, 1], [1, 2]]: eigenvalues 3 and 1.
  CHECK(top_eigenvalue({2, 1, 1, 2}, 2) == doctest::Approx(3.0).epsilon(1e-5));
  // A rank-one u·uᵀ: its eigenvalue is ‖u‖².
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const std::int64_t n = 24;
  std::vector<float> u(n), a(std::size_t(n * n));
  double norm = 0;
  for (auto& v : u) {
    v = normal(rng);
    norm += double(v) * double(v);
  }
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      a[std::size_t(i * n + j)] = u[std::size_t(i)] * u[std::size_t(j)];
  CHECK(top_eigenvalue(a, n) == doctest::Approx(norm).epsilon(1e-4));
  CHECK(top_eigenvalue(std::vector<float>(16, 0.0f), 4) == 0.0);
}

TEST_CASE("measure_layer_statistics: tiny-base's weights and activations") {
  const auto dir = test::testdata_dir() / "models" / "tiny-base";
  const auto config = model::load_model_config(dir);
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(config.vocab_size) - 1);
  std::vector<std::vector<std::int32_t>> samples(3);
  std::int64_t tokens = 0;
  for (std::size_t s = 0; s < samples.size(); ++s) {
    samples[s].resize(10 + 7 * s);
    for (auto& t : samples[s])
      t = token(rng);
    tokens += static_cast<std::int64_t>(samples[s].size());
  }
  const std::vector<int> bits = {3, 4, 8, 16};
  const auto measured = measure_layer_statistics(dir, samples, {.bits = bits, .hessian = true, .threads = 1});
  REQUIRE(measured.layers.size() == std::size_t(config.num_layers));
  CHECK(measured.tokens == tokens);

  // Widths and maxima straight from the safetensors.
  const model::WeightStore store(dir);
  for (std::size_t layer = 0; layer < measured.layers.size(); ++layer) {
    REQUIRE(measured.layers[layer].size() == 7);
    for (const auto& op : measured.layers[layer]) {
      const std::string prefix =
          op.name == "gate_proj" || op.name == "up_proj" || op.name == "down_proj" ? "mlp." : "self_attn.";
      const auto view = store.require(fmt::format("model.layers.{}.{}{}.weight", layer, prefix, op.name));
      const auto w = view.to_floats();
      double max_abs = 0;
      for (const float v : w)
        max_abs = std::max(max_abs, double(std::abs(v)));
      CHECK(op.max_abs_weight == max_abs);
      CHECK(op.input_width == double(view.info->shape.back()));
      CHECK(op.input_variance > 0);
    }
  }

  // Layer 0's attention input: RMSNorm(embedding) · γ, its variance over every entry.
  const auto embedding = store.require("model.embed_tokens.weight").to_floats();
  const auto gamma = store.require("model.layers.0.input_layernorm.weight").to_floats();
  const auto hidden = config.hidden_size;
  double sum = 0, squares = 0, count = 0;
  for (const auto& sample : samples)
    for (const auto t : sample) {
      const float* e = embedding.data() + std::int64_t(t) * hidden;
      double ms = 0;
      for (std::int64_t i = 0; i < hidden; ++i)
        ms += double(e[i]) * double(e[i]);
      const double inv = 1.0 / std::sqrt(ms / double(hidden) + double(config.rms_norm_eps));
      for (std::int64_t i = 0; i < hidden; ++i) {
        const double v = double(e[i]) * inv * double(gamma[std::size_t(i)]);
        sum += v;
        squares += v * v;
        count += 1;
      }
    }
  const double expected = squares / count - (sum / count) * (sum / count);
  CHECK(measured.layers[0][0].input_variance == doctest::Approx(expected).epsilon(1e-3));
  CHECK(measured.layers[0][1].input_variance == measured.layers[0][0].input_variance); // q and k read one input

  // Both indicators: fewer bits, more loss; 16 bits none; layers tell apart (unlike shape-only).
  const auto variance = variance_indicator(measured.layers, bits);
  for (const auto* omega : {&variance, &measured.hessian_omega}) {
    REQUIRE(omega->size() == measured.layers.size());
    double lowest = 0;
    for (const auto& row : *omega) {
      CHECK(row[0] > row[1]);
      CHECK(row[1] > row[2]);
      CHECK(row[2] > 0);
      CHECK(row[3] == 0);
      lowest += row[0];
    }
    CHECK(lowest == doctest::Approx(1.0));
    const auto [least, most] =
        std::minmax_element(omega->begin(), omega->end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
    CHECK((*most)[0] > 1.01 * (*least)[0]);
  }
  CHECK(measured.variance_seconds > 0);
  CHECK(measured.hessian_seconds > 0);

  CHECK_THROWS_AS(measure_layer_statistics(dir, {}, {.bits = bits}), InputError);
}
