// llama-quantize's k-quant mixtures for dense Llama models: use_more_bits' layers (the reference's
// 32-layer example), the output at Q6_K (Q8_0 when its rows are not whole super-blocks), the
// 32-value fallbacks, tied embeddings; the 8-expert rules and stacked experts; GGUF recipes' validation; rope_freqs as
// llama.cpp's converter computes them.
#include "compress/gguf_metadata.hpp"
#include "compress/gguf_mixture.hpp"
#include "compress/recipe.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace optkit;
using compress::GgufFileType;
using compress::GgufTensorPlace;
using compress::GgufTensorRole;
using model::GgmlType;

namespace {

GgmlType
type_of(GgufFileType file_type, const std::string& name, std::int64_t layers, std::int64_t cols, bool tied = false) {
  const auto place = compress::gguf_tensor_place(name);
  REQUIRE(place.has_value());
  return compress::gguf_tensor_type(file_type, *place, {layers, tied}, cols);
}

} // namespace

TEST_CASE("Q4_K_M gives attn_v and ffn_down Q6_K in the layers use_more_bits picks") {
  // n = 32: layers 0-3, 6, 9, ..., 27 and 28-31 (the reference's example).
  std::vector<std::int64_t> more;
  for (std::int64_t layer = 0; layer < 32; ++layer)
    if (type_of(GgufFileType::q4_k_m, fmt::format("blk.{}.ffn_down.weight", layer), 32, 4096) == GgmlType::q6_k)
      more.push_back(layer);
  CHECK(more == std::vector<std::int64_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31});
  CHECK(type_of(GgufFileType::q4_k_m, "blk.6.attn_v.weight", 32, 4096) == GgmlType::q6_k);
  CHECK(type_of(GgufFileType::q4_k_m, "blk.7.attn_v.weight", 32, 4096) == GgmlType::q4_k);
  CHECK(type_of(GgufFileType::q4_k_m, "blk.7.attn_q.weight", 32, 4096) == GgmlType::q4_k);
  CHECK(type_of(GgufFileType::q5_k_m, "blk.7.ffn_up.weight", 32, 4096) == GgmlType::q5_k);
  CHECK(type_of(GgufFileType::q5_k_m, "blk.31.ffn_down.weight", 32, 4096) == GgmlType::q6_k);
  CHECK(type_of(GgufFileType::q6_k, "blk.7.attn_q.weight", 32, 4096) == GgmlType::q6_k);
  CHECK(type_of(GgufFileType::q8_0, "blk.0.ffn_down.weight", 32, 4096) == GgmlType::q8_0);
}

TEST_CASE("Q4_K_S: Q5_K for attn_v in the first 4 layers and ffn_down in the first eighth; Q5_K_S: Q5_K") {
  CHECK(type_of(GgufFileType::q4_k_s, "blk.3.attn_v.weight", 32, 4096) == GgmlType::q5_k);
  CHECK(type_of(GgufFileType::q4_k_s, "blk.4.attn_v.weight", 32, 4096) == GgmlType::q4_k);
  CHECK(type_of(GgufFileType::q4_k_s, "blk.3.ffn_down.weight", 32, 4096) == GgmlType::q5_k);
  CHECK(type_of(GgufFileType::q4_k_s, "blk.4.ffn_down.weight", 32, 4096) == GgmlType::q4_k);
  CHECK(type_of(GgufFileType::q4_k_s, "blk.0.attn_q.weight", 32, 4096) == GgmlType::q4_k);
  CHECK(type_of(GgufFileType::q4_k_s, "output.weight", 32, 4096) == GgmlType::q6_k);
  CHECK(type_of(GgufFileType::q4_k_s, "blk.0.attn_v.weight", 4, 192) == GgmlType::q5_1); // Q5_K's fallback
  CHECK(type_of(GgufFileType::q5_k_s, "blk.0.ffn_down.weight", 32, 4096) == GgmlType::q5_k);
  CHECK(type_of(GgufFileType::q5_k_s, "blk.31.attn_v.weight", 32, 4096) == GgmlType::q5_k);
  CHECK(type_of(GgufFileType::q5_k_s, "output.weight", 32, 4096) == GgmlType::q6_k);
  CHECK(model::parse_gguf_file_type("Q4_K_S") == GgufFileType::q4_k_s);
  CHECK(static_cast<std::uint32_t>(GgufFileType::q5_k_s) == 16);
}

TEST_CASE("a 70B model's attn_v takes Q5_K where Q4_K_M gives Q4_K, as llama-quantize's LLM_TYPE_70B rule") {
  CHECK(compress::gguf_size_70b("llama", 80, 64, 8));        // Llama 3.1 70B
  CHECK_FALSE(compress::gguf_size_70b("llama", 80, 64, 64)); // Llama 1 65B: no GQA
  CHECK(compress::gguf_size_70b("qwen2", 80, 64, 8));        // Qwen2.5 72B
  CHECK_FALSE(compress::gguf_size_70b("qwen3", 80, 64, 8));
  CHECK_FALSE(compress::gguf_size_70b("llama", 32, 32, 8));
  const auto v = [](GgufFileType type, std::int64_t layer, const char* module = "attn_v") {
    const auto place = compress::gguf_tensor_place(fmt::format("blk.{}.{}.weight", layer, module));
    REQUIRE(place.has_value());
    return compress::gguf_tensor_type(type, *place, {80, false, true}, 8192);
  };
  CHECK(v(GgufFileType::q4_k_m, 20) == GgmlType::q5_k); // use_more_bits(20, 80) is false
  CHECK(v(GgufFileType::q4_k_m, 21) == GgmlType::q6_k); // ... and true: Q6_K stays
  CHECK(v(GgufFileType::q4_k_m, 20, "attn_q") == GgmlType::q4_k);
  CHECK(v(GgufFileType::q5_k_m, 20) == GgmlType::q5_k);
  CHECK(v(GgufFileType::q8_0, 20) == GgmlType::q8_0);
}

TEST_CASE("8 experts (Mixtral): attn_k and attn_v at Q8_0, attn_output at Q5_K in Q4_K_M and Q4_K_S; stacked "
          "experts follow ffn_* rules; the router stays unquantized") {
  const auto type = [](GgufFileType file_type, const char* name, std::int64_t experts) {
    const auto place = compress::gguf_tensor_place(name);
    REQUIRE(place.has_value());
    return compress::gguf_tensor_type(file_type, *place, {32, false, false, experts}, 4096);
  };
  CHECK(type(GgufFileType::q4_k_m, "blk.7.attn_k.weight", 8) == GgmlType::q8_0);
  CHECK(type(GgufFileType::q4_k_m, "blk.7.attn_v.weight", 8) == GgmlType::q8_0);
  CHECK(type(GgufFileType::q6_k, "blk.7.attn_v.weight", 8) == GgmlType::q8_0);
  CHECK(type(GgufFileType::q4_k_m, "blk.7.attn_output.weight", 8) == GgmlType::q5_k);
  CHECK(type(GgufFileType::q4_k_s, "blk.7.attn_output.weight", 8) == GgmlType::q5_k);
  CHECK(type(GgufFileType::q5_k_m, "blk.7.attn_output.weight", 8) == GgmlType::q5_k);
  CHECK(type(GgufFileType::q4_k_m, "blk.7.attn_q.weight", 8) == GgmlType::q4_k);
  // Other expert counts (Qwen3-30B-A3B's 128) keep the dense rules.
  CHECK(type(GgufFileType::q4_k_m, "blk.7.attn_k.weight", 128) == GgmlType::q4_k);
  CHECK(type(GgufFileType::q4_k_m, "blk.7.attn_output.weight", 128) == GgmlType::q4_k);
  // Stacked experts: ffn_down_exps takes ffn_down's use_more_bits layers.
  CHECK(type(GgufFileType::q4_k_m, "blk.6.ffn_down_exps.weight", 8) == GgmlType::q6_k);
  CHECK(type(GgufFileType::q4_k_m, "blk.7.ffn_down_exps.weight", 8) == GgmlType::q4_k);
  CHECK(type(GgufFileType::q4_k_m, "blk.6.ffn_gate_exps.weight", 8) == GgmlType::q4_k);
  CHECK(type(GgufFileType::q5_k_m, "blk.6.ffn_up_exps.weight", 8) == GgmlType::q5_k);
  CHECK_FALSE(compress::gguf_tensor_place("blk.0.ffn_gate_inp.weight").has_value());
}

TEST_CASE("the output takes Q6_K, the embedding too when tied; rows of other widths fall back") {
  CHECK(type_of(GgufFileType::q4_k_m, "output.weight", 32, 4096) == GgmlType::q6_k);
  CHECK(type_of(GgufFileType::q4_k_m, "token_embd.weight", 32, 4096) == GgmlType::q4_k);
  CHECK(type_of(GgufFileType::q4_k_m, "token_embd.weight", 32, 4096, true) == GgmlType::q6_k);
  CHECK(type_of(GgufFileType::q8_0, "output.weight", 32, 4096) == GgmlType::q8_0);
  CHECK(type_of(GgufFileType::q4_k_m, "output.weight", 4, 192) == GgmlType::q8_0);
  CHECK(type_of(GgufFileType::q4_k_m, "blk.0.attn_q.weight", 4, 192) == GgmlType::q5_0);
  CHECK(type_of(GgufFileType::q5_k_m, "blk.0.attn_q.weight", 4, 192) == GgmlType::q5_1);
  CHECK(type_of(GgufFileType::q6_k, "blk.0.attn_q.weight", 4, 192) == GgmlType::q8_0);
  CHECK(type_of(GgufFileType::q4_k_m, "blk.0.attn_q.weight", 4, 200) == GgmlType::f16); // not even 32
  CHECK_FALSE(compress::gguf_tensor_place("blk.0.attn_norm.weight").has_value());
  CHECK_FALSE(compress::gguf_tensor_place("rope_freqs.weight").has_value());
  CHECK(static_cast<std::uint32_t>(GgufFileType::q4_k_m) == 15);
  CHECK(model::parse_gguf_file_type("Q5_K_M") == GgufFileType::q5_k_m);
  CHECK(model::gguf_file_type_name(14) == "Q4_K_S");
}

TEST_CASE("a gguf recipe names a file type and nothing of the compressed-tensors pipeline") {
  const auto dir = std::filesystem::temp_directory_path() / ("optkit-test-gguf-recipe-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  const auto ok = compress::load_recipe_file(
      write("ok.yaml", "name: x\ndescription: d\ngguf: {file_type: Q6_K}\ncalibration: {samples: 4}\n"));
  CHECK(ok.gguf == GgufFileType::q6_k);
  CHECK(ok.calibration.samples == 4);
  CHECK_FALSE(ok.needs_calibration());
  CHECK_THROWS_AS(compress::load_recipe_file(write("both.yaml", "name: x\ndescription: d\ngguf: {file_type: Q6_K}\n"
                                                                "scheme: {weights: {num_bits: 4}}\n")),
                  InputError);
  CHECK_THROWS_AS(compress::load_recipe_file(write("neither.yaml", "name: x\ndescription: d\n")), InputError);
  CHECK_THROWS_AS(compress::load_recipe_file(write(
                      "algo.yaml", "name: x\ndescription: d\ngguf: {file_type: Q6_K}\nalgorithm: {method: rtn}\n")),
                  InputError);
  CHECK_THROWS_AS(compress::load_recipe_file(write("bad.yaml", "name: x\ndescription: d\ngguf: {file_type: Q3_K_S}\n")),
                  InputError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("rope_freqs.weight: llama.cpp's converter's values bit for bit") {
  // Expected: convert_hf_to_gguf.py's torch arithmetic, run on Debian's python3-torch (1.13): the
  // leading divisors of 1, the bits of those between, then the factor for the rest.
  auto check = [](double theta, std::int64_t head_dim, double factor, double original, std::size_t ones,
                  std::vector<std::uint32_t> between) {
    model::ModelConfig config;
    config.head_dim = head_dim;
    config.rope_theta = theta;
    config.rope_scaling =
        model::RopeScaling{.type = "llama3", .factor = factor, .original_max_position_embeddings = original};
    std::vector<std::uint32_t> expected(ones, std::bit_cast<std::uint32_t>(1.0f));
    expected.insert(expected.end(), between.begin(), between.end());
    expected.resize(static_cast<std::size_t>(head_dim / 2), std::bit_cast<std::uint32_t>(static_cast<float>(factor)));
    std::vector<std::uint32_t> bits;
    for (const float divisor : compress::rope_frequency_divisors(config))
      bits.push_back(std::bit_cast<std::uint32_t>(divisor));
    CHECK(bits == expected);
  };
  check(10000, 32, 4, 256, 5, {0x3fdf7718, 0x4046b118});                 // the tiny models
  check(500000, 64, 32, 8192, 15, {0x3fd35ec2, 0x4052b46f, 0x411aaaee}); // Llama 3.2 1B
  check(500000, 128, 8, 8192, 29,
        {0x3f9a8ed5, 0x3fc6d64a, 0x4001af1d, 0x402c732e, 0x406bcace, 0x40a83c06}); // Llama 3.1 8B
  model::ModelConfig unscaled;
  unscaled.head_dim = 64;
  CHECK(compress::rope_frequency_divisors(unscaled).empty());
}
