// Test helper: writes a random-weight model, BF16, for tests that run optkit on real tokenizers: a
// small one with a given vocabulary size (so a real tokenizer.json can be put beside it) of a
// family (llama, the default; gemma2; gemma3: a window of 8 on the sliding layers), or a real
// shape (llama-3.2-1b, llama-3.1-8b, qwen3-30b-a3b), with its own number of decoder layers if given,
// from a seed (default 7): two seeds make a base and a variant for compress delta.
//   write_random_model DIR VOCAB_SIZE|PRESET [LAYERS [SEED [FAMILY]]]
#include "model/random_model.hpp"

#include <iostream>
#include <string>

int
main(int argc, char** argv) {
  if (argc < 3 || argc > 6) {
    std::cerr << "usage: write_random_model DIR VOCAB_SIZE|PRESET [LAYERS [SEED [FAMILY]]]\n";
    return 2;
  }
  const std::string size = argv[2];
  const std::uint64_t seed = argc > 4 ? std::stoull(argv[4]) : 7;
  if (size.find_first_not_of("0123456789") != std::string::npos) {
    auto config = optkit::model::preset_model_config(size);
    if (argc > 3)
      config["num_hidden_layers"] = std::stoll(argv[3]);
    optkit::model::write_random_model(argv[1], config, optkit::model::DType::bf16, seed);
    return 0;
  }
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                           {"model_type", "llama"},
                           {"vocab_size", std::stoll(size)},
                           {"hidden_size", 64},
                           {"intermediate_size", 128},
                           {"num_hidden_layers", 2},
                           {"num_attention_heads", 4},
                           {"num_key_value_heads", 2},
                           {"head_dim", 16},
                           {"max_position_embeddings", 4096},
                           {"rms_norm_eps", 1e-5},
                           {"rope_theta", 500000.0},
                           {"tie_word_embeddings", true},
                           {"bos_token_id", 128000},
                           {"eos_token_id", 128009},
                           {"torch_dtype", "bfloat16"}};
  if (argc > 3)
    config["num_hidden_layers"] = std::stoll(argv[3]);
  const std::string family = argc > 5 ? argv[5] : "llama";
  if (family == "gemma2" || family == "gemma3") {
    config["architectures"] = {family == "gemma2" ? "Gemma2ForCausalLM" : "Gemma3ForCausalLM"};
    config["model_type"] = family == "gemma2" ? "gemma2" : "gemma3_text";
    config.erase("rope_theta");
    config["hidden_activation"] = "gelu_pytorch_tanh";
    config["query_pre_attn_scalar"] = 16;
    config["sliding_window"] = 8;
    config["sliding_window_pattern"] = 2;
  } else if (family != "llama") {
    std::cerr << "write_random_model: unknown family '" << family << "' (known: llama, gemma2, gemma3)\n";
    return 2;
  }
  optkit::model::write_random_model(argv[1], config, optkit::model::DType::bf16, seed);
  return 0;
}
