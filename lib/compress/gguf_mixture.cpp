#include "compress/gguf_mixture.hpp"

#include <array>
#include <regex>
#include <stdexcept>
#include <utility>

namespace optkit::compress {

using model::GgmlType;

namespace {

// What a tensor of the file type gets unless a rule says otherwise.
GgmlType
base_type(GgufFileType type) {
  switch (type) {
  case GgufFileType::q8_0:
    return GgmlType::q8_0;
  case GgufFileType::q6_k:
    return GgmlType::q6_k;
  case GgufFileType::q5_k_m:
  case GgufFileType::q5_k_s:
    return GgmlType::q5_k;
  case GgufFileType::q4_k_m:
  case GgufFileType::q4_k_s:
    return GgmlType::q4_k;
  }
  throw std::logic_error("gguf_mixture: unknown file type");
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between.
bool
use_more_bits(std::int64_t layer, std::int64_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// A k-quant whose super-block does not divide the row falls back to a 32-value type.
GgmlType
fallback_for_row(GgmlType type, std::int64_t row_values) {
  if (row_values % model::ggml_block_values(type) == 0)
    return type;
  GgmlType fallback = type;
  switch (type) {
  case GgmlType::q4_k:
    fallback = GgmlType::q5_0;
    break;
  case GgmlType::q5_k:
    fallback = GgmlType::q5_1;
    break;
  case GgmlType::q6_k:
    fallback = GgmlType::q8_0;
    break;
  default:
    break;
  }
  return row_values % model::ggml_block_values(fallback) == 0 ? fallback : GgmlType::f16;
}

} // namespace

std::optional<GgufTensorPlace>
gguf_tensor_place(const std::string& gguf_name) {
  if (gguf_name == "token_embd.weight")
    return GgufTensorPlace{GgufTensorRole::token_embd};
  if (gguf_name == "output.weight")
    return GgufTensorPlace{GgufTensorRole::output};
  static const std::regex layer(R"(blk\.(\d+)\.(\w+)\.weight)");
  static const std::array<std::pair<const char*, GgufTensorRole>, 10> roles = {{
      {"attn_q", GgufTensorRole::attn_q},
      {"attn_k", GgufTensorRole::attn_k},
      {"attn_v", GgufTensorRole::attn_v},
      {"attn_output", GgufTensorRole::attn_output},
      {"ffn_gate", GgufTensorRole::ffn_gate},
      {"ffn_up", GgufTensorRole::ffn_up},
      {"ffn_down", GgufTensorRole::ffn_down},
      {"ffn_gate_exps", GgufTensorRole::ffn_gate},
      {"ffn_up_exps", GgufTensorRole::ffn_up},
      {"ffn_down_exps", GgufTensorRole::ffn_down},
  }};
  std::smatch m;
  if (!std::regex_match(gguf_name, m, layer))
    return std::nullopt;
  for (const auto& [name, role] : roles)
    if (m[2] == name)
      return GgufTensorPlace{role, std::stoll(m[1].str())};
  return std::nullopt;
}

std::vector<std::string>
gguf_file_type_names() {
  std::vector<std::string> names;
  for (const auto type : model::kGgufFileTypes)
    names.emplace_back(model::gguf_file_type_name(type));
  return names;
}

bool
gguf_size_70b(std::string_view architecture, std::int64_t layers, std::int64_t heads, std::int64_t kv_heads) {
  return layers == 80 && ((architecture == "llama" && heads != kv_heads) || architecture == "qwen2");
}

GgmlType
gguf_tensor_type(GgufFileType file_type, const GgufTensorPlace& place, const GgufMixtureModel& model,
                 std::int64_t row_values) {
  const GgmlType base = base_type(file_type);
  const bool k_mixture = file_type == GgufFileType::q4_k_m || file_type == GgufFileType::q5_k_m;
  if (place.role == GgufTensorRole::output || (model.tied && place.role == GgufTensorRole::token_embd)) {
    if (row_values % model::ggml_block_values(base) != 0)
      return fallback_for_row(GgmlType::q8_0, row_values);
    return base == GgmlType::q8_0 ? GgmlType::q8_0 : GgmlType::q6_k;
  }
  GgmlType type = base;
  if (k_mixture && (place.role == GgufTensorRole::attn_v || place.role == GgufTensorRole::ffn_down) &&
      use_more_bits(place.layer, model.layers))
    type = GgmlType::q6_k;
  // Q4_K_S: Q5_K for attn_v in the first 4 layers and ffn_down in the first eighth.
  if (file_type == GgufFileType::q4_k_s && ((place.role == GgufTensorRole::attn_v && place.layer < 4) ||
                                            (place.role == GgufTensorRole::ffn_down && place.layer < model.layers / 8)))
    type = GgmlType::q5_k;
  // 70B: its 8 query heads per KV head make attn_v an eighth of attn_q, so more bits cost little.
  if (model.size_70b && place.role == GgufTensorRole::attn_v && type == GgmlType::q4_k)
    type = GgmlType::q5_k;
  // 8 experts (Mixtral): attention is a small part of the model, so llama-quantize spends bits there.
  if (model.experts == 8) {
    if (place.role == GgufTensorRole::attn_k || place.role == GgufTensorRole::attn_v)
      type = GgmlType::q8_0;
    if (place.role == GgufTensorRole::attn_output &&
        (file_type == GgufFileType::q4_k_m || file_type == GgufFileType::q4_k_s))
      type = GgmlType::q5_k;
  }
  return fallback_for_row(type, row_values);
}

} // namespace optkit::compress
