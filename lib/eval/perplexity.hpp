// Perplexity exactly as llama.cpp's `llama-perplexity` measures it, so figures compare with its
// published tables: the text is tokenized once with BOS first; by default it is cut into whole
// windows of `ctx` tokens, each window's first token replaced by BOS (when the tokenizer adds one),
// and the tokens after positions ctx/2 .. ctx-2 are scored (ctx/2 - 1 per window at even ctx);
// the uncertainty is llama-perplexity's (the standard error of the mean NLL, times PPL). With
// `stride`, its --ppl-stride protocol: windows every `stride` tokens, the last `stride` scored. With a base model, the
// same windows also give KL(base || model), top-1 agreement and the change in the probability of the correct token
// (Δp), as llama.cpp's --kl-divergence does.
#pragma once

#include "model/safetensors.hpp"
#include "runtime/activation_precision.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace optkit::eval {

struct PerplexityOptions {
  std::filesystem::path model;
  std::filesystem::path data;
  std::int64_t ctx = 512;
  std::int64_t stride = 0; // 0: whole windows (llama-perplexity's default); else its --ppl-stride
  std::optional<std::filesystem::path> kl_base;
  std::optional<std::filesystem::path> delta; // a compressed delta applied to `model` (its base)
  unsigned threads = 0;
  std::int64_t max_windows = 0; // 0: all
  // How BF16 weights multiply activations (--activations; runtime/activation_precision.hpp).
  runtime::ActivationPrecision activations = runtime::ActivationPrecision::fp32;
  model::LoadMode weights = model::LoadMode::map; // --no-mmap: read (model/safetensors.hpp)
  // --max-memory: refused at start when the run would need more (model/memory_needs.hpp).
  std::optional<std::uint64_t> max_memory;
};

struct KlStats {
  double kl_mean = 0, kl_stderr = 0, kl_max = 0;
  double top1_agreement = 0;
  double delta_p_mean = 0;
  // Percentiles of Δp = p_model(correct) - p_base(correct), in probability units.
  double delta_p_p01 = 0, delta_p_p05 = 0, delta_p_p50 = 0, delta_p_p95 = 0, delta_p_p99 = 0;
  double base_perplexity = 0;
};

struct PerplexityResult {
  std::string method; // one line describing exactly what was scored
  std::int64_t text_bytes = 0;
  std::int64_t text_tokens = 0;
  std::int64_t windows = 0;
  std::int64_t scored_tokens = 0;
  std::int64_t scored_bytes = 0;
  double nll_mean = 0; // nats per scored token
  double perplexity = 0;
  double perplexity_stderr = 0;
  double bits_per_byte = 0;
  double seconds = 0;
  double tokens_per_second = 0; // tokens through the model (incl. unscored context)
  std::optional<KlStats> kl;
  // Per window, in order: mean NLL of its scored tokens, and (with a base) their mean KL — the
  // paired items `eval tasks` compares two models on.
  std::vector<double> window_nll, window_kl;
};

// Runs the evaluation in this process. `on_window(done, total)` reports progress.
PerplexityResult measure_perplexity(const PerplexityOptions& options,
                                    const std::function<void(std::int64_t, std::int64_t)>& on_window = {});

nlohmann::json to_json(const PerplexityResult& result);
PerplexityResult perplexity_result_from_json(const nlohmann::json& json);

} // namespace optkit::eval
