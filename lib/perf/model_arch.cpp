#include "perf/model_arch.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <utility>

namespace optkit::perf {

namespace {

// Presets are the published config.json fields of each model, so they take the same path as a
// user's config.json.
const std::vector<std::pair<std::string, std::string>>&
preset_configs() {
  static const std::vector<std::pair<std::string, std::string>> presets = {
      {"llama-3.1-8b", R"({"architectures":["LlamaForCausalLM"],"num_hidden_layers":32,"hidden_size":4096,
        "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"intermediate_size":14336,
        "vocab_size":128256,"max_position_embeddings":131072,"tie_word_embeddings":false})"},
      {"llama-3.1-70b", R"({"architectures":["LlamaForCausalLM"],"num_hidden_layers":80,"hidden_size":8192,
        "num_attention_heads":64,"num_key_value_heads":8,"head_dim":128,"intermediate_size":28672,
        "vocab_size":128256,"max_position_embeddings":131072,"tie_word_embeddings":false})"},
      {"llama-3.1-405b", R"({"architectures":["LlamaForCausalLM"],"num_hidden_layers":126,"hidden_size":16384,
        "num_attention_heads":128,"num_key_value_heads":8,"head_dim":128,"intermediate_size":53248,
        "vocab_size":128256,"max_position_embeddings":131072,"tie_word_embeddings":false})"},
      {"qwen2.5-7b", R"({"architectures":["Qwen2ForCausalLM"],"num_hidden_layers":28,"hidden_size":3584,
        "num_attention_heads":28,"num_key_value_heads":4,"intermediate_size":18944,"vocab_size":152064,
        "max_position_embeddings":32768,"tie_word_embeddings":false})"},
      {"qwen3-32b", R"({"architectures":["Qwen3ForCausalLM"],"num_hidden_layers":64,"hidden_size":5120,
        "num_attention_heads":64,"num_key_value_heads":8,"head_dim":128,"intermediate_size":25600,
        "vocab_size":151936,"max_position_embeddings":40960,"tie_word_embeddings":false})"},
      {"qwen3-235b-a22b", R"({"architectures":["Qwen3MoeForCausalLM"],"num_hidden_layers":94,"hidden_size":4096,
        "num_attention_heads":64,"num_key_value_heads":4,"head_dim":128,"intermediate_size":12288,
        "num_experts":128,"num_experts_per_tok":8,"moe_intermediate_size":1536,"vocab_size":151936,
        "max_position_embeddings":40960,"tie_word_embeddings":false})"},
      {"mistral-small-24b", R"({"architectures":["MistralForCausalLM"],"num_hidden_layers":40,"hidden_size":5120,
        "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"intermediate_size":32768,
        "vocab_size":131072,"max_position_embeddings":32768,"tie_word_embeddings":false})"},
      {"deepseek-v3", R"({"architectures":["DeepseekV3ForCausalLM"],"num_hidden_layers":61,"hidden_size":7168,
        "num_attention_heads":128,"num_key_value_heads":128,"intermediate_size":18432,"moe_intermediate_size":2048,
        "n_routed_experts":256,"n_shared_experts":1,"num_experts_per_tok":8,"first_k_dense_replace":3,
        "q_lora_rank":1536,"kv_lora_rank":512,"qk_nope_head_dim":128,"qk_rope_head_dim":64,"v_head_dim":128,
        "vocab_size":129280,"max_position_embeddings":163840,"tie_word_embeddings":false})"},
  };
  return presets;
}

const std::vector<std::string> architectures = {"LlamaForCausalLM",      "MistralForCausalLM",   "Qwen2ForCausalLM",
                                                "Qwen3ForCausalLM",      "Qwen3MoeForCausalLM",  "MixtralForCausalLM",
                                                "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"};

std::string
lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

class ConfigReader {
public:
  ConfigReader(const nlohmann::json& json, std::string source) : m_json(json), m_source(std::move(source)) {}

  int integer(const char* key, int fallback = -1, int minimum = 1) const {
    const auto it = m_json.find(key);
    if (it == m_json.end() || it->is_null()) {
      if (fallback >= 0)
        return fallback;
      throw InputError(m_source + ": missing key \"" + key + "\"; a Hugging Face config.json has it");
    }
    if (!it->is_number_integer() || it->get<long long>() < minimum || it->get<long long>() > (1ll << 30))
      throw InputError(m_source + ": \"" + key + "\" must be an integer ≥ " + std::to_string(minimum) + ", got " +
                       it->dump());
    return it->get<int>();
  }
  bool boolean(const char* key, bool fallback) const {
    const auto it = m_json.find(key);
    if (it == m_json.end() || it->is_null())
      return fallback;
    if (!it->is_boolean())
      throw InputError(m_source + ": \"" + key + "\" must be true or false, got " + it->dump());
    return it->get<bool>();
  }

private:
  const nlohmann::json& m_json;
  std::string m_source;
};

} // namespace

double
ModelArch::attention_parameters() const {
  const double h = hidden;
  if (is_mla()) {
    const double qk = heads * double(qk_nope_head_dim + qk_rope_head_dim);
    const double q = q_lora_rank > 0 ? h * q_lora_rank + double(q_lora_rank) * qk : h * qk;
    const double kv =
        h * (kv_lora_rank + qk_rope_head_dim) + double(kv_lora_rank) * heads * (qk_nope_head_dim + v_head_dim);
    return q + kv + double(heads) * v_head_dim * h;
  }
  const double qkv =
      h * double(heads + 2 * kv_heads) * head_dim + (qkv_bias ? double(heads + 2 * kv_heads) * head_dim : 0);
  return qkv + double(heads) * head_dim * h;
}

double
ModelArch::dense_ffn_parameters() const {
  return 3.0 * hidden * double(intermediate);
}

double
ModelArch::expert_parameters() const {
  return 3.0 * hidden * double(moe_intermediate);
}

double
ModelArch::total_parameters() const {
  const double embeddings = double(vocab) * hidden * (tied_embeddings ? 1 : 2);
  const double dense = double(is_moe() ? dense_layers : layers) * dense_ffn_parameters();
  const double moe =
      double(moe_layers()) * (double(experts + shared_experts) * expert_parameters() + double(hidden) * experts);
  return embeddings + double(layers) * attention_parameters() + dense + moe;
}

double
ModelArch::active_parameters() const {
  const double embeddings = double(vocab) * hidden * (tied_embeddings ? 1 : 2);
  const double dense = double(is_moe() ? dense_layers : layers) * dense_ffn_parameters();
  const double moe = double(moe_layers()) *
                     (double(experts_per_token + shared_experts) * expert_parameters() + double(hidden) * experts);
  return embeddings + double(layers) * attention_parameters() + dense + moe;
}

double
ModelArch::kv_elements_per_token_per_layer() const {
  if (is_mla())
    return double(kv_lora_rank + qk_rope_head_dim);
  return 2.0 * kv_heads * head_dim;
}

std::vector<std::string>
model_presets() {
  std::vector<std::string> names;
  for (const auto& [name, config] : preset_configs())
    names.push_back(name);
  return names;
}

ModelArch
parse_hf_config(const std::string& json_text, const std::string& source) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& error) { // parse errors and number overflows alike
    throw InputError(source + ": not valid JSON: " + error.what());
  }
  if (!json.is_object())
    throw InputError(source + ": a config.json holds one JSON object");
  const auto arch_list = json.find("architectures");
  if (arch_list == json.end() || !arch_list->is_array() || arch_list->empty() || !(*arch_list)[0].is_string())
    throw InputError(source + ": missing \"architectures\"; a Hugging Face config.json names its model class there");
  ModelArch arch;
  arch.architecture = (*arch_list)[0].get<std::string>();
  if (std::find(architectures.begin(), architectures.end(), arch.architecture) == architectures.end())
    throw InputError(source + ": architecture " + arch.architecture +
                     " is not supported by optkit plan; supported: " + join(architectures, ", "));
  const ConfigReader read(json, source);
  arch.layers = read.integer("num_hidden_layers");
  arch.hidden = read.integer("hidden_size");
  arch.heads = read.integer("num_attention_heads");
  arch.kv_heads = read.integer("num_key_value_heads", arch.heads);
  arch.head_dim = read.integer("head_dim", arch.hidden / arch.heads);
  arch.intermediate = read.integer("intermediate_size");
  arch.vocab = read.integer("vocab_size");
  arch.max_context = read.integer("max_position_embeddings", 0, 0);
  arch.tied_embeddings = read.boolean("tie_word_embeddings", false);
  arch.qkv_bias = arch.architecture == "Qwen2ForCausalLM" || read.boolean("attention_bias", false);
  if (arch.heads % arch.kv_heads != 0)
    throw InputError(source + ": num_attention_heads " + std::to_string(arch.heads) +
                     " is not a multiple of num_key_value_heads " + std::to_string(arch.kv_heads));
  if (arch.architecture == "Qwen3MoeForCausalLM") {
    arch.experts = read.integer("num_experts");
    arch.moe_intermediate = read.integer("moe_intermediate_size");
  } else if (arch.architecture == "MixtralForCausalLM") {
    arch.experts = read.integer("num_local_experts");
    arch.moe_intermediate = arch.intermediate;
  } else if (arch.architecture.starts_with("Deepseek")) {
    arch.experts = read.integer("n_routed_experts");
    arch.moe_intermediate = read.integer("moe_intermediate_size");
    arch.shared_experts = read.integer("n_shared_experts", 0, 0);
    arch.dense_layers = read.integer("first_k_dense_replace", 0, 0);
    arch.q_lora_rank = read.integer("q_lora_rank", 0, 0);
    arch.kv_lora_rank = read.integer("kv_lora_rank");
    arch.qk_nope_head_dim = read.integer("qk_nope_head_dim");
    arch.qk_rope_head_dim = read.integer("qk_rope_head_dim");
    arch.v_head_dim = read.integer("v_head_dim");
    arch.head_dim = arch.qk_nope_head_dim + arch.qk_rope_head_dim;
  }
  if (arch.is_moe()) {
    arch.experts_per_token = read.integer("num_experts_per_tok");
    if (arch.experts_per_token > arch.experts)
      throw InputError(source + ": num_experts_per_tok exceeds the number of experts");
    if (arch.dense_layers >= arch.layers)
      throw InputError(source + ": first_k_dense_replace must be below num_hidden_layers");
  }
  return arch;
}

ModelArch
resolve_model(const std::string& name_or_path) {
  const std::string key = lower(name_or_path);
  for (const auto& [name, config] : preset_configs())
    if (name == key) {
      auto arch = parse_hf_config(config, "preset " + name);
      arch.name = name;
      return arch;
    }
  std::filesystem::path path(name_or_path);
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    path /= "config.json";
  if (!std::filesystem::exists(path, error)) {
    std::string message = "--model " + name_or_path + ": neither a preset nor a config.json";
    if (auto close = closest_match(key, model_presets()))
      message += " (did you mean " + *close + "?)";
    throw InputError(message + "; presets: " + join(model_presets(), ", ") +
                     "; or pass a Hugging Face model folder or its config.json");
  }
  auto arch = parse_hf_config(read_input_file(path, "pass a Hugging Face config.json"), path.string());
  arch.name = path.parent_path().filename().string();
  if (arch.name.empty())
    arch.name = path.stem().string();
  return arch;
}

} // namespace optkit::perf
