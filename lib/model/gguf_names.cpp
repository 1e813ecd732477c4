#include "model/gguf_names.hpp"

#include <array>
#include <regex>
#include <utility>

namespace optkit::model {

namespace {

// The modules inside a decoder layer: HF suffix, GGUF suffix.
constexpr std::array<std::pair<const char*, const char*>, 11> kLayerModules = {{
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"self_attn.o_proj", "attn_output"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
}};

constexpr std::array<std::pair<const char*, const char*>, 3> kModelTensors = {{
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"lm_head", "output"},
}};

} // namespace

std::optional<std::string>
gguf_tensor_name(const std::string& hf_name) {
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))");
  static const std::regex whole(R"((.+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(hf_name, m, layer)) {
    for (const auto& [hf, gguf] : kLayerModules)
      if (m[2] == hf)
        return "blk." + m[1].str() + "." + gguf + "." + m[3].str();
    return std::nullopt;
  }
  if (std::regex_match(hf_name, m, whole))
    for (const auto& [hf, gguf] : kModelTensors)
      if (m[1] == hf)
        return std::string(gguf) + "." + m[2].str();
  return std::nullopt;
}

std::optional<std::string>
hf_tensor_name(const std::string& gguf_name) {
  static const std::regex layer(R"(blk\.(\d+)\.(\w+)\.(weight|bias))");
  static const std::regex whole(R"((\w+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(gguf_name, m, layer)) {
    for (const auto& [hf, gguf] : kLayerModules)
      if (m[2] == gguf)
        return "model.layers." + m[1].str() + "." + hf + "." + m[3].str();
    return std::nullopt;
  }
  if (std::regex_match(gguf_name, m, whole))
    for (const auto& [hf, gguf] : kModelTensors)
      if (m[1] == gguf)
        return std::string(hf) + "." + m[2].str();
  return std::nullopt;
}

std::string
gguf_router_name(std::int64_t layer) {
  return "blk." + std::to_string(layer) + ".ffn_gate_inp.weight";
}

std::string
gguf_experts_name(std::int64_t layer, ExpertProjection projection) {
  static constexpr const char* kNames[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  return "blk." + std::to_string(layer) + "." + kNames[static_cast<std::size_t>(projection)] + ".weight";
}

std::vector<GgufSources>
gguf_moe_tensors(const ModelConfig& config, std::int64_t layer) {
  std::vector<GgufSources> out{{gguf_router_name(layer), {router_module(config, layer) + ".weight"}}};
  for (const auto p : {ExpertProjection::gate, ExpertProjection::up, ExpertProjection::down}) {
    auto& stacked = out.emplace_back(GgufSources{gguf_experts_name(layer, p), {}});
    for (std::int64_t e = 0; e < config.num_experts; ++e)
      stacked.hf.push_back(expert_module(config, layer, e, p) + ".weight");
  }
  return out;
}

std::optional<GgufExpertsPlace>
gguf_experts_place(const std::string& gguf_name) {
  static const std::regex stacked(R"(blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight)");
  std::smatch m;
  if (!std::regex_match(gguf_name, m, stacked))
    return std::nullopt;
  const auto p = m[2] == "gate" ? ExpertProjection::gate : m[2] == "up" ? ExpertProjection::up : ExpertProjection::down;
  return GgufExpertsPlace{std::stoll(m[1].str()), p};
}

std::optional<GgufExpertSlot>
gguf_expert_slot(const std::string& hf_name) {
  static const std::regex expert(
      R"(model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(w1|w3|w2|gate_proj|up_proj|down_proj)\.weight)");
  std::smatch m;
  if (!std::regex_match(hf_name, m, expert))
    return std::nullopt;
  const auto p = m[3] == "w1" || m[3] == "gate_proj" ? ExpertProjection::gate
                 : m[3] == "w3" || m[3] == "up_proj" ? ExpertProjection::up
                                                     : ExpertProjection::down;
  return GgufExpertSlot{gguf_experts_name(std::stoll(m[1].str()), p), std::stoll(m[2].str())};
}

bool
gguf_rope_permuted(std::string_view arch, const std::string& hf_name) {
  return arch == "llama" && (hf_name.find(".self_attn.q_proj.") != std::string::npos ||
                             hf_name.find(".self_attn.k_proj.") != std::string::npos);
}

} // namespace optkit::model
