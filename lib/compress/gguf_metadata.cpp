#include "compress/gguf_metadata.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/gguf_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fstream>
#include <map>
#include <sstream>

namespace optkit::compress {

using model::GgufValue;

namespace {

constexpr auto kNormal = static_cast<std::int32_t>(model::GgufTokenType::normal);
constexpr auto kControl = static_cast<std::int32_t>(model::GgufTokenType::control);
constexpr auto kUserDefined = static_cast<std::int32_t>(model::GgufTokenType::user_defined);
constexpr auto kUnused = static_cast<std::int32_t>(model::GgufTokenType::unused);

// The split regexes of a tokenizer.json pre-tokenizer, in order (a ByteLevel that splits by
// itself contributes GPT-2's).
void
collect_split_regexes(const nlohmann::json& pre, std::vector<std::string>& out) {
  if (!pre.is_object())
    return;
  const auto type = pre.value("type", "");
  if (type == "Sequence") {
    for (const auto& p : pre.value("pretokenizers", nlohmann::json::array()))
      collect_split_regexes(p, out);
  } else if (type == "Split" && pre.contains("pattern")) {
    const auto& pattern = pre.at("pattern");
    out.push_back(pattern.value("Regex", pattern.value("String", "")));
  } else if (type == "ByteLevel" && pre.value("use_regex", true)) {
    out.push_back(*model::gguf_pre_tokenizer_regex("gpt-2"));
  }
}

// tokenizer.ggml.pre for the tokenizer's split: llama.cpp's name for its one regex, "default" for
// none; nullopt for a split llama.cpp has no name for (it would split the text otherwise).
std::optional<std::string>
pre_tokenizer_name(const nlohmann::json& tokenizer) {
  std::vector<std::string> regexes;
  collect_split_regexes(tokenizer.value("pre_tokenizer", nlohmann::json()), regexes);
  if (regexes.empty())
    return "default";
  return regexes.size() == 1 ? model::gguf_pre_tokenizer_name(regexes[0]) : std::nullopt;
}

nlohmann::json
tokenizer_config(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "tokenizer_config.json";
  return std::filesystem::exists(path) ? read_json_file(path) : nlohmann::json::object();
}

// A special token named in tokenizer_config.json: a string or {"content": ...}.
std::string
special_token_text(const nlohmann::json& value) {
  if (value.is_string())
    return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string())
    return value.at("content").get<std::string>();
  return {};
}

std::string
merge_text(const nlohmann::json& merge) {
  if (merge.is_string())
    return merge.get<std::string>();
  return merge.at(0).get<std::string>() + " " + merge.at(1).get<std::string>();
}

std::string
chat_template_text(const std::filesystem::path& model_dir, const nlohmann::json& config) {
  if (config.contains("chat_template") && config.at("chat_template").is_string())
    return config.at("chat_template").get<std::string>();
  const auto jinja = model_dir / "chat_template.jinja";
  if (!std::filesystem::exists(jinja))
    return {};
  std::ifstream in(jinja);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

std::string
gguf_architecture(const model::ModelConfig& config) {
  switch (config.architecture) {
  case model::Architecture::llama:
    return config.qkv_bias ? "" : "llama";
  case model::Architecture::mistral:
    return config.sliding_window == 0 && !config.qkv_bias ? "llama" : "";
  case model::Architecture::qwen2:
    return "qwen2";
  case model::Architecture::qwen3:
    return config.qkv_bias ? "" : "qwen3";
  case model::Architecture::mixtral:
    return config.sliding_window == 0 && !config.qkv_bias ? "llama" : "";
  case model::Architecture::qwen3_moe:
    // llama.cpp's qwen3moe renormalizes the top-k weights and routes in every layer.
    return config.normalize_expert_weights && std::ranges::find(config.moe_layers, false) == config.moe_layers.end() &&
                   !config.qkv_bias
               ? "qwen3moe"
               : "";
  default:
    return "";
  }
}

void
check_gguf_exportable(const std::filesystem::path& model_dir, const model::ModelConfig& config) {
  if (gguf_architecture(config).empty())
    throw InputError(fmt::format("{}: GGUF export writes llama.cpp's llama, qwen2, qwen3 and qwen3moe architectures "
                                 "(Llama, Mistral and Mixtral without a sliding window, Qwen2, Qwen3, Qwen3-MoE with "
                                 "norm_topk_prob and experts in every layer); this model is {}",
                                 model_dir.string(), config.architecture_name));
  if (config.rope_scaling && config.rope_scaling->type != "llama3" && config.rope_scaling->type != "linear")
    throw InputError(fmt::format("{}: GGUF export handles rope_scaling llama3 and linear, not {}", model_dir.string(),
                                 config.rope_scaling->type));
  const auto tokenizer = read_json_file(model_dir / "tokenizer.json");
  const auto& m = tokenizer.at("model");
  if (m.value("type", "") != "BPE" || m.value("byte_fallback", false))
    throw InputError(fmt::format("{}: GGUF export writes byte-level BPE tokenizers (Llama 3, Qwen, GPT-2 style); "
                                 "tokenizer.json has a {} model",
                                 (model_dir / "tokenizer.json").string(), m.value("type", "?")));
  if (!pre_tokenizer_name(tokenizer))
    throw InputError(fmt::format("{}: the pre-tokenizer's split is none llama.cpp names (llama-bpe, qwen2, gpt-2, "
                                 "tekken, gpt-4o): llama.cpp would cut the text otherwise and read other tokens",
                                 (model_dir / "tokenizer.json").string()));
}

std::vector<float>
rope_frequency_divisors(const model::ModelConfig& config) {
  if (!config.rope_scaling || config.rope_scaling->type != "llama3")
    return {};
  // Each step in float32 as llama.cpp's converter (convert_hf_to_gguf.py) computes it in torch,
  // a / b as torch's reciprocal(b) · a where it does, so the file has the converter's values bit
  // for bit (computed in double, two of a Llama 3 model's divisors come out one ulp off).
  const auto& scaling = *config.rope_scaling;
  const auto dims = config.rotated_dims();
  const auto factor = static_cast<float>(scaling.factor);
  const auto low = static_cast<float>(scaling.low_freq_factor);
  const auto original = static_cast<float>(scaling.original_max_position_embeddings);
  const auto low_frequency_wavelength =
      static_cast<float>(scaling.original_max_position_embeddings / scaling.low_freq_factor);
  const auto high_frequency_wavelength =
      static_cast<float>(scaling.original_max_position_embeddings / scaling.high_freq_factor);
  std::vector<float> divisors;
  for (std::int64_t i = 0; i < dims; i += 2) {
    const float exponent = static_cast<float>(i) / static_cast<float>(dims);
    const float frequency = 1.0f / std::pow(static_cast<float>(config.rope_theta), exponent);
    const float wavelength = (1.0f / frequency) * static_cast<float>(2 * std::numbers::pi);
    if (wavelength < high_frequency_wavelength) {
      divisors.push_back(1.0f);
    } else if (wavelength > low_frequency_wavelength) {
      divisors.push_back(factor);
    } else {
      const float smooth = ((1.0f / wavelength) * original - low) /
                           static_cast<float>(scaling.high_freq_factor - scaling.low_freq_factor);
      divisors.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return divisors;
}

void
add_model_metadata(model::GgufWriter& writer, const std::filesystem::path& model_dir, const model::ModelConfig& config,
                   GgufFileType file_type) {
  auto u32 = [](std::int64_t v) { return GgufValue::u32(static_cast<std::uint32_t>(v)); };
  const auto arch = gguf_architecture(config);
  auto key = [&](const char* name) { return arch + "." + name; };
  writer.set("general.architecture", GgufValue::string(arch));
  writer.set("general.name",
             GgufValue::string(std::filesystem::absolute(model_dir).lexically_normal().filename().string()));
  writer.set("general.file_type", GgufValue::u32(static_cast<std::uint32_t>(file_type)));
  writer.set("general.quantization_version", GgufValue::u32(2));
  writer.set(key("vocab_size"), u32(config.vocab_size));
  writer.set(key("context_length"), u32(config.max_position_embeddings));
  writer.set(key("embedding_length"), u32(config.hidden_size));
  writer.set(key("block_count"), u32(config.num_layers));
  writer.set(key("feed_forward_length"), u32(config.intermediate_size));
  writer.set(key("attention.head_count"), u32(config.num_heads));
  writer.set(key("attention.head_count_kv"), u32(config.num_kv_heads));
  writer.set(key("attention.key_length"), u32(config.head_dim));
  writer.set(key("attention.value_length"), u32(config.head_dim));
  writer.set(key("attention.layer_norm_rms_epsilon"), GgufValue::f32(config.rms_norm_eps));
  writer.set(key("rope.freq_base"), GgufValue::f32(static_cast<float>(config.rope_theta)));
  writer.set(key("rope.dimension_count"), u32(config.rotated_dims()));
  if (config.num_experts > 0) {
    writer.set(key("expert_count"), u32(config.num_experts));
    writer.set(key("expert_used_count"), u32(config.experts_per_token));
    if (config.architecture != model::Architecture::mixtral)
      writer.set(key("expert_feed_forward_length"), u32(config.expert_intermediate_size));
  }
  if (config.rope_scaling && config.rope_scaling->type == "linear") {
    writer.set(key("rope.scaling.type"), GgufValue::string("linear"));
    writer.set(key("rope.scaling.factor"), GgufValue::f32(static_cast<float>(config.rope_scaling->factor)));
  }
}

void
add_tokenizer_metadata(model::GgufWriter& writer, const std::filesystem::path& model_dir,
                       const model::ModelConfig& config) {
  const auto tokenizer = read_json_file(model_dir / "tokenizer.json");
  const auto settings = tokenizer_config(model_dir);
  const auto& bpe = tokenizer.at("model");
  std::map<std::int64_t, std::string> vocab;
  for (const auto& [text, id] : bpe.at("vocab").items())
    vocab[id.get<std::int64_t>()] = text;
  std::map<std::int64_t, nlohmann::json> added;
  std::map<std::string, std::int64_t> added_ids;
  for (const auto& a : tokenizer.value("added_tokens", nlohmann::json::array())) {
    added[a.at("id").get<std::int64_t>()] = a;
    added_ids[a.at("content").get<std::string>()] = a.at("id").get<std::int64_t>();
  }
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  for (std::int64_t id = 0; id < config.vocab_size; ++id) {
    if (const auto a = added.find(id); a != added.end()) {
      tokens.push_back(a->second.at("content").get<std::string>());
      types.push_back(a->second.value("special", false) ? kControl : kUserDefined);
    } else if (const auto v = vocab.find(id); v != vocab.end()) {
      tokens.push_back(v->second);
      types.push_back(kNormal);
    } else {
      tokens.push_back(fmt::format("[PAD{}]", id));
      types.push_back(kUnused);
    }
  }
  std::vector<std::string> merges;
  for (const auto& merge : bpe.value("merges", nlohmann::json::array()))
    merges.push_back(merge_text(merge));
  writer.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  writer.set("tokenizer.ggml.pre", GgufValue::string(pre_tokenizer_name(tokenizer).value()));
  writer.set("tokenizer.ggml.tokens", GgufValue::strings(std::move(tokens)));
  writer.set("tokenizer.ggml.token_type", GgufValue::i32s(std::move(types)));
  writer.set("tokenizer.ggml.merges", GgufValue::strings(std::move(merges)));
  // Special ids: tokenizer_config.json's tokens where they name added tokens, else config.json's.
  auto special_id = [&](const char* key) -> std::optional<std::int64_t> {
    const auto it = added_ids.find(special_token_text(settings.value(key, nlohmann::json())));
    if (it != added_ids.end())
      return it->second;
    return std::nullopt;
  };
  if (const auto bos = special_id("bos_token").value_or(config.bos_token_id.value_or(-1)); bos >= 0)
    writer.set("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<std::uint32_t>(bos)));
  const auto eos = special_id("eos_token");
  if (eos || !config.eos_token_ids.empty())
    writer.set("tokenizer.ggml.eos_token_id",
               GgufValue::u32(static_cast<std::uint32_t>(eos.value_or(config.eos_token_ids.front()))));
  if (const auto pad = special_id("pad_token"))
    writer.set("tokenizer.ggml.padding_token_id", GgufValue::u32(static_cast<std::uint32_t>(*pad)));
  if (settings.contains("add_bos_token") && settings.at("add_bos_token").is_boolean())
    writer.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(settings.at("add_bos_token").get<bool>()));
  if (settings.contains("add_eos_token") && settings.at("add_eos_token").is_boolean())
    writer.set("tokenizer.ggml.add_eos_token", GgufValue::boolean(settings.at("add_eos_token").get<bool>()));
  if (const auto chat = chat_template_text(model_dir, settings); !chat.empty())
    writer.set("tokenizer.chat_template", GgufValue::string(chat));
}

} // namespace optkit::compress
