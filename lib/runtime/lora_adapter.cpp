#include "runtime/lora_adapter.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_fields.hpp"
#include "model/safetensors.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <optional>

namespace optkit::runtime {

LowRankDelta::LowRankDelta(std::vector<float> a, std::vector<float> b, std::int64_t rank, std::int64_t rows,
                           std::int64_t cols, float scale)
    : m_a(std::move(a)), m_b(std::move(b)), m_rank(rank), m_rows(rows), m_cols(cols) {
  for (auto& v : m_b)
    v *= scale;
}

void
LowRankDelta::multiply_add(const float* x, std::int64_t m, float* y, std::int64_t ldy, ThreadPool& pool) const {
  // t = x·Aᵀ is m × r, small; then y += t·Bᵀ, split over blocks of output rows.
  thread_local std::vector<float> t;
  t.assign(static_cast<std::size_t>(m * m_rank), 0.0f);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(m_rank),
              static_cast<blasint>(m_cols), 1.0f, x, static_cast<blasint>(m_cols), m_a.data(),
              static_cast<blasint>(m_cols), 0.0f, t.data(), static_cast<blasint>(m_rank));
  constexpr std::int64_t kBlock = 256;
  const float* tp = t.data();
  pool.parallel_for((m_rows + kBlock - 1) / kBlock, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t r0 = b * kBlock, n = std::min(kBlock, m_rows - r0);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                  static_cast<blasint>(m_rank), 1.0f, tp, static_cast<blasint>(m_rank), m_b.data() + r0 * m_rank,
                  static_cast<blasint>(m_rank), 1.0f, y + r0, static_cast<blasint>(ldy));
    }
  });
}

bool
is_lora_adapter(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "adapter_config.json");
}

namespace {

struct LoraConfig {
  std::int64_t rank = 0;
  float scale = 1;
};

LoraConfig
read_lora_config(const nlohmann::json& config, const std::string& source) {
  return read_json_fields(source, [&] {
    if (!config.is_object())
      throw InputError(source + ": not a JSON object");
    const auto refuse = [&](const std::string& what) {
      throw InputError(source + ": " + what + " is not served by optkit serve-deltas");
    };
    if (config.contains("peft_type") && config["peft_type"] != "LORA")
      refuse("peft_type " + config["peft_type"].dump());
    if (config.value("use_dora", false))
      refuse("use_dora: true (DoRA)");
    if (config.value("fan_in_fan_out", false))
      refuse("fan_in_fan_out: true");
    if (config.contains("bias") && config["bias"] != "none")
      refuse("bias " + config["bias"].dump());
    for (const char* field : {"modules_to_save", "rank_pattern", "alpha_pattern"})
      if (config.contains(field) && !config[field].is_null() && !config[field].empty())
        refuse(std::string(field) + " " + config[field].dump());
    LoraConfig out;
    out.rank = config.at("r").get<std::int64_t>();
    if (out.rank < 1 || out.rank > 65536)
      throw InputError(fmt::format("{}: r must be between 1 and 65536, got {}", source, out.rank));
    const double alpha = config.at("lora_alpha").get<double>();
    if (!std::isfinite(alpha))
      throw InputError(source + ": lora_alpha must be a finite number");
    const bool rslora = config.value("use_rslora", false);
    out.scale =
        static_cast<float>(alpha / (rslora ? std::sqrt(static_cast<double>(out.rank)) : static_cast<double>(out.rank)));
    return out;
  });
}

// [rows, cols] of a decoder module the adapter may target ("model.layers.3.mlp.down_proj").
std::optional<std::pair<std::int64_t, std::int64_t>>
module_shape(const std::string& module, const model::ModelConfig& c) {
  const std::string_view prefix = "model.layers.";
  if (module.rfind(prefix, 0) != 0)
    return std::nullopt;
  std::int64_t layer = -1;
  const char* digits = module.data() + prefix.size();
  const auto [end, error] = std::from_chars(digits, module.data() + module.size(), layer);
  if (error != std::errc() || end == digits || (*digits == '0' && end - digits > 1) || layer < 0 ||
      layer >= c.num_layers || end == module.data() + module.size() || *end != '.')
    return std::nullopt;
  const std::string k(end + 1, module.data() + module.size());
  if (k == "self_attn.q_proj")
    return std::pair{c.q_dim(), c.hidden_size};
  if (k == "self_attn.k_proj" || k == "self_attn.v_proj")
    return std::pair{c.kv_dim(), c.hidden_size};
  if (k == "self_attn.o_proj")
    return std::pair{c.hidden_size, c.q_dim()};
  if (k.starts_with("mlp.") && c.is_moe_layer(layer))
    return std::nullopt; // a mixture of experts' router and experts take no adapter
  if (k == "mlp.gate_proj" || k == "mlp.up_proj")
    return std::pair{c.intermediate_size, c.hidden_size};
  if (k == "mlp.down_proj")
    return std::pair{c.hidden_size, c.intermediate_size};
  return std::nullopt;
}

} // namespace

LoraFactors
load_lora_adapter(const std::filesystem::path& dir, const model::ModelConfig& base) {
  const auto config_path = dir / "adapter_config.json";
  const auto config = read_json_file(config_path);
  const auto weights = dir / "adapter_model.safetensors";
  if (!std::filesystem::exists(weights))
    throw InputError(weights.string() + ": no such file (only the safetensors form of a PEFT adapter is read; " +
                     "save it with safe_serialization=True)");
  const std::string bytes = read_input_file(weights);
  return parse_lora_adapter(config, std::as_bytes(std::span(bytes.data(), bytes.size())), dir.string(), base);
}

LoraFactors
parse_lora_adapter(const nlohmann::json& config_json, std::span<const std::byte> safetensors, const std::string& source,
                   const model::ModelConfig& base) {
  const LoraConfig config = read_lora_config(config_json, source + "/adapter_config.json");
  const std::string weights = source + "/adapter_model.safetensors";
  const auto header = model::parse_safetensors(safetensors, weights);
  const auto view = [&](const model::TensorInfo& info) {
    model::TensorView v;
    v.info = &info;
    v.bytes = safetensors.subspan(static_cast<std::size_t>(header.data_offset + info.begin),
                                  static_cast<std::size_t>(info.end - info.begin));
    return v;
  };
  struct Factors {
    std::optional<model::TensorView> a, b;
  };
  std::map<std::string, Factors> modules;
  for (const auto& info : header.tensors) {
    std::string name = info.name;
    const std::string prefix = "base_model.model.";
    if (name.rfind(prefix, 0) == 0)
      name = name.substr(prefix.size());
    const auto ends_with = [&](const std::string& suffix) {
      return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    const bool is_a = ends_with(".lora_A.weight"), is_b = ends_with(".lora_B.weight");
    if (!is_a && !is_b)
      throw InputError(fmt::format("{}: tensor {} is not a LoRA factor this server serves", weights, info.name));
    const std::string module = name.substr(0, name.size() - std::string(".lora_A.weight").size());
    (is_a ? modules[module].a : modules[module].b) = view(info);
  }
  if (modules.empty())
    throw InputError(weights + ": no LoRA factors");
  LoraFactors out;
  for (const auto& [module, f] : modules) {
    const auto shape = module_shape(module, base);
    if (!shape && base.fused_projections && (module.ends_with(".qkv_proj") || module.ends_with(".gate_up_proj")))
      throw InputError(
          fmt::format("{}: LoRA on {}'s fused {} is not served yet", weights, base.architecture_name, module));
    if (!shape)
      throw InputError(fmt::format("{}: LoRA on {} is not served (decoder layers' attention and MLP projections "
                                   "of this {}-layer base only)",
                                   weights, module, base.num_layers));
    if (!f.a || !f.b)
      throw InputError(
          fmt::format("{}: {} has lora_{} without lora_{}", weights, module, f.a ? "A" : "B", f.a ? "B" : "A"));
    const auto [rows, cols] = *shape;
    if (f.a->shape() != std::vector<std::int64_t>{config.rank, cols} ||
        f.b->shape() != std::vector<std::int64_t>{rows, config.rank})
      throw InputError(fmt::format("{}: {} factors are not A [{}, {}] and B [{}, {}] (r = {}): is the adapter for "
                                   "another base?",
                                   weights, module, config.rank, cols, rows, config.rank, config.rank));
    out[module] =
        std::make_unique<LowRankDelta>(f.a->to_floats(), f.b->to_floats(), config.rank, rows, cols, config.scale);
  }
  return out;
}

} // namespace optkit::runtime
