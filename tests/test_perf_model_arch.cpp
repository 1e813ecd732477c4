// Model presets against the parameter counts their publishers state (an independent oracle for
// the shapes and for the counting), and config.json parsing with its errors.
#include "core/error.hpp"
#include "perf/model_arch.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::perf;

TEST_CASE("presets match the published parameter counts") {
  struct Published {
    const char* preset;
    double total_billions;
    double active_billions; // 0: dense (active = total)
  };
  // Model cards: Llama 3.1 8B/70B/405B, Qwen2.5-7B (7.61B), Qwen3-32B (32.8B), Qwen3-235B-A22B,
  // Mistral-Small-24B, DeepSeek-V3 (671B total / 37B activated, without its MTP module).
  for (const auto& p :
       {Published{"llama-3.1-8b", 8.03, 0}, Published{"llama-3.1-70b", 70.6, 0}, Published{"llama-3.1-405b", 405.9, 0},
        Published{"qwen2.5-7b", 7.61, 0}, Published{"qwen3-32b", 32.8, 0}, Published{"qwen3-235b-a22b", 235.0, 22.0},
        Published{"mistral-small-24b", 23.6, 0}, Published{"deepseek-v3", 671.0, 37.0}}) {
    CAPTURE(p.preset);
    const ModelArch arch = resolve_model(p.preset);
    CHECK(arch.total_parameters() / 1e9 == doctest::Approx(p.total_billions).epsilon(0.015));
    if (p.active_billions > 0)
      CHECK(arch.active_parameters() / 1e9 == doctest::Approx(p.active_billions).epsilon(0.04));
  }
}

TEST_CASE("KV cache per token: GQA heads, and MLA's shared latent") {
  const ModelArch llama = resolve_model("Llama-3.1-70B"); // names are case-insensitive
  CHECK(llama.kv_elements_per_token_per_layer() == 2 * 8 * 128);
  const ModelArch deepseek = resolve_model("deepseek-v3");
  CHECK(deepseek.is_mla());
  CHECK(deepseek.kv_elements_per_token_per_layer() == 512 + 64);
  CHECK(deepseek.moe_layers() == 58);
}

TEST_CASE("config.json: defaults, errors and unsupported architectures") {
  const ModelArch arch = parse_hf_config(
      R"({"architectures":["MistralForCausalLM"],"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,
          "intermediate_size":128,"vocab_size":100})",
      "config.json");
  CHECK(arch.kv_heads == 4);
  CHECK(arch.head_dim == 16);
  CHECK_THROWS_WITH_AS(parse_hf_config(R"({"architectures":["GPT2LMHeadModel"]})", "x/config.json"),
                       doctest::Contains("GPT2LMHeadModel is not supported"), InputError);
  CHECK_THROWS_WITH_AS(parse_hf_config(R"({"architectures":["LlamaForCausalLM"],"num_hidden_layers":2})", "c.json"),
                       doctest::Contains("missing key \"hidden_size\""), InputError);
  CHECK_THROWS_WITH_AS(parse_hf_config(R"({"architectures":["LlamaForCausalLM"],"num_hidden_layers":-1,"hidden_size":8,
                          "num_attention_heads":2,"intermediate_size":8,"vocab_size":8})",
                                       "c.json"),
                       doctest::Contains("\"num_hidden_layers\" must be an integer"), InputError);
  CHECK_THROWS_AS(parse_hf_config("{not json", "c.json"), InputError);
}

TEST_CASE("an unknown model names the presets and the closest one") {
  CHECK_THROWS_WITH_AS(resolve_model("llama-3.1-7b"), doctest::Contains("did you mean llama-3.1-8b"), InputError);
  CHECK_THROWS_WITH_AS(resolve_model("nothing-here"), doctest::Contains("presets: llama-3.1-8b"), InputError);
}

TEST_CASE("a model folder's config.json") {
  test::ScratchDir dir;
  test::write_text(dir.path() / "config.json",
                   R"({"architectures":["Qwen3ForCausalLM"],"num_hidden_layers":4,"hidden_size":256,
                       "num_attention_heads":8,"num_key_value_heads":2,"head_dim":64,"intermediate_size":512,
                       "vocab_size":1000,"tie_word_embeddings":true})");
  const ModelArch arch = resolve_model(dir.path().string());
  CHECK(arch.tied_embeddings);
  CHECK(arch.head_dim == 64);
}

TEST_CASE("a number too large for JSON is bad input, not a crash (found by fuzz_hf_config)") {
  CHECK_THROWS_WITH_AS(parse_hf_config(R"({"architectures": [22222222222222E22222222111117682]})", "c.json"),
                       doctest::Contains("c.json: not valid JSON"), InputError);
}
