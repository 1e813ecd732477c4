// A PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) as serve-deltas serves it
// beside the base: per target module the two factors A [r, in] and B [out, r] and the scale
// (lora_alpha / r, or / √r with use_rslora), so a batch adds scale · (x·Aᵀ)·Bᵀ over each run of the
// adapter's rows — the base weights untouched. What PEFT can save and this does not serve (DoRA,
// trained biases, modules_to_save, per-module rank or alpha patterns, fan_in_fan_out, LoRA on the
// embedding or LM head) is refused at load by name, never served wrongly.
#pragma once

#include "core/thread_pool.hpp"
#include "model/model_config.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace optkit::runtime {

class LowRankDelta {
public:
  LowRankDelta(std::vector<float> a, std::vector<float> b, std::int64_t rank, std::int64_t rows, std::int64_t cols,
               float scale);
  std::int64_t rows() const { return m_rows; }
  // y[m, rows] += scale · x[m, cols] · Aᵀ · Bᵀ (y's rows are `ldy` floats apart).
  void multiply_add(const float* x, std::int64_t m, float* y, std::int64_t ldy, ThreadPool& pool) const;
  std::uint64_t storage_bytes() const { return (m_a.size() + m_b.size()) * sizeof(float); }

private:
  std::vector<float> m_a; // [rank, cols]
  std::vector<float> m_b; // [rows, rank], the scale folded in
  std::int64_t m_rank, m_rows, m_cols;
};

// True when `dir` holds a PEFT adapter (adapter_config.json).
bool is_lora_adapter(const std::filesystem::path& dir);

using LoraFactors = std::map<std::string, std::unique_ptr<LowRankDelta>>;

// The adapter's factors by module ("model.layers.3.self_attn.q_proj"), checked against the base's
// shapes. Throws InputError naming the file and the field or tensor.
LoraFactors load_lora_adapter(const std::filesystem::path& dir, const model::ModelConfig& base);
// The same from the parsed adapter_config.json and the bytes of adapter_model.safetensors;
// `source` names them in errors (what the fuzz target drives).
LoraFactors parse_lora_adapter(const nlohmann::json& config, std::span<const std::byte> safetensors,
                               const std::string& source, const model::ModelConfig& base);

} // namespace optkit::runtime
