// config.json parsing: architectures, GQA, head_dim, rope scaling (against the closed form), errors.
#include "core/error.hpp"
#include "model/model_config.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <numbers>

using namespace optkit;
using namespace optkit::model;
using nlohmann::json;

namespace {

json
llama() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 128256},
          {"hidden_size", 2048},
          {"intermediate_size", 8192},
          {"num_hidden_layers", 16},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"rope_theta", 500000.0},
          {"tie_word_embeddings", true},
          {"max_position_embeddings", 131072},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", 32.0},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 8192}}}};
}

} // namespace

TEST_CASE("a Llama-3.2-1B config parses to its known shape and parameter count") {
  const auto c = parse_model_config(llama(), "config.json");
  CHECK(c.architecture == Architecture::llama);
  CHECK(c.head_dim == 64);
  CHECK(c.kv_dim() == 512);
  CHECK(c.tie_word_embeddings);
  CHECK(c.parameter_count() == 1'235'814'400); // Llama-3.2-1B's published count
}

TEST_CASE("llama3 rope scaling leaves high frequencies, divides low ones, blends the middle") {
  const auto c = parse_model_config(llama(), "config.json");
  const auto inv = rope_inverse_frequencies(c);
  REQUIRE(inv.size() == 32);
  const auto plain = [&](std::size_t i) { return 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / 64.0); };
  CHECK(inv[0] == doctest::Approx(plain(0)));        // wavelength 2π < 2048: unchanged
  CHECK(inv[31] == doctest::Approx(plain(31) / 32)); // wavelength > 8192: divided by factor
  for (std::size_t i = 0; i < inv.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / plain(i);
    if (wavelen >= 2048 && wavelen <= 8192) {
      const double smooth = (8192 / wavelen - 1.0) / 3.0;
      CHECK(inv[i] == doctest::Approx((1 - smooth) * plain(i) / 32 + smooth * plain(i)));
    }
  }
}

TEST_CASE("Qwen2 gets q/k/v bias, Qwen3 q/k norms and an explicit head_dim, Mistral its window") {
  auto q2 = llama();
  q2["architectures"] = {"Qwen2ForCausalLM"};
  q2.erase("rope_scaling");
  CHECK(parse_model_config(q2, "c").qkv_bias);
  auto q3 = q2;
  q3["architectures"] = {"Qwen3ForCausalLM"};
  q3["head_dim"] = 128;
  const auto c3 = parse_model_config(q3, "c");
  CHECK(c3.qk_norm);
  CHECK_FALSE(c3.qkv_bias);
  CHECK(c3.q_dim() == 4096);
  auto m = q2;
  m["architectures"] = {"MistralForCausalLM"};
  m["sliding_window"] = 4096;
  CHECK(parse_model_config(m, "c").sliding_window == 4096);
  m["sliding_window"] = nullptr;
  CHECK(parse_model_config(m, "c").sliding_window == 0);
}

TEST_CASE("bad configs name the file and the key") {
  auto c = llama();
  c["architectures"] = {"FalconForCausalLM"};
  CHECK_THROWS_WITH_AS(parse_model_config(c, "x/config.json"),
                       doctest::Contains("x/config.json: architecture 'FalconForCausalLM' is not supported"),
                       InputError);
  c = llama();
  c.erase("hidden_size");
  CHECK_THROWS_WITH_AS(parse_model_config(c, "config.json"), doctest::Contains("missing required key 'hidden_size'"),
                       InputError);
  c = llama();
  c["num_key_value_heads"] = 5;
  CHECK_THROWS_WITH_AS(parse_model_config(c, "config.json"), doctest::Contains("not a multiple"), InputError);
  c = llama();
  c["rope_scaling"]["rope_type"] = "yarn";
  CHECK_THROWS_WITH_AS(parse_model_config(c, "config.json"), doctest::Contains("'yarn' is not supported"), InputError);
  c = llama();
  c["vocab_size"] = "big";
  CHECK_THROWS_WITH_AS(parse_model_config(c, "config.json"), doctest::Contains("'vocab_size' must be a positive"),
                       InputError);
}
