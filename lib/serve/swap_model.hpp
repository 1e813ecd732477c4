// Swap-full-model serving, the baseline DeltaZip measures itself against (vLLM-SCB in the DeltaZip paper,
// §6): every variant is a whole model, and only one is loaded at a time — a step for another
// variant first loads it, evicting the one before. A variant is a delta artifact (the base with
// its Δ merged, as `eval perplexity --delta` loads it) or a checkpoint folder of the base's shape
// (the fine-tuned model itself, mapped from disk as DeltaZip's baseline loads it from storage).
// The engine keeps one model per step (EngineOptions::max_deltas 1 with base_takes_slot), so no
// live sequence ever sees its weights change.
#pragma once

#include "runtime/transformer.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::serve {

class SwapModel final : public runtime::LanguageModel {
public:
  // `variants[i]` (a delta artifact or a checkpoint folder) is variant i; variant -1 is the base,
  // loaded first. InputError naming the folder when a checkpoint has another shape than the base.
  SwapModel(const std::filesystem::path& base, std::vector<std::filesystem::path> variants,
            runtime::RuntimeOptions options);

  const model::ModelConfig& config() const override { return m_model.config(); }
  runtime::SequenceId add_sequence() override { return m_model.add_sequence(); }
  void remove_sequence(runtime::SequenceId sequence) override { m_model.remove_sequence(sequence); }
  std::int64_t sequence_length(runtime::SequenceId sequence) const override {
    return m_model.sequence_length(sequence);
  }
  // Cached blocks are the loaded model's (a swap forgets them all): only its requests reuse them.
  std::int64_t reuse_prefix(runtime::SequenceId sequence, std::span<const runtime::TokenId> tokens,
                            std::int32_t variant) override {
    return variant == m_loaded ? m_model.reuse_prefix(sequence, tokens, -1) : 0;
  }
  // Every input must name the same variant; when it is not the loaded one, it is swapped in first.
  std::vector<float> forward(std::span<const runtime::SequenceInput> inputs) override;

  const runtime::KvCache& kv_cache() const { return m_model.kv_cache(); }
  std::int64_t swaps() const { return m_swaps; }
  // The step's CUDA device (empty: the CPU); a swap re-uploads the weights there.
  std::string device_name() const { return m_model.device() ? m_model.device()->device_name() : std::string(); }
  double swap_seconds() const { return m_swap_seconds; }

private:
  // What loading variant i means: `model_dir`'s weights, with `delta` merged when there is one.
  struct WholeModel {
    std::filesystem::path model_dir;
    std::optional<std::filesystem::path> delta;
  };
  WholeModel whole_model(std::int32_t variant) const;

  std::filesystem::path m_base;
  runtime::CpuTransformer m_model;
  std::vector<WholeModel> m_variants;
  std::int32_t m_loaded = -1;
  std::int64_t m_swaps = 0;
  double m_swap_seconds = 0;
};

} // namespace optkit::serve
