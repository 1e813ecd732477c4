// A served model's whole forward step on a CUDA device (serve-deltas --device cuda), over
// cuda/device_decoder.cuh: every decoder layer's weights resident in BF16 (or fp32, for exact
// comparison with the CPU), products in cuBLASLt, each served variant's compressed Δs packed in
// a slot beside them and applied by one SBMM launch per matrix (DeltaZip §5.2), its norms and
// biases in the same slot, keys and values in a paged cache in device memory at the block ids of
// the host KvCache's bookkeeping, and norms, RoPE and attention on the device. The host computes
// only the step's embeddings and reads back its logits. Without CUDA in the build, or without a
// device, opening it throws and says which.
#pragma once

#include "runtime/decoder_weights.hpp"
#include "runtime/delta_variant.hpp"
#include "runtime/kv_cache.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace optkit::runtime {

enum class DevicePrecision { bf16, fp32 };

// One forward step as the device takes it: each row's sequence, position and variant slot
// (−1: the base), the rows whose logits come back.
struct DeviceStep {
  std::span<const SequenceId> sequence;
  std::span<const std::int64_t> position;
  std::span<const std::int32_t> slot;
  std::span<const std::int64_t> output_rows;
  const float* embeddings = nullptr; // [rows, hidden]
};

class DeviceEngine {
public:
  // Opens CUDA device `device`, uploads the weights and allocates the paged cache: `kv_blocks`
  // blocks of kv.block_tokens positions, or as many as kv.budget_bytes holds, or (neither) 90 %
  // of the memory left beside the weights less 1 GiB of working room. Throws RuntimeFailure
  // naming what is missing (CUDA in this build, the device, cuBLASLt, device memory) or what the
  // device does not run (this model's attention shape).
  DeviceEngine(int device, const DecoderWeights& weights, DevicePrecision precision, const KvCacheOptions& kv,
               std::optional<std::int64_t> kv_blocks);
  ~DeviceEngine();
  DeviceEngine(const DeviceEngine&) = delete;
  DeviceEngine& operator=(const DeviceEngine&) = delete;

  std::string device_name() const;
  // The host KvCache options whose block ids and capacity are this device cache's.
  const KvCacheOptions& cache_options() const { return m_cache_options; }
  // Why `variant` cannot be served on the device (empty: it can): LoRA factors, whole matrices
  // and Δs SBMM does not take stay on the CPU path.
  static std::string unsupported(const DeltaVariant& variant, std::int64_t layers);
  // What of `config`'s architecture the device decoder does not run (empty: it runs it all).
  static std::string unsupported(const model::ModelConfig& config);
  // Uploads `variant` into slot `slot`, replacing what it held; nullptr empties it.
  void set_variant(std::int32_t slot, const DeltaVariant* variant);
  // Runs the step over the keys and values `cache` (this device's bookkeeping) holds and writes
  // the output rows' logits, [output_rows, vocab].
  void forward(const DeviceStep& step, const KvCache& cache, float* logits);
  std::uint64_t weight_bytes() const;
  std::uint64_t delta_bytes() const;

private:
  struct State; // the device decoder and the step's host staging
  std::unique_ptr<State> m_state;
  const DecoderWeights* m_weights;
  KvCacheOptions m_cache_options;
};

} // namespace optkit::runtime
