// llama.cpp's k-quant file types and the ggml type each tensor gets in them (llama-quantize's
// llama_tensor_get_type for dense llama / qwen2 / qwen3 models): Q8_0 and Q6_K everywhere; Q4_K_M
// and Q5_K_M at Q4_K / Q5_K with Q6_K for attn_v and ffn_down in the first and last eighth of the
// layers and every third layer between (use_more_bits); Q5_K_S at Q5_K; Q4_K_S at Q4_K with Q5_K
// for attn_v in the first 4 layers and ffn_down in the first eighth; the output (or the embedding
// when tied) at Q6_K; in a model llama.cpp types 70B, attn_v at Q5_K where the rules give Q4_K; in
// a model of exactly 8 experts (Mixtral), attn_k and attn_v at Q8_0 and, in Q4_K_M and Q4_K_S,
// attn_output at Q5_K. A layer's stacked experts (ffn_gate_exps, ...) follow its ffn_gate /
// ffn_up / ffn_down rules; the router (ffn_gate_inp) stays F32. A
// row length that is not a whole number of 256-value super-blocks falls back as llama-quantize
// does: Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0 (the output straight to Q8_0), F16 when not even 32
// divides it.
#pragma once

#include "model/ggml_types.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optkit::compress {

using model::GgufFileType;

// A quantized tensor's place in the model, as the mixture rules see it.
enum class GgufTensorRole { token_embd, output, attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down };

// The role of a GGUF tensor name (token_embd.weight, blk.3.ffn_down.weight, ...) and its layer
// (-1 outside the layers); nullopt for a tensor left unquantized (norms, biases, rope_freqs, a
// router).
struct GgufTensorPlace {
  GgufTensorRole role;
  std::int64_t layer = -1;
};
std::optional<GgufTensorPlace> gguf_tensor_place(const std::string& gguf_name);

// What the mixture rules read of the model as a whole.
struct GgufMixtureModel {
  std::int64_t layers = 0;
  bool tied = false;        // the embedding is also the output (it then takes the output's type)
  bool size_70b = false;    // llama.cpp's LLM_TYPE_70B (gguf_size_70b)
  std::int64_t experts = 0; // a mixture of experts' expert count (0: dense)
};

// llama.cpp's LLM_TYPE_70B, the one model size its mixture rules name: 80 layers in the llama
// architecture with grouped-query attention (Llama 2 / 3 70B) or in qwen2 (Qwen2 72B).
bool gguf_size_70b(std::string_view architecture, std::int64_t layers, std::int64_t heads, std::int64_t kv_heads);

// Every file type's llama-quantize name (Q8_0, Q6_K, ...), in kGgufFileTypes' order; the bundled
// GGUF recipes are these names in lower case.
std::vector<std::string> gguf_file_type_names();

// The ggml type of a tensor of `row_values` values a row.
model::GgmlType gguf_tensor_type(GgufFileType file_type, const GgufTensorPlace& place, const GgufMixtureModel& model,
                                 std::int64_t row_values);

} // namespace optkit::compress
