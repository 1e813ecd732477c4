// The 2:4 delta encoding round-trips, and compressed-tensors configs come back as they were written.
#include "core/error.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/delta_format.hpp"

#include <doctest/doctest.h>

using namespace optkit;

TEST_CASE("2:4 sparse encoding keeps two values and their positions per group of four") {
  const std::vector<float> q = {0,  -2, 0, 1, 1, 0, 0, -1, 0, 0, 0,  0, 1, 0, -2, 0, //
                                -1, 0,  1, 0, 0, 0, 0, 1,  0, 1, -2, 0, 0, 0, 0,  0};
  const auto enc = quant::encode_sparse_2_4(q, 2, 16, 2);
  CHECK(enc.indices.size() == 4);
  CHECK(enc.values.size() == 2); // 8 kept 2-bit values per row → one word
  CHECK((enc.indices[0] & 0x0f) == (1 | (3 << 2)));
  CHECK((enc.indices[0] >> 4) == (0 | (3 << 2)));
  for (std::int64_t r = 0; r < 2; ++r) {
    std::vector<float> row(16);
    quant::decode_sparse_2_4_row(enc.values.data() + r, enc.indices.data() + r * 2, 16, 2, row.data());
    for (std::int64_t c = 0; c < 16; ++c)
      CHECK(row[static_cast<std::size_t>(c)] == q[static_cast<std::size_t>(r * 16 + c)]);
  }
  std::vector<float> dense(16, 1.0f);
  CHECK_THROWS_AS(quant::encode_sparse_2_4(dense, 1, 16, 4), InputError);
}

TEST_CASE("quantization_config: the keys vLLM reads, and a round trip through the reader") {
  quant::QuantizationConfig c;
  c.format = "int-quantized";
  c.weights = {8, quant::NumberType::integer, true, quant::Strategy::channel, 0, false};
  c.input_activations = quant::QuantArgs{8, quant::NumberType::integer, true, quant::Strategy::token, 0, true};
  c.ignore = {"lm_head", "re:.*vision.*"};
  const auto j = quant::to_json(c);
  CHECK(j.at("quant_method") == "compressed-tensors");
  CHECK(j.at("sparsity_config") == nlohmann::json::object());
  CHECK(j.at("config_groups").at("group_0").at("weights").at("strategy") == "channel");
  CHECK(!j.at("config_groups").at("group_0").at("weights").contains("scale_dtype"));
  const auto back = quant::read_quantization_config({{"quantization_config", j}}, "config.json");
  REQUIRE(back);
  CHECK(back->format == "int-quantized");
  CHECK(back->input_activations->strategy == quant::Strategy::token);
  CHECK(back->ignores("lm_head"));
  CHECK(back->ignores("model.vision.proj"));
  CHECK(!back->ignores("model.layers.0.mlp.up_proj"));
  CHECK(quant::infer_format(c.weights, std::nullopt) == "pack-quantized");
  CHECK(quant::infer_format({8, quant::NumberType::floating, true, quant::Strategy::channel, 0, false},
                            c.input_activations) == "float-quantized");
  auto awq = j;
  awq["quant_method"] = "awq";
  CHECK_THROWS_WITH_AS(quant::read_quantization_config({{"quantization_config", awq}}, "config.json"),
                       doctest::Contains("quant_method 'awq' is not supported"), InputError);
  CHECK(!quant::read_quantization_config(nlohmann::json::object(), "config.json"));
}
