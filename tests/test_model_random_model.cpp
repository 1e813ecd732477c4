// Random fine-tunes (model/random_model): every vector copied, every matrix moved by a low-rank
// part plus noise of the sizes asked for, the base's other files beside it, deterministic.
#include "core/error.hpp"
#include "model/random_model.hpp"
#include "model/weight_store.hpp"
#include "support/test_support.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace optkit;
using namespace optkit::model;

namespace {

nlohmann::json
small_llama() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", 96},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", true}};
}

std::vector<float>
difference(const WeightStore& a, const WeightStore& b, const std::string& name) {
  auto out = b.require(name).to_floats();
  const auto base = a.require(name).to_floats();
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] -= base[i];
  return out;
}

double
rms(const std::vector<float>& values) {
  double sum = 0;
  for (const float v : values)
    sum += static_cast<double>(v) * static_cast<double>(v);
  return std::sqrt(sum / static_cast<double>(values.size()));
}

// Gaussian elimination with partial pivoting: pivots above `tolerance` x the largest entry.
int
numeric_rank(std::vector<double> m, std::size_t rows, std::size_t cols, double tolerance) {
  double largest = 0;
  for (const double v : m)
    largest = std::max(largest, std::abs(v));
  std::size_t rank = 0;
  for (std::size_t c = 0; c < cols && rank < rows; ++c) {
    std::size_t pivot = rank;
    for (std::size_t r = rank; r < rows; ++r)
      if (std::abs(m[r * cols + c]) > std::abs(m[pivot * cols + c]))
        pivot = r;
    if (std::abs(m[pivot * cols + c]) <= tolerance * largest)
      continue;
    for (std::size_t k = 0; k < cols; ++k)
      std::swap(m[rank * cols + k], m[pivot * cols + k]);
    for (std::size_t r = rank + 1; r < rows; ++r) {
      const double f = m[r * cols + c] / m[rank * cols + c];
      for (std::size_t k = c; k < cols; ++k)
        m[r * cols + k] -= f * m[rank * cols + k];
    }
    ++rank;
  }
  return static_cast<int>(rank);
}

} // namespace

TEST_CASE("a random fine-tune moves every matrix by low rank plus noise and copies the rest") {
  test::ScratchDir dir;
  write_random_model(dir / "base", small_llama(), DType::f32, 3);
  test::write_text(dir / "base" / "tokenizer.json", "{\"tokenizer\": true}");
  write_random_finetune(dir / "base", dir / "tune", {4, 2e-3f, 5e-4f}, 11);
  write_random_finetune(dir / "base", dir / "low-rank", {3, 2e-3f, 0.0f}, 11);
  const WeightStore base(dir / "base"), tune(dir / "tune"), low_rank(dir / "low-rank");
  CHECK(test::read_text(dir / "tune" / "tokenizer.json") == "{\"tokenizer\": true}");
  CHECK(test::read_text(dir / "tune" / "config.json") == test::read_text(dir / "base" / "config.json"));
  REQUIRE(tune.names() == base.names());
  int matrices = 0;
  for (const auto& name : base.names()) {
    const auto view = base.require(name);
    CAPTURE(name);
    CHECK(tune.require(name).shape() == view.shape());
    CHECK(tune.require(name).dtype() == DType::f32);
    const auto delta = difference(base, tune, name);
    if (view.shape().size() != 2) {
      CHECK(rms(delta) == 0.0);
      continue;
    }
    ++matrices;
    // RMS sqrt(2e-3^2 + 5e-4^2) = 2.06e-3, within sampling error for matrices of >= 1,024 entries.
    CHECK(rms(delta) == doctest::Approx(2.06e-3).epsilon(0.25));
    const auto pure = difference(base, low_rank, name);
    const auto rows = static_cast<std::size_t>(view.shape()[0]), cols = static_cast<std::size_t>(view.shape()[1]);
    std::vector<double> as_double(pure.begin(), pure.end());
    CHECK(numeric_rank(as_double, rows, cols, 1e-3) == 3);
    std::vector<double> noisy(delta.begin(), delta.end());
    CHECK(numeric_rank(noisy, rows, cols, 1e-3) > 3);
  }
  CHECK(matrices == 8); // embeddings, q, k, v, o, gate, up, down (the head is tied)
}

TEST_CASE("a random fine-tune is the same for a seed, another for another seed, and keeps BF16") {
  test::ScratchDir dir;
  write_random_model(dir / "base", small_llama(), DType::bf16, 3);
  write_random_finetune(dir / "base", dir / "a", {}, 5);
  write_random_finetune(dir / "base", dir / "b", {}, 5);
  write_random_finetune(dir / "base", dir / "c", {}, 6);
  CHECK(test::read_text(dir / "a" / "model.safetensors") == test::read_text(dir / "b" / "model.safetensors"));
  CHECK(test::read_text(dir / "a" / "model.safetensors") != test::read_text(dir / "c" / "model.safetensors"));
  const WeightStore a(dir / "a");
  CHECK(a.require("model.layers.0.mlp.down_proj.weight").dtype() == DType::bf16);
  CHECK_THROWS_AS(write_random_finetune(dir / "base", dir / "d", {0, 1e-3f, 0.0f}, 1), InputError);
}
