#include "model/model_config.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_fields.hpp"
#include "model/gguf_model.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <numbers>

namespace optkit::model {

namespace {

using nlohmann::json;

std::int64_t
positive_int(const json& config, const std::string& source, const std::string& key) {
  if (!config.contains(key))
    throw InputError(source + ": missing required key '" + key + "'");
  const auto& v = config[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0)
    throw InputError(source + ": '" + key + "' must be a positive integer, got " + v.dump());
  return v.get<std::int64_t>();
}

double
number_or(const json& config, const std::string& source, const std::string& key, double fallback) {
  if (!config.contains(key) || config[key].is_null())
    return fallback;
  if (!config[key].is_number())
    throw InputError(source + ": '" + key + "' must be a number, got " + config[key].dump());
  return config[key].get<double>();
}

bool
bool_or(const json& config, const std::string& source, const std::string& key, bool fallback) {
  if (!config.contains(key) || config[key].is_null())
    return fallback;
  if (!config[key].is_boolean())
    throw InputError(source + ": '" + key + "' must be true or false, got " + config[key].dump());
  return config[key].get<bool>();
}

// One factor per rotated pair: a list of rotary_dim / 2 positive numbers.
std::vector<double>
longrope_factors(const json& scaling, const std::string& source, const char* key, std::int64_t pairs) {
  if (!scaling.contains(key) || !scaling[key].is_array() || static_cast<std::int64_t>(scaling[key].size()) != pairs)
    throw InputError(fmt::format("{}: rope_scaling type longrope needs '{}', a list of {} numbers (rotary_dim / 2)",
                                 source, key, pairs));
  std::vector<double> factors;
  for (const auto& f : scaling[key]) {
    if (!f.is_number() || !(f.get<double>() > 0))
      throw InputError(fmt::format("{}: rope_scaling {} holds {}, not a positive number", source, key, f.dump()));
    factors.push_back(f.get<double>());
  }
  return factors;
}

// LongRoPE (Phi-3): the short and long factors, the length that switches between them
// (original_max_position_embeddings, at the config's top level or in rope_scaling; 4096 if
// neither) and the attention factor: as given, else sqrt(1 + ln s / ln original) for the context
// extension s = max_position_embeddings / original (1 when s <= 1).
RopeScaling
longrope_scaling(const json& config, const json& scaling, const std::string& source, const ModelConfig& c) {
  RopeScaling r;
  r.type = "longrope";
  r.short_factor = longrope_factors(scaling, source, "short_factor", c.rotated_dims() / 2);
  r.long_factor = longrope_factors(scaling, source, "long_factor", c.rotated_dims() / 2);
  r.original_max_position_embeddings =
      number_or(config, source, "original_max_position_embeddings",
                number_or(scaling, source + " rope_scaling", "original_max_position_embeddings", 4096));
  if (r.original_max_position_embeddings < 2)
    throw InputError(source + ": original_max_position_embeddings must be at least 2");
  const double extension = static_cast<double>(c.max_position_embeddings) / r.original_max_position_embeddings;
  r.factor = extension;
  r.attention_factor =
      extension <= 1 ? 1.0 : std::sqrt(1 + std::log(extension) / std::log(r.original_max_position_embeddings));
  r.attention_factor = number_or(scaling, source + " rope_scaling", "attention_factor", r.attention_factor);
  if (!(r.attention_factor > 0))
    throw InputError(source + ": rope_scaling attention_factor must be positive");
  return r;
}

std::optional<RopeScaling>
parse_rope_scaling(const json& config, const std::string& source, const ModelConfig& c) {
  if (!config.contains("rope_scaling") || config["rope_scaling"].is_null())
    return std::nullopt;
  const auto& s = config["rope_scaling"];
  if (!s.is_object())
    throw InputError(source + ": 'rope_scaling' must be an object or null");
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (s.contains(key) && s[key].is_string()) {
      type = s[key].get<std::string>();
      break;
    }
  if (type == "default")
    return std::nullopt;
  const bool phi3 = c.architecture == Architecture::phi3;
  if (type == "longrope" || (phi3 && (type == "su" || type == "yarn"))) // Phi-3's legacy names
    return longrope_scaling(config, s, source, c);
  if (type != "llama3" && type != "linear")
    throw InputError(source + ": rope_scaling type '" + type +
                     "' is not supported (supported: llama3, linear, longrope, default)");
  RopeScaling r;
  r.type = type;
  r.factor = number_or(s, source + " rope_scaling", "factor", 0.0);
  if (r.factor <= 0)
    throw InputError(source + ": rope_scaling needs a positive 'factor'");
  if (type == "llama3") {
    for (const char* key : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!s.contains(key))
        throw InputError(source + ": rope_scaling type llama3 needs '" + std::string(key) + "'");
    r.low_freq_factor = number_or(s, source, "low_freq_factor", 1.0);
    r.high_freq_factor = number_or(s, source, "high_freq_factor", 4.0);
    r.original_max_position_embeddings = number_or(s, source, "original_max_position_embeddings", 8192);
    if (r.high_freq_factor <= r.low_freq_factor)
      throw InputError(source + ": rope_scaling high_freq_factor must exceed low_freq_factor");
  }
  return r;
}

std::vector<std::int64_t>
token_ids(const json& value) {
  std::vector<std::int64_t> out;
  if (value.is_number_integer())
    out.push_back(value.get<std::int64_t>());
  else if (value.is_array())
    for (const auto& v : value)
      if (v.is_number_integer())
        out.push_back(v.get<std::int64_t>());
  return out;
}

} // namespace

namespace {

const std::pair<std::string_view, Architecture> kArchitectures[] = {
    {"LlamaForCausalLM", Architecture::llama},        {"MistralForCausalLM", Architecture::mistral},
    {"Qwen2ForCausalLM", Architecture::qwen2},        {"Qwen3ForCausalLM", Architecture::qwen3},
    {"Gemma2ForCausalLM", Architecture::gemma2},      {"Gemma3ForCausalLM", Architecture::gemma3},
    {"Phi3ForCausalLM", Architecture::phi3},          {"MixtralForCausalLM", Architecture::mixtral},
    {"Qwen2MoeForCausalLM", Architecture::qwen2_moe}, {"Qwen3MoeForCausalLM", Architecture::qwen3_moe}};

} // namespace

std::string_view
supported_architectures() {
  static const std::string names = [] {
    std::string out;
    for (const auto& [name, architecture] : kArchitectures)
      out += (out.empty() ? "" : ", ") + std::string(name);
    return out;
  }();
  return names;
}

std::int64_t
ModelConfig::parameter_count() const {
  const std::int64_t attention = hidden_size * q_dim() * 2 + hidden_size * kv_dim() * 2 +
                                 (qkv_bias ? q_dim() + 2 * kv_dim() : 0) + (qk_norm ? 2 * head_dim : 0);
  const std::int64_t norms = (sandwich_norms ? 4 : 2) * hidden_size;
  std::int64_t layers = 0;
  for (std::int64_t l = 0; l < num_layers; ++l)
    layers += attention + norms +
              (is_moe_layer(l) ? num_experts * (3 * hidden_size * expert_intermediate_size + hidden_size) +
                                     3 * hidden_size * shared_expert_intermediate_size +
                                     (shared_expert_intermediate_size > 0 ? hidden_size : 0)
                               : 3 * hidden_size * intermediate_size);
  return layers + vocab_size * hidden_size * (tie_word_embeddings ? 1 : 2) + hidden_size;
}

bool
ModelConfig::is_moe_layer(std::int64_t layer) const {
  return num_experts > 0 && (moe_layers.empty() || moe_layers.at(static_cast<std::size_t>(layer)));
}

std::int64_t
ModelConfig::window_of(std::int64_t layer) const {
  if (sliding_window <= 0)
    return 0;
  if (sliding_layers.empty())
    return sliding_window;
  return sliding_layers.at(static_cast<std::size_t>(layer)) ? sliding_window : 0;
}

bool
ModelConfig::uses_local_rope(std::int64_t layer) const {
  return local_rope_theta > 0 && window_of(layer) > 0;
}

float
ModelConfig::attention_scale() const {
  const double scalar = query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<double>(head_dim);
  return static_cast<float>(1.0 / std::sqrt(scalar));
}

std::int64_t
ModelConfig::long_rope_threshold() const {
  return rope_scaling && rope_scaling->type == "longrope"
             ? static_cast<std::int64_t>(rope_scaling->original_max_position_embeddings)
             : 0;
}

namespace {

Architecture
architecture_named(const std::string& name, const std::string& source) {
  for (const auto& [known, architecture] : kArchitectures)
    if (known == name)
      return architecture;
  throw InputError(source + ": architecture '" + name +
                   "' is not supported (supported: " + std::string(supported_architectures()) + ")");
}

bool
is_gemma(Architecture a) {
  return a == Architecture::gemma2 || a == Architecture::gemma3;
}

// The MLP activation: hidden_activation (Gemma's key) or hidden_act, which must be the family's.
void
read_activation(const json& config, const std::string& source, ModelConfig& c) {
  const bool gemma = is_gemma(c.architecture);
  const char* key = config.contains("hidden_activation") && !config["hidden_activation"].is_null() ? "hidden_activation"
                                                                                                   : "hidden_act";
  const std::string expected = gemma ? "gelu_pytorch_tanh" : "silu";
  if (config.contains(key) && !config[key].is_null() && config[key] != expected)
    throw InputError(source + ": " + key + " " + config[key].dump() + " is not supported for " + c.architecture_name +
                     " (supported: " + expected + ")");
  c.activation = gemma ? Activation::gelu_tanh : Activation::silu;
}

// Which layers slide: an explicit layer_types list, else Gemma's pattern (every `pattern`-th layer
// global: Gemma 2 alternates, Gemma 3's sliding_window_pattern defaults to 6).
std::vector<bool>
sliding_layer_pattern(const json& config, const std::string& source, const ModelConfig& c) {
  std::vector<bool> slides;
  if (config.contains("layer_types") && !config["layer_types"].is_null()) {
    const auto& types = config["layer_types"];
    if (!types.is_array() || static_cast<std::int64_t>(types.size()) != c.num_layers)
      throw InputError(source + ": 'layer_types' must list one type per layer (" + std::to_string(c.num_layers) + ")");
    for (const auto& t : types) {
      if (t != "sliding_attention" && t != "full_attention")
        throw InputError(source + ": layer type " + t.dump() +
                         " is not supported (supported: sliding_attention, full_attention)");
      slides.push_back(t == "sliding_attention");
    }
    return slides;
  }
  const std::int64_t pattern = c.architecture == Architecture::gemma2 ? 2
                               : config.contains("sliding_window_pattern")
                                   ? positive_int(config, source, "sliding_window_pattern")
                                   : 6;
  for (std::int64_t i = 0; i < c.num_layers; ++i)
    slides.push_back((i + 1) % pattern != 0);
  return slides;
}

// A cap of 0 or null is off; Gemma 2's defaults are 50 (attention) and 30 (final), Gemma 3's none.
float
softcap(const json& config, const std::string& source, const std::string& key, double fallback) {
  const double cap = config.contains(key) && config[key].is_null() ? 0.0 : number_or(config, source, key, fallback);
  if (cap < 0 || !std::isfinite(cap))
    throw InputError(source + ": '" + key + "' must be a positive number or null, got " + config[key].dump());
  return static_cast<float>(cap);
}

void
read_gemma_fields(const json& config, const std::string& source, ModelConfig& c) {
  const bool gemma2 = c.architecture == Architecture::gemma2;
  c.norm_gain_offset = 1.0f;
  c.sandwich_norms = true;
  c.scaled_embeddings = true;
  c.qk_norm = !gemma2;
  c.query_pre_attn_scalar = number_or(config, source, "query_pre_attn_scalar", 256.0);
  if (c.query_pre_attn_scalar <= 0)
    throw InputError(source + ": 'query_pre_attn_scalar' must be positive");
  c.attention_softcap = softcap(config, source, "attn_logit_softcapping", gemma2 ? 50.0 : 0.0);
  c.final_softcap = softcap(config, source, "final_logit_softcapping", gemma2 ? 30.0 : 0.0);
  c.sliding_window = config.contains("sliding_window") && config["sliding_window"].is_null()
                         ? 0
                         : (config.contains("sliding_window") ? positive_int(config, source, "sliding_window") : 4096);
  if (c.sliding_window > 0)
    c.sliding_layers = sliding_layer_pattern(config, source, c);
  if (!gemma2)
    c.local_rope_theta = number_or(config, source, "rope_local_base_freq", 10000.0);
}

// Mixtral: every layer routes among num_local_experts experts of intermediate_size, top-k
// renormalized. Qwen3-MoE: num_experts of moe_intermediate_size in the layers that decoder_sparse_step
// picks and mlp_only_layers does not name (the others are dense MLPs of intermediate_size); the
// top-k renormalized when norm_topk_prob.
void
read_moe_fields(const json& config, const std::string& source, ModelConfig& c) {
  const bool mixtral = c.architecture == Architecture::mixtral;
  c.num_experts = positive_int(config, source, mixtral ? "num_local_experts" : "num_experts");
  c.experts_per_token = positive_int(config, source, "num_experts_per_tok");
  if (c.experts_per_token > c.num_experts)
    throw InputError(source + ": num_experts_per_tok " + std::to_string(c.experts_per_token) + " exceeds the " +
                     std::to_string(c.num_experts) + " experts");
  c.expert_intermediate_size = mixtral ? c.intermediate_size : positive_int(config, source, "moe_intermediate_size");
  c.normalize_expert_weights = mixtral || bool_or(config, source, "norm_topk_prob", false);
  if (mixtral)
    return;
  if (c.architecture == Architecture::qwen2_moe)
    c.shared_expert_intermediate_size = positive_int(config, source, "shared_expert_intermediate_size");
  const std::int64_t step =
      config.contains("decoder_sparse_step") ? positive_int(config, source, "decoder_sparse_step") : 1;
  std::vector<bool> dense(static_cast<std::size_t>(c.num_layers), false);
  if (config.contains("mlp_only_layers") && !config["mlp_only_layers"].is_null()) {
    if (!config["mlp_only_layers"].is_array())
      throw InputError(source + ": 'mlp_only_layers' must be a list of layer indices");
    for (const auto& l : config["mlp_only_layers"]) {
      if (!l.is_number_integer() || l.get<std::int64_t>() < 0 || l.get<std::int64_t>() >= c.num_layers)
        throw InputError(source + ": mlp_only_layers names " + l.dump() + ", not a layer of " +
                         std::to_string(c.num_layers));
      dense[l.get<std::size_t>()] = true;
    }
  }
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    c.moe_layers.push_back(!dense[static_cast<std::size_t>(l)] && (l + 1) % step == 0);
}

// How many leading dims of a head RoPE rotates: head_dim × partial_rotary_factor (at the config's
// top level, or in transformers v5's rope_parameters), an even number.
std::int64_t
rotary_dimensions(const json& config, const std::string& source, std::int64_t head_dim) {
  double factor = number_or(config, source, "partial_rotary_factor", 1.0);
  if (config.contains("rope_parameters") && config["rope_parameters"].is_object())
    factor = number_or(config["rope_parameters"], source + " rope_parameters", "partial_rotary_factor", factor);
  const auto dims = static_cast<std::int64_t>(static_cast<double>(head_dim) * factor);
  if (!(factor > 0 && factor <= 1) || dims < 2 || dims % 2 != 0)
    throw InputError(fmt::format("{}: partial_rotary_factor {} of head_dim {} gives {} rotated dims; it must be in "
                                 "(0, 1] and give an even number",
                                 source, factor, head_dim, dims));
  return dims;
}

ModelConfig
model_config_fields(const json& config, const std::string& source) {
  if (!config.is_object())
    throw InputError(source + ": not a JSON object");
  if (!config.contains("architectures") || !config["architectures"].is_array() || config["architectures"].empty() ||
      !config["architectures"][0].is_string())
    throw InputError(source + ": missing 'architectures' (supported: " + std::string(supported_architectures()) + ")");
  ModelConfig c;
  c.architecture_name = config["architectures"][0].get<std::string>();
  c.architecture = architecture_named(c.architecture_name, source);
  const bool gemma = is_gemma(c.architecture);
  c.vocab_size = positive_int(config, source, "vocab_size");
  c.hidden_size = positive_int(config, source, "hidden_size");
  c.intermediate_size = positive_int(config, source, "intermediate_size");
  c.num_layers = positive_int(config, source, "num_hidden_layers");
  c.num_heads = positive_int(config, source, "num_attention_heads");
  c.num_kv_heads = config.contains("num_key_value_heads") && !config["num_key_value_heads"].is_null()
                       ? positive_int(config, source, "num_key_value_heads")
                       : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0)
    throw InputError(source + ": num_attention_heads " + std::to_string(c.num_heads) +
                     " is not a multiple of num_key_value_heads " + std::to_string(c.num_kv_heads));
  if (config.contains("head_dim") && !config["head_dim"].is_null())
    c.head_dim = positive_int(config, source, "head_dim");
  else if (c.hidden_size % c.num_heads == 0)
    c.head_dim = c.hidden_size / c.num_heads;
  else
    throw InputError(source + ": hidden_size is not a multiple of num_attention_heads and no 'head_dim' is given");
  c.rotary_dim = rotary_dimensions(config, source, c.head_dim);
  c.max_position_embeddings =
      config.contains("max_position_embeddings") ? positive_int(config, source, "max_position_embeddings") : 2048;
  c.rms_norm_eps =
      static_cast<float>(number_or(config, source, "rms_norm_eps", c.architecture == Architecture::phi3 ? 1e-5 : 1e-6));
  c.rope_theta = number_or(config, source, "rope_theta", c.architecture == Architecture::gemma3 ? 1e6 : 10000.0);
  c.rope_scaling = parse_rope_scaling(config, source, c);
  c.tie_word_embeddings = bool_or(config, source, "tie_word_embeddings", gemma);
  c.qkv_bias = c.architecture == Architecture::qwen2 || c.architecture == Architecture::qwen2_moe ||
               bool_or(config, source, "attention_bias", false);
  c.qk_norm = c.architecture == Architecture::qwen3 || c.architecture == Architecture::qwen3_moe;
  c.fused_projections = c.architecture == Architecture::phi3;
  if ((c.architecture == Architecture::mistral || c.architecture == Architecture::mixtral ||
       c.architecture == Architecture::phi3) &&
      config.contains("sliding_window") && !config["sliding_window"].is_null())
    c.sliding_window = positive_int(config, source, "sliding_window");
  read_activation(config, source, c);
  if (gemma)
    read_gemma_fields(config, source, c);
  if (c.architecture == Architecture::mixtral || c.architecture == Architecture::qwen2_moe ||
      c.architecture == Architecture::qwen3_moe)
    read_moe_fields(config, source, c);
  if (config.contains("bos_token_id") && config["bos_token_id"].is_number_integer())
    c.bos_token_id = config["bos_token_id"].get<std::int64_t>();
  if (config.contains("eos_token_id"))
    c.eos_token_ids = token_ids(config["eos_token_id"]);
  if (config.contains("torch_dtype") && config["torch_dtype"].is_string())
    c.torch_dtype = config["torch_dtype"].get<std::string>();
  return c;
}

} // namespace

ModelConfig
parse_model_config(const json& config, const std::string& source) {
  return read_json_fields(source, [&] { return model_config_fields(config, source); });
}

ModelConfig
load_model_config(const std::filesystem::path& model_dir) {
  if (is_gguf_model(model_dir))
    return gguf_model_config(GgufFile(model_dir));
  const auto path = model_dir / "config.json";
  return parse_model_config(read_json_file(path, "is it a Hugging Face model folder?"), path.string());
}

namespace {

// base^(−2i / rotary_dim), each divided by its factor when `stretch` gives them.
std::vector<double>
plain_inverse_frequencies(const ModelConfig& c, const std::vector<double>& stretch = {}) {
  std::vector<double> inv(static_cast<std::size_t>(c.rotated_dims() / 2));
  for (std::size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0 / ((stretch.empty() ? 1.0 : stretch[i]) *
                    std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(c.rotated_dims())));
  return inv;
}

} // namespace

std::vector<double>
long_rope_inverse_frequencies(const ModelConfig& c) {
  return c.long_rope_threshold() > 0 ? plain_inverse_frequencies(c, c.rope_scaling->long_factor)
                                     : std::vector<double>{};
}

double
rope_attention_factor(const ModelConfig& c) {
  return c.rope_scaling ? c.rope_scaling->attention_factor : 1.0;
}

std::vector<double>
rope_inverse_frequencies(const ModelConfig& c) {
  if (!c.rope_scaling)
    return plain_inverse_frequencies(c);
  const auto& s = *c.rope_scaling;
  if (s.type == "longrope")
    return plain_inverse_frequencies(c, s.short_factor);
  if (s.type == "frequency_factors")
    return plain_inverse_frequencies(c, s.frequency_factors);
  auto inv = plain_inverse_frequencies(c);
  if (s.type == "linear") {
    for (auto& f : inv)
      f /= s.factor;
    return inv;
  }
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  for (auto& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f /= s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
}

std::vector<double>
local_rope_inverse_frequencies(const ModelConfig& c) {
  if (c.local_rope_theta <= 0)
    return {};
  ModelConfig local = c;
  local.rope_theta = c.local_rope_theta;
  local.rope_scaling.reset();
  return rope_inverse_frequencies(local);
}

std::string
describe_features(const ModelConfig& c) {
  std::vector<std::string> parts;
  parts.push_back(fmt::format("{} layers, hidden {}, {} heads / {} KV heads of {}", c.num_layers, c.hidden_size,
                              c.num_heads, c.num_kv_heads, c.head_dim));
  if (c.sliding_window > 0) {
    const auto sliding =
        c.sliding_layers.empty() ? c.num_layers : std::count(c.sliding_layers.begin(), c.sliding_layers.end(), true);
    parts.push_back(fmt::format("sliding window {} on {} of {} layers", c.sliding_window, sliding, c.num_layers));
  }
  if (c.local_rope_theta > 0)
    parts.push_back(fmt::format("local RoPE base {:g}, global {:g}", c.local_rope_theta, c.rope_theta));
  if (c.rope_scaling)
    parts.push_back(fmt::format("rope_scaling {} x{:g}", c.rope_scaling->type, c.rope_scaling->factor));
  if (c.long_rope_threshold() > 0)
    parts.push_back(fmt::format("long factors past {} tokens, attention factor {:.4g}", c.long_rope_threshold(),
                                c.rope_scaling->attention_factor));
  if (c.rotated_dims() < c.head_dim)
    parts.push_back(fmt::format("rotary on {} of {} head dims", c.rotary_dim, c.head_dim));
  if (c.fused_projections)
    parts.push_back("fused qkv_proj and gate_up_proj");
  if (c.qkv_bias)
    parts.push_back("q/k/v bias");
  if (c.qk_norm)
    parts.push_back("q/k norms");
  if (c.sandwich_norms)
    parts.push_back("norms before and after each sub-block");
  parts.push_back(c.activation == Activation::gelu_tanh ? "GeGLU (gelu tanh)" : "SwiGLU");
  if (c.scaled_embeddings)
    parts.push_back("embeddings scaled by sqrt(hidden)");
  if (c.attention_softcap > 0)
    parts.push_back(fmt::format("attention soft-cap {:g}", c.attention_softcap));
  if (c.final_softcap > 0)
    parts.push_back(fmt::format("final soft-cap {:g}", c.final_softcap));
  if (c.num_experts > 0) {
    const auto routed =
        c.moe_layers.empty() ? c.num_layers : std::count(c.moe_layers.begin(), c.moe_layers.end(), true);
    parts.push_back(fmt::format("{} experts, top-{}{} of width {} on {} of {} layers", c.num_experts,
                                c.experts_per_token, c.normalize_expert_weights ? " renormalized" : "",
                                c.expert_intermediate_size, routed, c.num_layers));
    if (c.shared_expert_intermediate_size > 0)
      parts.push_back(fmt::format("a gated shared expert of width {}", c.shared_expert_intermediate_size));
  }
  if (c.tie_word_embeddings)
    parts.push_back("tied embeddings");
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string
shape_difference(const ModelConfig& a, const ModelConfig& b) {
  if (a.architecture_name != b.architecture_name)
    return fmt::format("architectures {} vs {}", a.architecture_name, b.architecture_name);
  const std::pair<const char*, std::int64_t ModelConfig::*> sizes[] = {
      {"vocab_size", &ModelConfig::vocab_size},
      {"hidden_size", &ModelConfig::hidden_size},
      {"intermediate_size", &ModelConfig::intermediate_size},
      {"num_hidden_layers", &ModelConfig::num_layers},
      {"num_attention_heads", &ModelConfig::num_heads},
      {"num_key_value_heads", &ModelConfig::num_kv_heads},
      {"head_dim", &ModelConfig::head_dim},
      {"num_experts", &ModelConfig::num_experts},
      {"moe_intermediate_size", &ModelConfig::expert_intermediate_size},
      {"shared_expert_intermediate_size", &ModelConfig::shared_expert_intermediate_size}};
  for (const auto& [name, member] : sizes)
    if (a.*member != b.*member)
      return fmt::format("{} {} vs {}", name, a.*member, b.*member);
  if (a.moe_layers != b.moe_layers)
    return "the layers that route to experts differ";
  return {};
}

} // namespace optkit::model
