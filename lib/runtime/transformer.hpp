// The transformer for inference: Llama / Mistral / Qwen2 / Qwen3 decoder layers (RMSNorm, RoPE
// incl. llama3 scaling, grouped-query attention over a block KV cache, SwiGLU) over LinearWeight
// layers, fp32 activations, multi-threaded on the CPU, or the whole step on a CUDA device
// (runtime/device_engine.hpp). Batches sequences of different lengths and phases in one pass.
// Layer-wise calibration runs over the same weights through LayerwiseModel.
#pragma once

#include "core/thread_pool.hpp"
#include "runtime/decoder_pass.hpp"
#include "runtime/decoder_weights.hpp"
#include "runtime/delta_variant.hpp"
#include "runtime/device_engine.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/language_model.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace optkit::runtime {

struct RuntimeOptions {
  unsigned threads = 0; // 0: one per available CPU (core/available_cpus.hpp)
  // A compressed delta (optkit compress delta) applied to the model folder, which must be the
  // delta's base: W_base + Δ merged on load, the variant's norms taken from the delta.
  std::optional<std::filesystem::path> delta;
  KvCacheOptions kv_cache; // byte budget (0: none) and block size
  // How BF16 weights multiply their activations on the CPU (runtime/activation_precision.hpp).
  ActivationPrecision activations = ActivationPrecision::fp32;
  // The weights mapped from the safetensors files (zero copy, shared) or read into this process's
  // memory on huge pages (--no-mmap; faster decode and prefill, model/safetensors.hpp).
  model::LoadMode weight_loading = model::LoadMode::map;
  // Served deltas multiply their packed Δs with activations quantized to int8 per row where the
  // CPU has the integer kernel (runtime/delta_int8.hpp: decode steps several times faster, exact
  // within the activation quantization); false: fp32 activations, the merged model's product to
  // fp32 rounding.
  bool int8_delta_activations = true;
  // A CUDA device for the whole step (runtime/device_engine.hpp); −1: the CPU. On a device the KV
  // cache lives in device memory: kv_cache.budget_bytes sizes it (0: most of the memory left).
  int device = -1;
  DevicePrecision device_precision = DevicePrecision::bf16;
};

class CpuTransformer final : public LanguageModel {
public:
  CpuTransformer(const std::filesystem::path& model_dir, RuntimeOptions options = {});

  const model::ModelConfig& config() const override { return m_weights.config(); }
  SequenceId add_sequence() override { return m_cache.add(); }
  void remove_sequence(SequenceId sequence) override;
  std::int64_t sequence_length(SequenceId sequence) const override { return m_cache.length(sequence); }
  std::int64_t reuse_prefix(SequenceId sequence, std::span<const TokenId> tokens, std::int32_t variant) override {
    return m_cache.reuse_prefix(sequence, tokens, variant);
  }
  // Throws KvCacheFull, with nothing appended, when the batch's new tokens do not fit the budget.
  // LongRoPE: a sequence that grows past long_rope_threshold() in this pass is computed again from
  // its first token with the long factors, as transformers' generate() drops its cache there (a
  // prefix's keys depend on the whole sequence's length, so prefix caching is off for these models).
  std::vector<float> forward(std::span<const SequenceInput> inputs) override;

  // The KV cache's capacity and use (blocks, budget), for a scheduler.
  const KvCache& kv_cache() const { return m_cache; }
  // The mixture-of-experts layers' routing so far (CPU passes): rows and calls per expert.
  const ExpertCounts& expert_counts() const { return m_pass.expert_counts(); }
  // Serves a compressed delta of this model (optkit compress delta) beside it, decoupled: the
  // base weights shared, the Δs kept compressed. Returns the id inputs name it by.
  std::int32_t add_variant(const std::filesystem::path& delta_dir);
  // The same in two halves, for a server that loads deltas while it serves: load_variant reads
  // and checks the artifact against the base (safe while forward() runs on another thread: it
  // only reads the base weights); set_variant installs it under `id` (nullptr evicts it) and must
  // not run concurrently with forward(). An id whose slot is empty is refused by forward().
  // `checkpoint` runs between layers and throws to abandon the load (DeltaVariant).
  std::unique_ptr<DeltaVariant> load_variant(const std::filesystem::path& delta_dir,
                                             const std::function<void()>& checkpoint = {}) const;
  void set_variant(std::int32_t id, std::unique_ptr<DeltaVariant> variant);
  // Replaces the weights by those of `model_dir` (the model's own folder, or a checkpoint of the
  // same shape) merged with `delta` (none: the folder's weights as they are), as loading that model
  // anew would: swap-full-model serving, the baseline DeltaZip measures itself against. Throws,
  // changing nothing, while the KV cache holds anything, variants are served beside the weights,
  // or the new weights have another shape.
  void reload(const std::filesystem::path& model_dir, const std::optional<std::filesystem::path>& delta);
  const DeltaVariant& variant(std::int32_t id) const { return *m_variants.at(static_cast<std::size_t>(id)); }
  // Bytes of weights a decode step streams (all linear layers and the LM head).
  std::uint64_t weight_bytes() const { return m_weights.streamed_bytes(); }
  // The device the step runs on, when options.device chose one (null: the CPU).
  const DeviceEngine* device() const { return m_device.get(); }

private:
  // The device's copy of the weights, when options.device chose one (else null), with a cache of
  // `kv_blocks` blocks (nullopt: as the options size it).
  std::unique_ptr<DeviceEngine> open_device(std::optional<std::int64_t> kv_blocks) const;
  // The step's logits on the CPU or on the device.
  std::vector<float> run_on_cpu(std::span<const SequenceInput> inputs, std::vector<float>& x);
  std::vector<float> run_on_device(std::span<const SequenceInput> inputs, const std::vector<float>& x);

  std::filesystem::path m_dir;
  DecoderWeights m_weights;
  std::vector<std::unique_ptr<DeltaVariant>> m_variants;
  ThreadPool m_pool;
  DecoderPass m_pass;
  int m_device_index = -1;
  DevicePrecision m_precision;
  bool m_int8_delta_activations;
  ActivationPrecision m_activations; // for reload()
  model::LoadMode m_weight_loading;  // for reload()
  KvCacheOptions m_kv_options;
  std::unique_ptr<DeviceEngine> m_device; // after the weights it holds a copy of, before the cache it sizes
  KvCache m_cache;
  BatchRows m_rows; // reused from step to step
  // LongRoPE: the tokens of each sequence not yet past the threshold, and a pass's inputs with a
  // crossing sequence's earlier tokens put back in front of its new ones (how many rows: m_prefix_rows).
  std::map<SequenceId, std::vector<TokenId>> m_short_tokens;
  std::vector<std::vector<TokenId>> m_recomputed_tokens;
  std::vector<SequenceInput> m_recomputed_inputs;
  std::vector<std::int64_t> m_prefix_rows;
  std::span<const SequenceInput> recompute_crossing(std::span<const SequenceInput> inputs);
  void remember_short_tokens(std::span<const SequenceInput> inputs);
};

} // namespace optkit::runtime
