// The metadata llama.cpp reads from a GGUF of its llama, qwen2 or qwen3 architecture, written from
// a Hugging Face folder as its converter writes it: general.* (the architecture, the file type,
// quantization version 2), ARCH.* from config.json (counts as u32, eps and RoPE base as f32; head
// dims as key_length / value_length), and tokenizer.* from tokenizer.json and tokenizer_config.json (a byte-level
// BPE vocabulary as model gpt2: tokens with their types, merges, the pre-tokenizer named by its
// split regex, special ids, add_bos_token, the chat template). Llama 3's RoPE scaling is not a
// key: it travels as the tensor rope_freqs.weight, the divisor of each rotary frequency.
#pragma once

#include "compress/gguf_mixture.hpp"
#include "model/gguf_file.hpp"
#include "model/model_config.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace optkit::compress {

// The llama.cpp architecture a model is written as: llama (Llama; Mistral and Mixtral without a
// sliding window), qwen2 (q/k/v biases), qwen3 (per-head q/k RMSNorm), qwen3moe (Qwen3-MoE that
// renormalizes its top-k and routes in every layer, as llama.cpp's graph does); empty for a model
// none of them holds.
std::string gguf_architecture(const model::ModelConfig& config);

// InputError naming the folder when GGUF export cannot hold the model (an architecture
// gguf_architecture does not name, or a tokenizer other than byte-level BPE).
void check_gguf_exportable(const std::filesystem::path& model_dir, const model::ModelConfig& config);

void add_model_metadata(model::GgufWriter& writer, const std::filesystem::path& model_dir,
                        const model::ModelConfig& config, GgufFileType file_type);
void add_tokenizer_metadata(model::GgufWriter& writer, const std::filesystem::path& model_dir,
                            const model::ModelConfig& config);

// rope_freqs.weight's values (rotary_dim / 2 divisors) when the config scales RoPE per
// frequency (Llama 3); empty otherwise.
std::vector<float> rope_frequency_divisors(const model::ModelConfig& config);

} // namespace optkit::compress
