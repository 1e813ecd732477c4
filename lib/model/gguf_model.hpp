// A GGUF file of llama.cpp's llama, qwen2 or qwen3 architecture read as optkit reads a Hugging
// Face folder (as a LlamaForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM): the config from the
// ARCH.* keys (and rope_freqs.weight, the divisors llama.cpp applies to each rotary frequency, as
// Llama 3's RoPE scaling), the tokenizer rebuilt as the tokenizer.json of its byte-level BPE
// vocabulary (tokenizer.ggml.model gpt2: tokens, types, merges, the pre-tokenizer's split by
// tokenizer.ggml.pre, BOS / EOS as llama.cpp adds them), and the chat template. Commands take the
// .gguf file wherever they take a model folder.
#pragma once

#include "model/gguf_file.hpp"
#include "model/model_config.hpp"

#include <optional>
#include <string>

namespace optkit::model {

// Whether `path` names a GGUF file (rather than a model folder).
bool is_gguf_model(const std::filesystem::path& path);

// InputError naming the file and key when the file is not a llama-architecture model optkit runs.
ModelConfig gguf_model_config(const GgufFile& file);
// The tokenizer.json text of the file's vocabulary.
std::string gguf_tokenizer_json(const GgufFile& file);
// tokenizer.ggml.pre: the name llama.cpp gives a pre-tokenizer split regex (nullopt for one it
// does not name), and the regex a name stands for.
std::optional<std::string> gguf_pre_tokenizer_name(const std::string& split_regex);
std::optional<std::string> gguf_pre_tokenizer_regex(const std::string& name);

// tokenizer.ggml.token_type values.
enum class GgufTokenType : std::int32_t {
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6
};

// How the file is quantized, for doctor: "GGUF Q4_K_M (general.file_type 15): 26 Q5_0 + 2 Q6_K
// + ... tensors; importance matrix from <dataset>".
std::string describe_gguf_quantization(const GgufFile& file);

// tokenizer.chat_template, when the file has one.
std::optional<std::string> gguf_chat_template(const GgufFile& file);
// The special tokens a chat template sees (bos_token, eos_token), as text.
nlohmann::ordered_json gguf_special_tokens(const GgufFile& file);

} // namespace optkit::model
