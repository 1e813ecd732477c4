#include "perf/memory_model.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace optkit::perf {

Engine
parse_engine(const std::string& text, const std::string& flag) {
  if (text == "vllm")
    return Engine::vllm;
  if (text == "sglang")
    return Engine::sglang;
  if (text == "trtllm")
    return Engine::trtllm;
  if (text == "llamacpp")
    return Engine::llamacpp;
  throw InputError(flag + " " + text + ": unknown engine; use vllm, sglang, trtllm or llamacpp");
}

std::string
engine_name(Engine engine) {
  switch (engine) {
  case Engine::vllm:
    return "vllm";
  case Engine::sglang:
    return "sglang";
  case Engine::trtllm:
    return "trtllm";
  case Engine::llamacpp:
    return "llamacpp";
  }
  return "?";
}

double
default_memory_fraction(Engine) {
  return 0.9;
}

Precision
default_kv_dtype(Engine engine, Precision weights) {
  if (engine == Engine::trtllm && weights == Precision::fp8)
    return Precision::fp8;
  return weights == Precision::fp16 ? Precision::fp16 : Precision::bf16;
}

double
MemoryBudget::used_gib(double sequences) const {
  return (weight_bytes + activation_bytes + reserve_bytes + sequences * kv_bytes_per_sequence) /
         (1024.0 * 1024.0 * 1024.0);
}

double
kv_cache_bytes(const ModelArch& model, const ServingPrecision& precision, double tokens) {
  return tokens * model.layers * model.kv_elements_per_token_per_layer() * bytes_per_element(precision.kv_cache);
}

MemoryBudget
memory_budget(const ModelArch& m, const SystemSpec& system, const ParallelConfig& p, const ServingPrecision& precision,
              Engine engine, double memory_fraction, double step_tokens, double sequence_tokens) {
  MemoryBudget budget;
  budget.capacity_bytes = system.memory_bytes();
  const double tp = p.tp;
  const double layers_per_stage = std::ceil(double(m.layers) / p.pp);
  const double dense_share = m.is_moe() ? double(m.dense_layers) / m.layers : 1.0;
  double layer_parameters = m.attention_parameters() / tp + dense_share * m.dense_ffn_parameters() / tp;
  if (m.is_moe()) {
    const double moe_share = double(m.moe_layers()) / m.layers;
    layer_parameters +=
        moe_share * (double(m.experts) * m.expert_parameters() / (p.ep * p.moe_tp()) +
                     double(m.shared_experts) * m.expert_parameters() / tp + double(m.hidden) * m.experts);
  }
  const double embedding = double(m.vocab) * m.hidden / tp * 2.0; // 16-bit, vocabulary-parallel
  const double head_and_embedding = p.pp == 1 ? embedding * (m.tied_embeddings ? 1 : 2) : embedding;
  budget.weight_bytes = layers_per_stage * layer_parameters * bytes_per_element(precision.weights) + head_and_embedding;

  const double rank_tokens = step_tokens / p.dp;
  const double ffn_local =
      m.is_moe() ? std::max(double(m.intermediate) * dense_share, double(m.moe_intermediate) * m.experts_per_token) / tp
                 : double(m.intermediate) / tp;
  // Logits exist only for rows that sample (last prompt tokens and decode tokens).
  budget.activation_bytes =
      rank_tokens * (6.0 * m.hidden + 3.0 * ffn_local) * 2.0 + std::min(rank_tokens, 1024.0) * m.vocab / tp * 4.0;
  budget.reserve_bytes = system.runtime_reserve_gib * 1024.0 * 1024.0 * 1024.0 +
                         (p.gpus() > 1 ? system.collective_reserve_mib * 1024.0 * 1024.0 : 0);

  // Each GPU holds its heads' cache for its data-parallel group's sequences; GQA heads are
  // replicated when TP exceeds the KV-head count, MLA's latent on every TP rank.
  const double kv_per_layer =
      m.is_mla() ? m.kv_elements_per_token_per_layer() : 2.0 * std::max(1.0, m.kv_heads / tp) * m.head_dim;
  budget.kv_bytes_per_sequence =
      sequence_tokens * layers_per_stage * kv_per_layer * bytes_per_element(precision.kv_cache) / p.dp;

  const double fixed = budget.weight_bytes + budget.activation_bytes + budget.reserve_bytes;
  if (engine == Engine::trtllm)
    budget.kv_budget_bytes = fixed < budget.capacity_bytes ? memory_fraction * (budget.capacity_bytes - fixed) : -1;
  else
    budget.kv_budget_bytes = memory_fraction * budget.capacity_bytes - fixed;
  return budget;
}

} // namespace optkit::perf
