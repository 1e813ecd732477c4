// Test helper: writes a small random-weight Llama model with a given vocabulary size (so a real
// tokenizer.json can be put beside it), for tests that run optkit on real tokenizers.
//   write_random_model DIR VOCAB_SIZE
#include "model/random_model.hpp"

#include <iostream>
#include <string>

int
main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: write_random_model DIR VOCAB_SIZE\n";
    return 2;
  }
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"vocab_size", std::stoll(argv[2])},
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
  optkit::model::write_random_model(argv[1], config, optkit::model::DType::bf16, 7);
  return 0;
}
