// Does a configuration fit? Per GPU: weights (worst pipeline stage; embeddings and LM head stay
// 16-bit as checkpoints keep them), activations for the largest step, the engine's runtime and
// communication reserve, and the KV cache of every sequence in flight at ISL + OSL — checked
// against the engine's own memory-fraction rule (vLLM/SGLang: a fraction of total memory;
// TensorRT-LLM: a fraction of what is free after weights). Infeasible configurations are dropped,
// never recommended (the failure AIConfigurator issue #1396 traced to a skipped check).
#pragma once

#include "perf/model_arch.hpp"
#include "perf/parallel_config.hpp"
#include "perf/precision.hpp"
#include "perf/system_spec.hpp"

#include <string>

namespace optkit::perf {

// llama.cpp's llama-server has no memory fraction: it sizes its KV cache by the context asked
// for, which the plan's batch × (ISL + OSL) must fit beside the weights, as vLLM's rule checks.
enum class Engine { vllm, sglang, trtllm, llamacpp };
Engine parse_engine(const std::string& text, const std::string& flag);
std::string engine_name(Engine engine);
// The engine's default memory fraction (vLLM gpu-memory-utilization 0.9, SGLang
// mem-fraction-static 0.9, TensorRT-LLM kv_cache_free_gpu_memory_fraction 0.9).
double default_memory_fraction(Engine engine);
// The KV-cache dtype an engine runs when not told (`--kv-dtype auto`): TensorRT-LLM takes it from
// the checkpoint's quantization config, and NVIDIA's FP8/FP4 checkpoints (ModelOpt) quantize the
// KV cache to FP8 with the weights, so FP8 weights mean an FP8 cache; vLLM's and SGLang's `auto`
// and llama.cpp's default keep the model's 16-bit dtype (FP8 there only when told).
Precision default_kv_dtype(Engine engine, Precision weights);

struct MemoryBudget {
  double capacity_bytes = 0;
  double weight_bytes = 0;          // per GPU, worst stage
  double activation_bytes = 0;      // per GPU, largest step
  double reserve_bytes = 0;         // runtime + collective buffers
  double kv_budget_bytes = 0;       // what the engine gives the KV cache (≤ 0: weights do not fit)
  double kv_bytes_per_sequence = 0; // per GPU, one sequence at full length

  // Sequences whose KV cache fits at once (0 when the weights alone do not fit).
  double max_sequences() const { return kv_budget_bytes > 0 ? kv_budget_bytes / kv_bytes_per_sequence : 0; }
  bool fits(double sequences) const { return kv_budget_bytes > 0 && sequences <= max_sequences(); }
  // GiB per GPU used with `sequences` in flight.
  double used_gib(double sequences) const;
};

// `step_tokens`: the most tokens one step processes (prefill chunk or whole prompts);
// `sequence_tokens`: ISL + OSL.
MemoryBudget memory_budget(const ModelArch& model, const SystemSpec& system, const ParallelConfig& parallel,
                           const ServingPrecision& precision, Engine engine, double memory_fraction, double step_tokens,
                           double sequence_tokens);

// KV-cache bytes of one sequence's `tokens` over all layers (what disaggregation moves).
double kv_cache_bytes(const ModelArch& model, const ServingPrecision& precision, double tokens);

} // namespace optkit::perf
