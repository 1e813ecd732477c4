// The 2:4 delta encoding round-trips, and compressed-tensors configs come back as they were written.
#include "core/error.hpp"
#include "model/safetensors_writer.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/delta_format.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <random>
#include <zstd.h>

using namespace optkit;

TEST_CASE("2:4 sparse encoding keeps two values and their positions per group of four") {
  const std::vector<float> q = {0,  -2, 0, 1, 1, 0, 0, -1, 0, 0, 0,  0, 1, 0, -2, 0, //
                                -1, 0,  1, 0, 0, 0, 0, 1,  0, 1, -2, 0, 0, 0, 0,  0};
  // Row 0's third group keeps two zeros (a mid-rise grid's ½·s); row 1's last keeps 0 and 1.
  const std::vector<std::uint8_t> kept = {0, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0, //
                                          1, 0, 1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0};
  const auto enc = quant::encode_sparse_2_4(q, kept, 2, 16, 2);
  CHECK(enc.indices.size() == 4);
  CHECK(enc.values.size() == 2); // 8 kept 2-bit values per row → one word
  CHECK((enc.indices[0] & 0x0f) == (1 | (3 << 2)));
  CHECK((enc.indices[0] >> 4) == (0 | (3 << 2)));
  CHECK((enc.indices[1] & 0x0f) == (0 | (1 << 2)));
  for (const float offset : {0.0f, 0.5f})
    for (std::int64_t r = 0; r < 2; ++r) {
      std::vector<float> row(16);
      quant::decode_sparse_2_4_row(enc.values.data() + r, enc.indices.data() + r * 2, 16, 2, offset, row.data());
      for (std::int64_t c = 0; c < 16; ++c) {
        const auto i = static_cast<std::size_t>(r * 16 + c);
        CHECK(row[static_cast<std::size_t>(c)] == (kept[i] ? q[i] + offset : 0.0f));
      }
    }
  std::vector<std::uint8_t> three = kept;
  three[0] = 1;
  CHECK_THROWS_WITH_AS(quant::encode_sparse_2_4(q, three, 2, 16, 2), doctest::Contains("row 0 columns 0-3"),
                       InputError);
  std::vector<std::uint8_t> one = kept;
  one[1] = 0;
  CHECK_THROWS_AS(quant::encode_sparse_2_4(q, one, 2, 16, 2), InputError);
}

TEST_CASE("an artifact's levels decide what a stored value means, and a bad one is refused") {
  // One 2:4 row of 8 columns, int2, scale 2: kept values q = -2 and 1, then 0 and -1.
  const std::vector<float> q = {-2, 0, 0, 1, 0, 0, 0, -1};
  const std::vector<std::uint8_t> kept = {1, 0, 0, 1, 1, 0, 0, 1};
  const auto enc = quant::encode_sparse_2_4(q, kept, 1, 8, 2);
  model::TensorSet tensors;
  tensors.add_values("m.delta_values", model::DType::i32, {1, 1}, enc.values);
  tensors.add_values("m.delta_indices", model::DType::u8, {1, 1}, enc.indices);
  tensors.add_values("m.delta_scale", model::DType::f32, {1, 1}, std::vector<float>{2.0f});
  test::ScratchDir dir;
  model::write_safetensors(dir.path() / "delta.safetensors", tensors.tensors());
  const auto text = test::read_text(dir.path() / "delta.safetensors");
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  const std::vector<std::byte> bytes(begin, begin + text.size());
  auto decode = [&](const nlohmann::json& levels) {
    nlohmann::json config = {
        {"format", "optkit-delta"}, {"version", 1}, {"bits", 2}, {"base", nlohmann::json::object()}};
    if (!levels.is_null())
      config["levels"] = levels;
    return quant::DeltaArtifact(config, bytes, "test").decode_delta("m", 1, 8);
  };
  CHECK(decode(nullptr) == std::vector<float>{-4, 0, 0, 2, 0, 0, 0, -2});
  CHECK(decode("midtread") == std::vector<float>{-4, 0, 0, 2, 0, 0, 0, -2});
  CHECK(decode("midrise") == std::vector<float>{-3, 0, 0, 3, 1, 0, 0, -1});
  CHECK_THROWS_WITH_AS(decode("nf2"), doctest::Contains("levels must be"), InputError);
}

TEST_CASE("quantization_config: the keys vLLM reads, and a round trip through the reader") {
  quant::QuantizationConfig c;
  c.format = "int-quantized";
  c.groups.push_back({{"Linear"},
                      {8, quant::NumberType::integer, true, quant::Strategy::channel, 0, false},
                      quant::QuantArgs{8, quant::NumberType::integer, true, quant::Strategy::token, 0, true}});
  c.ignore = {"lm_head", "re:.*vision.*"};
  const auto j = quant::to_json(c);
  CHECK(j.at("quant_method") == "compressed-tensors");
  CHECK(j.at("sparsity_config") == nlohmann::json::object());
  CHECK(j.at("config_groups").at("group_0").at("weights").at("strategy") == "channel");
  CHECK(!j.at("config_groups").at("group_0").at("weights").contains("scale_dtype"));
  const auto back = quant::read_quantization_config({{"quantization_config", j}}, "config.json");
  REQUIRE(back);
  CHECK(back->format == "int-quantized");
  REQUIRE(back->groups.size() == 1);
  CHECK(back->groups[0].input_activations->strategy == quant::Strategy::token);
  CHECK(back->ignores("lm_head"));
  CHECK(back->ignores("model.vision.proj"));
  CHECK(!back->ignores("model.layers.0.mlp.up_proj"));
  CHECK(back->group_for("model.layers.0.mlp.up_proj") == &back->groups[0]);
  CHECK(back->group_for("lm_head") == nullptr);
  CHECK(quant::infer_format(c.groups[0].weights, std::nullopt) == "pack-quantized");
  CHECK(quant::infer_format({8, quant::NumberType::floating, true, quant::Strategy::channel, 0, false},
                            c.groups[0].input_activations) == "float-quantized");
  auto awq = j;
  awq["quant_method"] = "awq";
  CHECK_THROWS_WITH_AS(quant::read_quantization_config({{"quantization_config", awq}}, "config.json"),
                       doctest::Contains("quant_method 'awq' is not supported"), InputError);
  auto none = j;
  none["config_groups"] = nlohmann::json::object();
  CHECK_THROWS_WITH_AS(quant::read_quantization_config({{"quantization_config", none}}, "config.json"),
                       doctest::Contains("at least one group"), InputError);
  CHECK(!quant::read_quantization_config(nlohmann::json::object(), "config.json"));
}

TEST_CASE("quantization_config: per-layer groups of a mixed-precision plan match as vLLM matches them") {
  // What compress --plan writes for layer bits [4, 3, 16, 4]: a group per bitwidth, 16-bit ignored.
  const quant::QuantArgs int4{4, quant::NumberType::integer, true, quant::Strategy::group, 128, false};
  auto int3 = int4;
  int3.bits = 3;
  quant::QuantizationConfig c;
  c.format = "pack-quantized";
  c.groups = {{{"re:model[.]layers[.](1)[.]"}, int3, std::nullopt},
              {{"re:model[.]layers[.](0|3)[.]"}, int4, std::nullopt}};
  c.ignore = {"lm_head", "re:model[.]layers[.](2)[.]"};
  const auto back = quant::read_quantization_config({{"quantization_config", quant::to_json(c)}}, "config.json");
  REQUIRE(back);
  REQUIRE(back->groups.size() == 2);
  auto bits_of = [&](const std::string& module) {
    const auto* g = back->group_for(module);
    return g ? g->weights.bits : 16;
  };
  CHECK(bits_of("model.layers.0.self_attn.q_proj") == 4);
  CHECK(bits_of("model.layers.1.mlp.down_proj") == 3);
  CHECK(bits_of("model.layers.2.mlp.down_proj") == 16);
  CHECK(bits_of("model.layers.3.self_attn.o_proj") == 4);
  CHECK(bits_of("model.layers.13.self_attn.o_proj") == 16); // "1" does not match layer 13
  CHECK(bits_of("lm_head") == 16);
  // A name target outranks a Linear group, whatever the group order.
  quant::QuantizationConfig named;
  named.format = "pack-quantized";
  named.groups = {{{"Linear"}, int4, std::nullopt}, {{"model.layers.0.mlp.up_proj"}, int3, std::nullopt}};
  CHECK(named.group_for("model.layers.0.mlp.up_proj")->weights.bits == 3);
  CHECK(named.group_for("model.layers.0.mlp.gate_proj")->weights.bits == 4);
}

TEST_CASE("the zstd stage streams the tensors file: the frame records its size and decompresses to its bytes") {
  test::ScratchDir dir;
  // Several MiB of half-compressible bytes: many zstd blocks and input buffers.
  std::vector<std::uint8_t> values(5'000'000);
  std::mt19937 rng(3);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<std::uint8_t>(i % 3 == 0 ? rng() : i / 1000);
  model::write_safetensors(
      dir / quant::kDeltaPlainFile,
      {{"v", model::DType::u8, {static_cast<std::int64_t>(values.size())}, std::as_bytes(std::span(values))}});
  const auto plain = test::read_text(dir / quant::kDeltaPlainFile);
  quant::zstd_compress_delta_tensors(dir.path());
  CHECK_FALSE(std::filesystem::exists(dir / quant::kDeltaPlainFile));
  const auto compressed = test::read_text(dir / quant::kDeltaZstdFile);
  CHECK(compressed.size() < plain.size());
  REQUIRE(ZSTD_getFrameContentSize(compressed.data(), compressed.size()) == plain.size());
  std::string back(plain.size(), '\0');
  CHECK(ZSTD_decompress(back.data(), back.size(), compressed.data(), compressed.size()) == plain.size());
  CHECK(back == plain);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    CHECK(entry.path().filename() == quant::kDeltaZstdFile); // no temporary left
}
