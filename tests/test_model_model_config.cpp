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

TEST_CASE("Gemma 2 2B and Gemma 3 1B configs parse to their published shapes, parameter counts and layer types") {
  const json gemma2 = {{"architectures", {"Gemma2ForCausalLM"}},
                       {"vocab_size", 256000},
                       {"hidden_size", 2304},
                       {"intermediate_size", 9216},
                       {"num_hidden_layers", 26},
                       {"num_attention_heads", 8},
                       {"num_key_value_heads", 4},
                       {"head_dim", 256},
                       {"query_pre_attn_scalar", 256},
                       {"sliding_window", 4096},
                       {"attn_logit_softcapping", 50.0},
                       {"final_logit_softcapping", 30.0},
                       {"hidden_act", "gelu_pytorch_tanh"},
                       {"hidden_activation", "gelu_pytorch_tanh"},
                       {"max_position_embeddings", 8192}};
  const auto g2 = parse_model_config(gemma2, "config.json");
  CHECK(g2.architecture == Architecture::gemma2);
  CHECK(g2.parameter_count() == 2'614'341'888); // transformers' count for google/gemma-2-2b
  CHECK(g2.tie_word_embeddings);                // Gemma's default
  CHECK(g2.activation == Activation::gelu_tanh);
  CHECK(g2.norm_gain_offset == 1.0f);
  CHECK(g2.sandwich_norms);
  CHECK(g2.scaled_embeddings);
  CHECK_FALSE(g2.qk_norm);
  CHECK(g2.attention_softcap == 50.0f);
  CHECK(g2.final_softcap == 30.0f);
  CHECK(g2.window_of(0) == 4096);
  CHECK(g2.window_of(1) == 0);
  CHECK(g2.window_of(24) == 4096);
  CHECK_FALSE(g2.uses_local_rope(0));
  CHECK(g2.attention_scale() == doctest::Approx(1.0 / 16.0));

  const json gemma3 = {{"architectures", {"Gemma3ForCausalLM"}},
                       {"vocab_size", 262144},
                       {"hidden_size", 1152},
                       {"intermediate_size", 6912},
                       {"num_hidden_layers", 26},
                       {"num_attention_heads", 4},
                       {"num_key_value_heads", 1},
                       {"head_dim", 256},
                       {"query_pre_attn_scalar", 256},
                       {"sliding_window", 512},
                       {"sliding_window_pattern", 6},
                       {"rope_theta", 1000000.0},
                       {"rope_local_base_freq", 10000.0},
                       {"rope_scaling", nullptr},
                       {"final_logit_softcapping", nullptr},
                       {"attn_logit_softcapping", nullptr},
                       {"max_position_embeddings", 32768}};
  const auto g3 = parse_model_config(gemma3, "config.json");
  CHECK(g3.parameter_count() == 999'885'952); // google/gemma-3-1b-it
  CHECK(g3.qk_norm);
  CHECK(g3.attention_softcap == 0.0f);
  CHECK(g3.final_softcap == 0.0f);
  for (std::int64_t layer = 0; layer < 26; ++layer) {
    CAPTURE(layer);
    const bool global = layer % 6 == 5; // layers 5, 11, 17, 23
    CHECK(g3.window_of(layer) == (global ? 0 : 512));
    CHECK(g3.uses_local_rope(layer) == !global);
  }
  const auto local = local_rope_inverse_frequencies(g3), global = rope_inverse_frequencies(g3);
  CHECK(local[1] == doctest::Approx(1.0 / std::pow(10000.0, 2.0 / 256)));
  CHECK(global[1] == doctest::Approx(1.0 / std::pow(1e6, 2.0 / 256)));
  CHECK(local_rope_inverse_frequencies(g2).empty());
  CHECK(describe_features(g3).find("sliding window 512 on 22 of 26 layers") != std::string::npos);

  auto listed = gemma3;
  listed["layer_types"] = json::array();
  for (int i = 0; i < 26; ++i)
    listed["layer_types"].push_back(i == 0 ? "full_attention" : "sliding_attention");
  const auto g3l = parse_model_config(listed, "config.json");
  CHECK(g3l.window_of(0) == 0);
  CHECK(g3l.window_of(5) == 512);
}

TEST_CASE("a Gemma config with another activation, a short layer_types or an unknown layer type is refused") {
  const json base = {{"architectures", {"Gemma2ForCausalLM"}},
                     {"vocab_size", 10},
                     {"hidden_size", 8},
                     {"intermediate_size", 16},
                     {"num_hidden_layers", 2},
                     {"num_attention_heads", 2},
                     {"head_dim", 4}};
  auto exact_gelu = base;
  exact_gelu["hidden_activation"] = "gelu";
  CHECK_THROWS_WITH_AS(parse_model_config(exact_gelu, "c.json"),
                       doctest::Contains("hidden_activation \"gelu\" is not supported for Gemma2ForCausalLM"),
                       InputError);
  auto short_types = base;
  short_types["layer_types"] = {"sliding_attention"};
  CHECK_THROWS_WITH_AS(parse_model_config(short_types, "c.json"), doctest::Contains("one type per layer (2)"),
                       InputError);
  auto odd_type = base;
  odd_type["layer_types"] = {"sliding_attention", "chunked_attention"};
  CHECK_THROWS_WITH_AS(parse_model_config(odd_type, "c.json"), doctest::Contains("\"chunked_attention\""), InputError);
  auto multimodal = base;
  multimodal["architectures"] = {"Gemma3ForConditionalGeneration"};
  CHECK_THROWS_WITH_AS(parse_model_config(multimodal, "c.json"), doctest::Contains("Gemma3ForCausalLM"), InputError);
}

TEST_CASE("Mixtral-8x7B and Qwen3-30B-A3B configs parse to their published parameter counts and routing") {
  const json mixtral = {{"architectures", {"MixtralForCausalLM"}},
                        {"vocab_size", 32000},
                        {"hidden_size", 4096},
                        {"intermediate_size", 14336},
                        {"num_hidden_layers", 32},
                        {"num_attention_heads", 32},
                        {"num_key_value_heads", 8},
                        {"num_local_experts", 8},
                        {"num_experts_per_tok", 2},
                        {"sliding_window", nullptr},
                        {"rope_theta", 1e6}};
  const auto m = parse_model_config(mixtral, "config.json");
  CHECK(m.parameter_count() == 46'702'792'704); // transformers' count for Mixtral-8x7B-v0.1
  CHECK(m.num_experts == 8);
  CHECK(m.experts_per_token == 2);
  CHECK(m.expert_intermediate_size == 14336);
  CHECK(m.normalize_expert_weights); // Mixtral always renormalizes its top-k
  CHECK(m.is_moe_layer(0));
  CHECK(m.window_of(0) == 0);

  json qwen = {{"architectures", {"Qwen3MoeForCausalLM"}},
               {"vocab_size", 151936},
               {"hidden_size", 2048},
               {"intermediate_size", 6144},
               {"moe_intermediate_size", 768},
               {"num_hidden_layers", 48},
               {"num_attention_heads", 32},
               {"num_key_value_heads", 4},
               {"head_dim", 128},
               {"num_experts", 128},
               {"num_experts_per_tok", 8},
               {"norm_topk_prob", true},
               {"decoder_sparse_step", 1},
               {"mlp_only_layers", json::array()}};
  const auto q = parse_model_config(qwen, "config.json");
  CHECK(q.parameter_count() == 30'532'122'624); // Qwen3-30B-A3B
  CHECK(q.qk_norm);
  CHECK(q.normalize_expert_weights);
  CHECK(describe_features(q).find("128 experts, top-8 renormalized of width 768 on 48 of 48 layers") !=
        std::string::npos);
  qwen["mlp_only_layers"] = {0, 47};
  qwen["decoder_sparse_step"] = 2;
  const auto dense_some = parse_model_config(qwen, "config.json");
  CHECK_FALSE(dense_some.is_moe_layer(0)); // named dense
  CHECK(dense_some.is_moe_layer(1));       // (1 + 1) % 2 == 0
  CHECK_FALSE(dense_some.is_moe_layer(2)); // not on the step
  CHECK_FALSE(dense_some.is_moe_layer(47));
  qwen["num_experts_per_tok"] = 129;
  CHECK_THROWS_WITH_AS(parse_model_config(qwen, "c.json"), doctest::Contains("exceeds the 128 experts"), InputError);
  qwen["num_experts_per_tok"] = 8;
  qwen["mlp_only_layers"] = {48};
  CHECK_THROWS_WITH_AS(parse_model_config(qwen, "c.json"), doctest::Contains("not a layer of 48"), InputError);
}

TEST_CASE("Phi-3-mini and Phi-4-mini configs parse to their published parameter counts, LongRoPE and partial "
          "rotary") {
  // Phi-3-mini-4k-instruct: no rope_scaling, a window of 2047 on every layer.
  json phi3 = {{"architectures", {"Phi3ForCausalLM"}},
               {"vocab_size", 32064},
               {"hidden_size", 3072},
               {"intermediate_size", 8192},
               {"num_hidden_layers", 32},
               {"num_attention_heads", 32},
               {"num_key_value_heads", 32},
               {"max_position_embeddings", 4096},
               {"original_max_position_embeddings", 4096},
               {"rope_scaling", nullptr},
               {"sliding_window", 2047},
               {"hidden_act", "silu"},
               {"tie_word_embeddings", false}};
  const auto mini = parse_model_config(phi3, "config.json");
  CHECK(mini.parameter_count() == 3'821'079'552); // transformers' count for Phi-3-mini
  CHECK(mini.fused_projections);
  CHECK(mini.rms_norm_eps == doctest::Approx(1e-5)); // Phi3Config's default
  CHECK(mini.window_of(31) == 2047);
  CHECK(mini.long_rope_threshold() == 0);
  CHECK(rope_attention_factor(mini) == 1.0);

  // Phi-3-mini-128k: the legacy "su" type is LongRoPE; 131072 / 4096 = 32 gives sqrt(1 + ln 32 / ln 4096).
  phi3["max_position_embeddings"] = 131072;
  phi3["sliding_window"] = 262144;
  json short_factor = json::array(), long_factor = json::array();
  for (int i = 0; i < 48; ++i) {
    short_factor.push_back(1.0 + 0.01 * i);
    long_factor.push_back(1.0 + i);
  }
  phi3["rope_scaling"] = {{"type", "su"}, {"short_factor", short_factor}, {"long_factor", long_factor}};
  const auto long_context = parse_model_config(phi3, "config.json");
  CHECK(long_context.long_rope_threshold() == 4096);
  CHECK(rope_attention_factor(long_context) == doctest::Approx(1.1902).epsilon(1e-4));
  const auto short_inv = rope_inverse_frequencies(long_context), long_inv = long_rope_inverse_frequencies(long_context);
  REQUIRE(short_inv.size() == 48);
  REQUIRE(long_inv.size() == 48);
  for (std::size_t i = 0; i < 48; ++i) {
    const double plain = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / 96.0);
    CHECK(short_inv[i] == doctest::Approx(plain / (1.0 + 0.01 * static_cast<double>(i))));
    CHECK(long_inv[i] == doctest::Approx(plain / (1.0 + static_cast<double>(i))));
  }
  phi3["rope_scaling"]["attention_factor"] = 1.5;
  CHECK(rope_attention_factor(parse_model_config(phi3, "config.json")) == 1.5);
  phi3["rope_scaling"]["long_factor"] = json::array({1.0, 2.0});
  CHECK_THROWS_WITH_AS(parse_model_config(phi3, "c.json"), doctest::Contains("'long_factor', a list of 48 numbers"),
                       InputError);

  // Phi-4-mini: 24 heads of 128, RoPE on 0.75 of them (96 dims: 48 factors), tied embeddings.
  json phi4 = {{"architectures", {"Phi3ForCausalLM"}},
               {"vocab_size", 200064},
               {"hidden_size", 3072},
               {"intermediate_size", 8192},
               {"num_hidden_layers", 32},
               {"num_attention_heads", 24},
               {"num_key_value_heads", 8},
               {"partial_rotary_factor", 0.75},
               {"max_position_embeddings", 131072},
               {"original_max_position_embeddings", 4096},
               {"rope_scaling", {{"type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}}},
               {"tie_word_embeddings", true}};
  const auto phi4_mini = parse_model_config(phi4, "config.json");
  CHECK(phi4_mini.parameter_count() == 3'836'021'760);
  CHECK(phi4_mini.rotated_dims() == 96);
  CHECK(describe_features(phi4_mini).find("rotary on 96 of 128 head dims") != std::string::npos);
  phi4["partial_rotary_factor"] = 0.7; // 89.6 dims
  CHECK_THROWS_WITH_AS(parse_model_config(phi4, "c.json"), doctest::Contains("partial_rotary_factor"), InputError);
  // yarn is Phi-3's legacy name for LongRoPE only: another architecture's YaRN is refused by name.
  json llama_yarn = llama();
  llama_yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  CHECK_THROWS_WITH_AS(parse_model_config(llama_yarn, "c.json"),
                       doctest::Contains("rope_scaling type 'yarn' is not supported"), InputError);
}
